package e2e

import (
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/demo/trip"
	"github.com/esjet/esjet/internal/natstest"
	"github.com/esjet/esjet/internal/projection"
	"github.com/esjet/esjet/internal/wire"
)

// The rolling upgrade (issue 32): two nodes of build A (today's trip) serve
// one namespace on one NATS server; they are replaced one at a time by
// build B (demo.build: next: trip_requested at schema 3 with an upcaster,
// book_hotel issued at payload schema 2), with trips flowing, one node of
// each build killed -9 on the way. B's hotel workers understand schema 2;
// A's call a hotel service that only understands schema 1 (the ledger's
// ledger.hotels.book.v1, which reports any schema-2 payload it is sent as a
// problem). So A must leave B's book_hotel commands for B, without
// burning their attempts, and refuse B's trips (schema_too_new) rather
// than guess. B also adds a command kind: a trip it confirms fires
// send_itinerary, for which A has no worker, so each waits for a B node.
// Nothing may be lost or applied twice, and the views end equal to a
// rebuild from scratch.

// upgradeV1Hotels is build A's hotel service: it understands book_hotel at
// payload schema 1 only.
const upgradeV1Hotels = "ledger.hotels.book.v1"

// attachV1Hotels serves upgradeV1Hotels on the ledger: a schema-2 payload
// there (a worker ran a command it does not understand) is a problem.
func (l *effectLedger) attachV1Hotels(url string) {
	l.attachSubject(url, upgradeV1Hotels, "book_hotel", func(m *nats.Msg) {
		var p map[string]json.RawMessage
		_ = json.Unmarshal(m.Data, &p)
		if _, v2 := p["price_cents"]; v2 || m.Header.Get(wire.HeaderCommandSchema) != "" {
			l.problem("the schema-1 hotel service was sent %s at schema %q: %s", m.Header.Get("Idempotency-Key"), m.Header.Get(wire.HeaderCommandSchema), m.Data)
		}
	})
}

// upgradeItineraries is build B's itinerary service (the kind B adds).
const upgradeItineraries = "ledger.itineraries.send"

// attachSubject serves kind's effect on subject (a subject of its own
// beside ledgerSubjects) with a connection to url; check, if set, looks at
// each request first.
func (l *effectLedger) attachSubject(url, subject, kind string, check func(*nats.Msg)) {
	l.t.Helper()
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond), nats.Name("ledger "+subject))
	if err != nil {
		l.t.Fatalf("ledger: connect %s: %v", url, err)
	}
	if _, err := nc.QueueSubscribe(subject, "ledger", func(m *nats.Msg) {
		if check != nil {
			check(m)
		}
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			l.handle(kind, m)
		}()
	}); err != nil {
		l.t.Fatal(err)
	}
	l.mu.Lock()
	l.conns = append(l.conns, nc)
	l.mu.Unlock()
}

// upgradeDeferred is what a worker logs when it first leaves a command for
// a newer worker.
const upgradeDeferred = "left for a newer worker, counting no attempt"

// upgradeFleet is the nodes the load is sent to, in turn.
type upgradeFleet struct {
	mu    sync.Mutex
	nodes []*node
	next  int
}

func (f *upgradeFleet) set(i int, n *node) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nodes[i] = n
}

func (f *upgradeFleet) get() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.next++
	return f.nodes[f.next%len(f.nodes)].httpAddr
}

func TestRollingUpgradeUnderLoad(t *testing.T) {
	t.Parallel()
	srv := natstest.RunServer(t)
	url := srv.ClientURL()
	ledger := newEffectLedger(t)
	ledger.attach(url)
	ledger.attachV1Hotels(url)
	ledger.attachSubject(url, upgradeItineraries, trip.KindSendItinerary, nil)
	kinds := slices.Sorted(mapKeys(ledgerSubjects))
	cfgA := writeLedgerConfig(t, kinds, func(kind string) ledgerKind {
		if kind == "book_hotel" {
			return ledgerKind{subject: upgradeV1Hotels, timeout: "5s"}
		}
		return ledgerKind{timeout: "5s"}
	}, "")
	cfgB := writeLedgerConfig(t, append(slices.Clone(kinds), trip.NextKinds...), func(kind string) ledgerKind {
		switch kind {
		case "book_hotel":
			return ledgerKind{timeout: "5s", more: "    schema: 2\n"}
		case trip.KindSendItinerary:
			return ledgerKind{subject: upgradeItineraries, timeout: "5s"}
		}
		return ledgerKind{timeout: "5s"}
	}, "demo:\n  build: next\n")
	env := faultEnv
	startA := func(dir string) *node { return startNodeEnv(t, dir, env, "--url", url, "--config", cfgA) }
	startB := func(dir string) *node { return startNodeEnv(t, dir, env, "--url", url, "--config", cfgB) }
	dirs := []string{t.TempDir(), t.TempDir()}
	var all []*node
	keep := func(n *node) *node { all = append(all, n); return n }
	fleet := &upgradeFleet{nodes: []*node{keep(startA(dirs[0])), keep(startA(dirs[1]))}}
	t.Cleanup(func() {
		if t.Failed() {
			for i, n := range all {
				t.Logf("node %d's log:\n%s", i, n.stderr.String())
			}
		}
	})

	// About 13 trips a second for 20 s and more: the load runs through
	// every step of the upgrade.
	const trips = 300
	load := startLoad(t, fleet.get, trips, faultClients, 300*time.Millisecond)
	more := func(k int) { load.waitAcked(t, min(load.ackedCount()+k, trips)) }
	more(10)
	// Node 0: killed -9 mid-load, replaced by build B.
	a0 := fleet.nodes[0]
	a0.kill9(t)
	fleet.set(0, keep(startB(dirs[0])))
	t.Logf("node 0 killed and replaced by build B; %d trips acknowledged", load.ackedCount())

	// A and B side by side: A's hotel workers leave B's book_hotel for B.
	a1 := fleet.nodes[1]
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if strings.Contains(a1.stderr.String(), upgradeDeferred) {
			break
		}
	}
	more(10)
	// Node 1: stopped (a graceful upgrade), replaced by build B.
	a1.stop(t, syscall.SIGTERM)
	fleet.set(1, keep(startB(dirs[1])))
	t.Logf("node 1 upgraded to build B; %d trips acknowledged", load.ackedCount())
	more(10)
	// A kill of the new build too.
	fleet.nodes[0].kill9(t)
	b0 := keep(startB(dirs[0]))
	fleet.set(0, b0)
	recovered := time.Now()
	t.Logf("node 0 (build B) killed and restarted; %d trips acknowledged", load.ackedCount())

	checkScenario(t, scenario{name: "rolling-upgrade", load: load, ledger: ledger, httpAddr: func() string { return b0.httpAddr }, natsURL: url, recovered: recovered})
	deferred := strings.Count(all[0].stderr.String()+all[1].stderr.String(), upgradeDeferred)
	t.Logf("build A's workers left %d book_hotel commands of schema 2 for build B", deferred)
	if deferred == 0 {
		t.Errorf("build A's workers never left a book_hotel of schema 2 for build B (did they run them?)")
	}
	for _, n := range all[:2] {
		if strings.Contains(n.stderr.String(), "dead-lettered") {
			t.Errorf("a build A node dead-lettered a command")
		}
	}
	_, js := natstest.Connect(t, srv)
	upgradeItinerariesSentOnce(t, js, ledger)
	upgradeViewsMatchARebuild(t, js)
}

// upgradeItinerariesSentOnce checks the kind build B added: trips B
// confirmed fired send_itinerary, and each of those commands ran exactly
// once, though build A's nodes served the namespace beside B's for a
// while with no worker for it.
func upgradeItinerariesSentOnce(t *testing.T, js jetstream.JetStream, ledger *effectLedger) {
	t.Helper()
	names := wire.NamesFor("demo")
	st, err := js.Stream(t.Context(), names.Outbox)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(t.Context(), jetstream.WithSubjectFilter(names.OutboxFilter()))
	if err != nil {
		t.Fatal(err)
	}
	issued := uint64(0)
	for subject, n := range info.State.Subjects {
		if strings.HasPrefix(subject, names.OutboxPrefix()+trip.KindSendItinerary) {
			issued += n
		}
	}
	ledger.mu.Lock()
	sent := 0
	for lk, keys := range ledger.logical {
		if strings.HasPrefix(lk, trip.KindSendItinerary+"|") {
			sent += len(keys)
		}
	}
	ledger.mu.Unlock()
	t.Logf("build B fired %d send_itinerary commands; %d itineraries sent", issued, sent)
	if issued == 0 || uint64(sent) != issued {
		t.Errorf("send_itinerary: %d commands in OUTBOX, %d itineraries sent; want some, each sent once", issued, sent)
	}
}

// upgradeViewsMatchARebuild checks that traveler_spend, as the live view
// built it across both builds, kills and the hand-over of its partitions,
// holds what a rebuild from scratch holds.
func upgradeViewsMatchARebuild(t *testing.T, js jetstream.JetStream) {
	t.Helper()
	views := projection.NewViews(js, "demo", 0)
	const view = "traveler_spend"
	// Three minutes: the live view catches up with the log after the
	// kills, and a loaded machine (load ~45 beside the whole suite) took
	// more than one.
	natstest.Eventually(t, 3*time.Minute, func() bool {
		st, err := views.Status(t.Context(), view)
		if err != nil {
			return false
		}
		caught := 0
		for _, p := range st.Parts {
			if seq, _ := wire.SplitPosition(p.Position); p.Generation == 1 && seq >= st.LogEnd {
				caught++
			}
		}
		return caught == st.Partitions
	})
	gen, err := views.Rebuild(t.Context(), view)
	if err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 2*time.Minute, func() bool {
		st, err := views.Status(t.Context(), view)
		return err == nil && st.Active == gen && st.Building == 0
	})
	want := viewDocs(t, js, projection.ViewBucket("demo", view, gen))
	got := viewDocs(t, js, projection.ViewBucket("demo", view, 1))
	for k, v := range want {
		if !strings.HasPrefix(k, "trip/") && got[k] != v { // trip/ documents hold sealed names: other bytes each time
			t.Errorf("live view: %s = %s, a rebuild from scratch says %s", k, got[k], v)
		}
	}
	if len(got) != len(want) || len(want) == 0 {
		t.Errorf("the live view holds %d documents, a rebuild from scratch %d", len(got), len(want))
	}
	t.Logf("views: %d documents of %s equal to a rebuild from scratch", len(want), view)
}
