package broker_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/broker"
	"github.com/esjet/esjet/internal/natstest"
	"github.com/esjet/esjet/internal/shred"
	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/wire"
)

// matrixMD, when set, is where TestJetStreamAPIMatrix writes the
// classification as a markdown table (docs/security.md's table is
// written from it): go test ./internal/broker -run Matrix -matrix.md /tmp/m.md
var matrixMD = flag.String("matrix.md", "", "write the JetStream API permission matrix as markdown to this file")

// The namespace and users of the matrix.
const (
	mxNS       = "mx"
	mxRecvSubj = "billing.charge"
	mxRecvBkt  = "billing_receipts"
	mxView     = "orders"
	// mxFlightsSubj is a second receiver's subject (user mxFlights).
	mxFlightsSubj = "flights.book"
)

var mxFlights = mxUser{"mx-flights", broker.RoleReceiver, broker.InboxPrefix("mx-flights")}

// mxTargets are the columns of the matrix: esjet's streams and buckets of
// namespace mx, the receiver's own bucket (a stream in the receiver's
// account; in the namespace account that name does not exist) and a fresh
// name. subject is one subject the stream stores.
var mxTargets = []struct{ col, stream, subject string }{
	{"EVENTS", "MX_EVENTS", "mx.evt.trip.t1"},
	{"OUTBOX", "MX_OUTBOX", "mx.outbox.book_flight"},
	{"DLQ", "MX_DLQ", "mx.dlq.book_flight"},
	{"snapshots", "KV_mx_snapshots", "$KV.mx_snapshots.k"},
	{"receipts", "KV_mx_receipts", "$KV.mx_receipts.k"},
	{"projections", "KV_mx_projections", "$KV.mx_projections.k"},
	{"view", "KV_mx_view_orders", "$KV.mx_view_orders.k"},
	{"reconcile", "OBJ_mx_reconcile", "$O.mx_reconcile.M.x"},
	{"keys", "KV_mx_keys", "$KV.mx_keys.k"},
	{"receiver's bucket", "KV_" + mxRecvBkt, "$KV." + mxRecvBkt + ".k"},
	{"new name", "FRESH", "fresh.x"},
}

// verbForm says how a verb's wildcards are filled in.
type verbForm int

const (
	// formAccount: no stream (or the account's name for ACCOUNT.PURGE.*).
	formAccount        verbForm = iota
	formStream                  // <stream>
	formConsumer                // <stream>.<consumer>
	formSubject                 // <stream>.<subject>
	formConsumerFilter          // <stream>.<consumer>.<filter subject>
	formAccountStream           // <account>.<stream>
)

// verbRule is one row of the matrix: how to fill the verb in, and which
// roles get an answer from the JetStream API, per column of mxTargets (one
// cell for every column of a formAccount verb). Roles are letters: n node,
// c client, r receiver, o operator, a admin; "-" is no role.
type verbRule struct {
	verb  string
	form  verbForm
	cells string
	note  string
}

// matrix is the classification: every JetStream API verb the pinned
// nats-server or the oldest esjet runs on (MinServerVersion) serves
// (parsed from its source at test time) must have a row, in the order
// docs/security.md's table shows them; it is that table's single source
// (-matrix.md).
//
// Columns: EVENTS OUTBOX DLQ snapshots receipts projections view reconcile
// keys "receiver's bucket" "new name".
var matrix = []verbRule{
	// Account-wide reads: every JetStream user in its own account; the
	// operator's through the namespace account's export; the client's
	// account has no JetStream and no such import.
	{"$JS.API.INFO", formAccount, "nroa", "account info"},
	{"$JS.API.STREAM.NAMES", formAccount, "nroa", "stream names"},
	{"$JS.API.STREAM.LIST", formAccount, "nroa", "stream configs"},

	// Streams. Only admin creates (the node only its own, when missing),
	// updates, deletes, purges (the node its views), snapshots, restores.
	// The receiver creates and updates its own bucket, in its own account.
	{"$JS.API.STREAM.CREATE.*", formStream, "na na na na na na na a na ra a", "create (config carries republish/sources/mirror/subjects)"},
	{"$JS.API.STREAM.UPDATE.*", formStream, "a a a a a a a a a ra a", "update (limits delete history)"},
	{"$JS.API.STREAM.INFO.*", formStream, "noa noa noa noa noa noa noa oa noa roa oa", "stream info"},
	{"$JS.API.STREAM.DELETE.*", formStream, "a a a a a a a a a a a", "delete stream"},
	{"$JS.API.STREAM.PURGE.*", formStream, "a a a a a a na a a a a", "purge (the node its view buckets)"},
	{"$JS.API.STREAM.SNAPSHOT.*", formStream, "a a a a a a a a a a a", "snapshot (the server pushes the stream's data to a subject)"},
	{"$JS.API.STREAM.RESTORE.*", formStream, "a a a a a a a a a a a", "restore (creates a stream)"},
	{"$JS.API.STREAM.MSG.DELETE.*", formStream, "a a a a a a a a na a a", "delete a message"},
	{"$JS.API.STREAM.MSG.GET.*", formStream, "noa noa noa noa noa noa noa oa na roa oa", "get a message"},
	// Stream templates (served up to 2.12, removed since): a template
	// creates streams on publish. The template takes each target's name.
	{"$JS.API.STREAM.TEMPLATE.CREATE.*", formStream, "a a a a a a a a a a a", "create a stream template"},
	{"$JS.API.STREAM.TEMPLATE.DELETE.*", formStream, "a a a a a a a a a a a", "delete a stream template"},
	{"$JS.API.STREAM.TEMPLATE.INFO.*", formStream, "a a a a a a a a a a a", "stream template info"},
	{"$JS.API.STREAM.TEMPLATE.NAMES", formAccount, "a", "stream template names"},
	// Direct gets are answered only by a stream with allow_direct (none
	// answers for a name that does not exist).
	{"$JS.API.DIRECT.GET.*", formStream, "noa noa noa noa noa noa noa oa na r -", "direct get"},
	{"$JS.API.DIRECT.GET.*.>", formSubject, "noa noa noa noa noa noa noa oa na r -", "direct get, last by subject"},

	// Consumers: the node creates and deletes its own on its streams; a
	// consumer writes where its deliver subject says, so no other role.
	{"$JS.API.CONSUMER.CREATE.*", formStream, "na na na na na na na a na a a", "create consumer (a push consumer's deliver subject is written by the server)"},
	{"$JS.API.CONSUMER.CREATE.*.>", formConsumerFilter, "na na na na na na na a na a a", "create named consumer with filter"},
	{"$JS.API.CONSUMER.DURABLE.CREATE.*.*", formConsumer, "na na na na na na na a na a a", "create durable (legacy)"},
	{"$JS.API.CONSUMER.NAMES.*", formStream, "noa noa noa noa noa noa noa oa noa roa oa", "consumer names"},
	{"$JS.API.CONSUMER.LIST.*", formStream, "noa noa noa noa noa noa noa oa noa roa oa", "consumer infos"},
	{"$JS.API.CONSUMER.INFO.*.*", formConsumer, "noa noa noa noa noa noa noa oa noa roa oa", "consumer info"},
	{"$JS.API.CONSUMER.DELETE.*.*", formConsumer, "na na na na na na na a na a a", "delete consumer"},
	{"$JS.API.CONSUMER.PAUSE.*.*", formConsumer, "a a a a a a a a a a a", "pause consumer"},
	{"$JS.API.CONSUMER.UNPIN.*.*", formConsumer, "na na na na na na na a na a a", "unpin a priority group's client"},
	// Answered by the consumer itself: only where it exists (the matrix
	// consumer on each esjet stream of the namespace account).
	{"$JS.API.CONSUMER.MSG.NEXT.*.*", formConsumer, "na na na na na na na a na - -", "pull messages"},
	{"$JS.API.CONSUMER.RESET.*.*", formConsumer, "a a a a a a a a a - -", "reset a consumer's position (redelivers)"},

	// Clustering and placement: admin only (a standalone server answers
	// "not clustered"; the system account's requests answer nowhere else).
	{"$JS.API.STREAM.PEER.REMOVE.*", formStream, "a a a a a a a a a a a", "remove a stream peer"},
	{"$JS.API.STREAM.PEER.EVACUATE.*", formStream, "a a a a a a a a a a a", "evacuate a stream peer"},
	{"$JS.API.STREAM.CANCEL_MOVE.*", formStream, "a a a a a a a a a a a", "cancel a stream move"},
	{"$JS.API.STREAM.LEADER.STEPDOWN.*", formStream, "a a a a a a a a a a a", "stream leader stepdown"},
	{"$JS.API.CONSUMER.LEADER.STEPDOWN.*.*", formConsumer, "a a a a a a a a a a a", "consumer leader stepdown"},
	{"$JS.API.CONSUMER.PEER.REMOVE.*.*", formConsumer, "a a a a a a a a a a a", "remove a consumer peer"},
	{"$JS.API.CONSUMER.PEER.EVACUATE.*.*", formConsumer, "a a a a a a a a a a a", "evacuate a consumer peer"},
	{"$JS.API.META.LEADER.STEPDOWN", formAccount, "-", "system account only"},
	{"$JS.API.SERVER.REMOVE", formAccount, "-", "system account only"},
	{"$JS.API.SERVER.EVACUATE", formAccount, "-", "system account only"},
	{"$JS.API.META.RESCUE", formAccount, "-", "system account only"},
	{"$JS.API.ACCOUNT.PURGE.*", formAccount, "-", "system account only"},
	{"$JS.API.ACCOUNT.STREAM.MOVE.*.*", formAccountStream, "- - - - - - - - - - -", "system account only"},
	{"$JS.API.ACCOUNT.STREAM.CANCEL_MOVE.*.*", formAccountStream, "- - - - - - - - - - -", "system account only"},
}

var roleLetters = map[string]string{"n": broker.RoleNode, "c": broker.RoleClient, "r": broker.RoleReceiver, "o": broker.RoleOperator, "a": broker.RoleAdmin}

// rolesOf turns a cell ("noa", "-") into role names in broker.Roles order.
func rolesOf(t *testing.T, cell string) []string {
	t.Helper()
	var out []string
	for _, r := range broker.Roles {
		for l, name := range roleLetters {
			if name == r && strings.Contains(cell, l) {
				out = append(out, r)
			}
		}
	}
	for _, c := range cell {
		if _, ok := roleLetters[string(c)]; !ok && c != '-' {
			t.Fatalf("matrix cell %q: unknown role letter %q", cell, c)
		}
	}
	return out
}

// serverVerbs parses the JetStream API subjects out of the source of a
// nats-server module (dir): every string constant of
// server/jetstream_api.go under $JS.API. (the *T printf forms only where
// no wildcard form exists), wildcards as '*' and '>'.
func serverVerbs(t *testing.T, dir string) []string {
	t.Helper()
	file := filepath.Join(dir, "server", "jetstream_api.go")
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
	if err != nil {
		t.Fatalf("cannot parse %s: %v", file, err)
	}
	consts := map[string]string{}
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, s := range g.Specs {
			vs := s.(*ast.ValueSpec)
			for i, n := range vs.Names {
				if i >= len(vs.Values) {
					continue
				}
				lit, ok := vs.Values[i].(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					continue
				}
				v, err := strconv.Unquote(lit.Value)
				if err != nil || !strings.HasPrefix(v, "$JS.API.") || v == "$JS.API.>" || strings.HasSuffix(n.Name, "Pre") {
					continue
				}
				consts[n.Name] = v
			}
		}
	}
	seen := map[string]bool{}
	var verbs []string
	for name, v := range consts {
		if base, ok := strings.CutSuffix(name, "T"); ok {
			if _, has := consts[base]; has {
				continue
			}
		}
		v = strings.ReplaceAll(v, "%s", "*")
		if !seen[v] {
			seen[v] = true
			verbs = append(verbs, v)
		}
	}
	slices.Sort(verbs)
	if len(verbs) < 20 {
		t.Fatalf("parsed only %d JetStream API subjects from %s: %q", len(verbs), file, verbs)
	}
	return verbs
}

// instantiate fills verb's wildcards in for target (an mxTargets entry),
// with consumer "matrix".
func instantiate(verb string, form verbForm, stream, subject string) string {
	base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(verb, ".>"), ".*"), ".*")
	switch form {
	case formAccount:
		if strings.HasSuffix(verb, ".*") {
			return base + "." + broker.NamespaceAccount(mxNS)
		}
		return verb
	case formStream:
		return base + "." + stream
	case formConsumer:
		return base + "." + stream + ".matrix"
	case formSubject:
		return base + "." + stream + "." + subject
	case formConsumerFilter:
		return base + "." + stream + ".matrix." + subject
	case formAccountStream:
		return base + "." + broker.NamespaceAccount(mxNS) + "." + stream
	}
	panic("form")
}

// mxUser is one role's user of the matrix server.
type mxUser struct {
	name, role, inbox string
}

func mxUsers() []mxUser {
	var us []mxUser
	for _, r := range broker.Roles {
		name := mxNS + "-" + r
		inbox := broker.InboxPrefix(name)
		if r == broker.RoleNode {
			inbox = broker.NodeInboxPrefix(mxNS)
		}
		us = append(us, mxUser{name, r, inbox})
	}
	return us
}

// mxAccountsConfig is the accounts block broker.ServerAccounts prints for
// namespace mxNS (what `esjet permissions` prints), one user per role,
// password "pw-<user>"; the receiver serves mxRecvSubj and keeps bucket
// mxRecvBkt, a second receiver (mxFlights) serves mxFlightsSubj without
// one; the node runs view mxView and requests both subjects.
func mxAccountsConfig(t *testing.T) string {
	t.Helper()
	var users []broker.RoleUser
	for _, u := range mxUsers() {
		spec := broker.RoleSpec{Namespace: mxNS, Targets: []string{mxRecvSubj, mxFlightsSubj}, Views: []string{mxView}, User: u.name}
		if u.role == broker.RoleReceiver {
			spec = broker.RoleSpec{Namespace: mxNS, Subject: mxRecvSubj, Bucket: mxRecvBkt, User: u.name}
		}
		p, err := broker.RolePermissions(u.role, spec)
		if err != nil {
			t.Fatal(err)
		}
		users = append(users, broker.RoleUser{Name: u.name, Role: u.role, Permissions: p, Subject: spec.Subject, Bucket: spec.Bucket, Password: "pw-" + u.name})
	}
	// A second receiver, without a bucket, serving another target: the
	// one whose subject a hostile receiver tries to capture.
	p, err := broker.RolePermissions(broker.RoleReceiver, broker.RoleSpec{Namespace: mxNS, Subject: mxFlightsSubj, User: mxFlights.name})
	if err != nil {
		t.Fatal(err)
	}
	users = append(users, broker.RoleUser{Name: mxFlights.name, Role: broker.RoleReceiver, Permissions: p, Subject: mxFlightsSubj, Password: "pw-" + mxFlights.name})
	accounts, err := broker.Accounts(mxNS, users)
	if err != nil {
		t.Fatal(err)
	}
	return broker.ServerAccounts(accounts)
}

// runPinnedServer runs the pinned nats-server in process with config and
// JetStream, and returns its URL.
func runPinnedServer(t *testing.T, config string) string {
	t.Helper()
	parsed := &server.Options{}
	if err := parsed.ProcessConfigString(config); err != nil {
		t.Fatalf("the accounts config does not load: %v\n%s", err, config)
	}
	s := natstest.RunServer(t, func(o *server.Options) {
		o.Accounts, o.Users, o.Nkeys = parsed.Accounts, parsed.Users, parsed.Nkeys
	})
	return s.ClientURL()
}

// mxConn is a connection as one role's user that records the publish
// permission violations the server reports, by subject.
type mxConn struct {
	nc *nats.Conn
	js jetstream.JetStream

	mu        sync.Mutex
	violated  map[string]bool
	listeners map[string]func()
}

func connectMX(t *testing.T, url string, u mxUser) *mxConn {
	t.Helper()
	c := &mxConn{violated: map[string]bool{}, listeners: map[string]func(){}}
	nc, err := nats.Connect(url, nats.UserInfo(u.name, "pw-"+u.name), nats.Name(u.name), nats.CustomInboxPrefix(u.inbox),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			msg := err.Error()
			if !strings.Contains(strings.ToLower(msg), "permissions violation") {
				return
			}
			_, rest, _ := strings.Cut(msg, `"`)
			subj, _, _ := strings.Cut(rest, `"`)
			c.mu.Lock()
			defer c.mu.Unlock()
			c.violated[subj] = true
			if f := c.listeners[subj]; f != nil {
				f()
			}
		}))
	if err != nil {
		t.Fatalf("connect as %s: %v", u.name, err)
	}
	t.Cleanup(nc.Close)
	c.nc = nc
	c.js, err = jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// outcome is what became of one request.
type outcome string

const (
	answered     outcome = "answered"      // the JetStream API (or a consumer) replied, an error reply included
	violation    outcome = "denied"        // the server refused the publish: permissions violation
	noResponders outcome = "no responders" // nobody in the account serves the subject
	silent       outcome = "silent"        // no reply within the timeout
)

// ask sends a request with a body no JetStream handler accepts as a valid
// request ("{": a JSON object that does not parse, so neither an empty
// request, which a delete wants, nor a plain text one, which a purge or a
// pull takes as "everything" or a batch size), so an answered request
// changes nothing, and classifies what came back.
func (c *mxConn) ask(ctx context.Context, subject string, timeout time.Duration) outcome {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c.mu.Lock()
	c.listeners[subject] = cancel
	c.mu.Unlock()
	m, err := c.nc.RequestMsgWithContext(ctx, &nats.Msg{Subject: subject, Data: []byte("{")})
	c.mu.Lock()
	delete(c.listeners, subject)
	denied := c.violated[subject]
	c.mu.Unlock()
	switch {
	case denied:
		return violation
	case errors.Is(err, nats.ErrNoResponders):
		return noResponders
	case err != nil:
		return silent
	case m.Header.Get("Status") == "503":
		return noResponders
	}
	return answered
}

// provisionMX creates namespace mx's streams and buckets as esjet
// provision does (admin), the read model buckets and the reconcile object
// store, a message in each, a pull consumer "matrix" on each; and the
// receiver's bucket in the receiver's account, as the receiver.
func provisionMX(t *testing.T, ctx context.Context, admin, recv *mxConn) map[string]uint64 {
	t.Helper()
	if _, err := streams.Provision(ctx, admin.js, mxNS, streams.ProvisionConfig{}, nil); err != nil {
		t.Fatalf("provision: %v", err)
	}
	for _, b := range []string{wire.ProjectionsBucket(mxNS), "mx_view_" + mxView} {
		kv, err := admin.js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: b})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := kv.Put(ctx, "k", []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := admin.js.CreateStream(ctx, shred.BucketStream(mxNS, 1)); err != nil {
		t.Fatalf("keys bucket: %v", err)
	}
	if _, err := admin.js.Publish(ctx, wire.KVSubject(wire.KeysBucket(mxNS), "k"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	obs, err := admin.js.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: mxNS + "_reconcile"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := obs.PutString(ctx, "x", "checkpoint"); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"mx.evt.trip.t1", "mx.outbox.book_flight", "mx.dlq.book_flight", "$KV.mx_snapshots.k", "$KV.mx_receipts.k"} {
		if _, err := admin.js.Publish(ctx, s, []byte("v")); err != nil {
			t.Fatalf("publish %s: %v", s, err)
		}
	}
	kv, err := recv.js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: mxRecvBkt})
	if err != nil {
		t.Fatalf("receiver: create its bucket: %v", err)
	}
	if _, err := kv.Put(ctx, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	counts := map[string]uint64{}
	for _, tg := range mxTargets {
		if tg.col == "receiver's bucket" || tg.col == "new name" {
			continue
		}
		st, err := admin.js.Stream(ctx, tg.stream)
		if err != nil {
			t.Fatalf("stream %s: %v", tg.stream, err)
		}
		if _, err := st.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "matrix", AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
			t.Fatalf("consumer on %s: %v", tg.stream, err)
		}
		counts[tg.stream] = st.CachedInfo().State.Msgs
	}
	return counts
}

// TestJetStreamAPIMatrix asks every JetStream API verb a nats-server
// serves, as every role, against every esjet stream and bucket of a
// namespace and a fresh name, on a server configured with the accounts
// esjet permissions prints, and checks who got an answer against the
// classification (matrix): on the nats-server this module pins (in
// process) and on the oldest release esjet runs on (MinServerVersion,
// built with go install and run as a child process). Each version's verbs
// are parsed from its own source; a verb a version serves that matrix does
// not classify fails the test.
func TestJetStreamAPIMatrix(t *testing.T) {
	config := mxAccountsConfig(t)
	served := map[string][]string{} // version: its verbs
	pinned := "v" + server.VERSION  // the nats-server this module pins, run in process
	t.Run(pinned+" (pinned)", func(t *testing.T) {
		verbs := serverVerbs(t, broker.ServerSource(t, pinned))
		served[pinned] = verbs
		runMatrix(t, pinned, verbs, runPinnedServer(t, config), config)
	})
	oldest := "v" + broker.MinServerVersion
	t.Run(oldest+" (MinServerVersion)", func(t *testing.T) {
		verbs := serverVerbs(t, broker.ServerSource(t, oldest))
		served[oldest] = verbs
		runMatrix(t, oldest, verbs, broker.RunServerConfig(t, oldest, config), config)
	})
	if len(served) < 2 {
		return
	}
	for _, r := range matrix {
		if !slices.Contains(served[pinned], r.verb) && !slices.Contains(served[oldest], r.verb) {
			t.Errorf("matrix classifies %s, which neither nats-server %s nor %s serves: remove it", r.verb, pinned, oldest)
		}
	}
}

// matrixRule is verb's row of matrix.
func matrixRule(verb string) (verbRule, bool) {
	i := slices.IndexFunc(matrix, func(r verbRule) bool { return r.verb == verb })
	if i < 0 {
		return verbRule{}, false
	}
	return matrix[i], true
}

// runMatrix probes verbs (what nats-server version, at url, serves) as
// every role against every target and checks the answers against matrix.
func runMatrix(t *testing.T, version string, verbs []string, url, config string) {
	for _, v := range verbs {
		if _, ok := matrixRule(v); !ok {
			t.Errorf("classify %s: which role may use it (add it to matrix in matrix_test.go)", v)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	conns := map[string]*mxConn{}
	for _, u := range mxUsers() {
		conns[u.role] = connectMX(t, url, u)
	}
	if got := "v" + conns[broker.RoleAdmin].nc.ConnectedServerVersion(); got != version {
		t.Fatalf("the server at %s is nats-server %s, want %s", url, got, version)
	}
	counts := provisionMX(t, ctx, conns[broker.RoleAdmin], conns[broker.RoleReceiver])

	type probe struct {
		verb, col, role, subject string
		want                     bool
		got                      outcome
	}
	var probes []*probe
	for _, v := range verbs {
		rule, _ := matrixRule(v)
		cells := strings.Fields(rule.cells)
		if rule.form == formAccount {
			if len(cells) != 1 {
				t.Fatalf("matrix %s: an account-wide verb has one cell, not %q", v, rule.cells)
			}
			allowed := rolesOf(t, cells[0])
			for _, u := range mxUsers() {
				probes = append(probes, &probe{verb: v, col: "account", role: u.role, subject: instantiate(v, rule.form, "", ""), want: slices.Contains(allowed, u.role)})
			}
			continue
		}
		if len(cells) != len(mxTargets) {
			t.Fatalf("matrix %s: %d cells, want one per target (%d)", v, len(cells), len(mxTargets))
		}
		for i, tg := range mxTargets {
			allowed := rolesOf(t, cells[i])
			for _, u := range mxUsers() {
				probes = append(probes, &probe{verb: v, col: tg.col, role: u.role, subject: instantiate(v, rule.form, tg.stream, tg.subject), want: slices.Contains(allowed, u.role)})
			}
		}
	}
	start := time.Now()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 256)
	for _, p := range probes {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			p.got = conns[p.role].ask(ctx, p.subject, 2*time.Second)
		})
	}
	wg.Wait()
	t.Logf("%d verbs, %d requests in %v", len(verbs), len(probes), time.Since(start).Round(time.Millisecond))

	kinds := map[outcome]int{}
	for _, p := range probes {
		kinds[p.got]++
		if p.got == silent && p.want {
			t.Logf("%s as %s on %s: silent", p.verb, p.role, p.col)
		}
		if got := p.got == answered; got != p.want {
			t.Errorf("%s as %s on %s (%s): %s, want answered=%v", p.verb, p.role, p.col, p.subject, p.got, p.want)
		}
	}
	t.Logf("outcomes: %v", kinds)
	if t.Failed() {
		t.Logf("accounts config:\n%s", config)
	}

	// Nothing the matrix asked changed anything: every stream keeps its
	// messages and its consumer, no stream was created.
	admin := conns[broker.RoleAdmin]
	for s, n := range counts {
		st, err := admin.js.Stream(ctx, s)
		if err != nil {
			t.Errorf("stream %s after the matrix: %v", s, err)
			continue
		}
		if got := st.CachedInfo().State.Msgs; got != n {
			t.Errorf("stream %s: %d messages after the matrix, %d before", s, got, n)
		}
		if _, err := st.Consumer(ctx, "matrix"); err != nil {
			t.Errorf("stream %s: consumer matrix after the matrix: %v", s, err)
		}
	}
	if _, err := admin.js.Stream(ctx, "FRESH"); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Errorf("stream FRESH after the matrix: %v", err)
	}
}

// TestJetStreamAPIMatrixREADME holds the JetStream API table of
// docs/security.md (between <!-- matrix:begin --> and <!-- matrix:end -->)
// to what matrixMarkdown renders from matrix; -matrix.md writes that.
func TestJetStreamAPIMatrixREADME(t *testing.T) {
	want := matrixMarkdown()
	if *matrixMD != "" {
		if err := os.WriteFile(*matrixMD, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	raw, err := os.ReadFile("../../docs/security.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, okBegin := strings.Cut(string(raw), "<!-- matrix:begin -->")
	got, _, okEnd := strings.Cut(rest, "<!-- matrix:end -->")
	if !okBegin || !okEnd {
		t.Fatal("docs/security.md has no <!-- matrix:begin --> … <!-- matrix:end --> table")
	}
	if strings.TrimSpace(got) == strings.TrimSpace(want) {
		return
	}
	gl, wl := strings.Split(strings.TrimSpace(got), "\n"), strings.Split(strings.TrimSpace(want), "\n")
	n := 0
	for n < len(gl) && n < len(wl) && gl[n] == wl[n] {
		n++
	}
	line := func(ls []string) string {
		if n < len(ls) {
			return ls[n]
		}
		return "(none)"
	}
	t.Errorf("docs/security.md's JetStream API table is not the matrix of internal/broker/matrix_test.go; run\n"+
		"\tgo test ./internal/broker -run MatrixREADME -matrix.md /tmp/matrix.md\n"+
		"and paste /tmp/matrix.md between <!-- matrix:begin --> and <!-- matrix:end -->.\n"+
		"First difference, table line %d:\n docs/security.md: %s\n matrix: %s", n+1, line(gl), line(wl))
}

// roleNames names a cell's roles in broker.Roles order, "—" for none.
func roleNames(cell string) string {
	var rs []string
	for _, r := range broker.Roles {
		for l, n := range roleLetters {
			if n == r && strings.Contains(cell, l) {
				rs = append(rs, r)
			}
		}
	}
	if len(rs) == 0 {
		return "—"
	}
	return strings.Join(rs, ", ")
}

// matrixMarkdown renders matrix as a compact markdown table: the targets
// whose cells are the same in every row share a column, the verbs whose
// cells are the same share a row (in matrix's order); an account-wide
// verb's one cell stands in every column.
func matrixMarkdown() string {
	rows := make([][]string, len(matrix))
	for i, r := range matrix {
		cells := strings.Fields(r.cells)
		if r.form == formAccount {
			cells = slices.Repeat(cells, len(mxTargets))
		}
		for j, c := range cells {
			cells[j] = roleNames(c)
		}
		rows[i] = cells
	}
	var cols [][]int // groups of mxTargets indexes
	for c := range mxTargets {
		g := slices.IndexFunc(cols, func(g []int) bool {
			return !slices.ContainsFunc(rows, func(row []string) bool { return row[g[0]] != row[c] })
		})
		if g < 0 {
			cols = append(cols, []int{c})
		} else {
			cols[g] = append(cols[g], c)
		}
	}
	type group struct {
		verbs []string
		cells []string
	}
	var groups []*group
	for i, r := range matrix {
		var cells []string
		for _, g := range cols {
			cells = append(cells, rows[i][g[0]])
		}
		k := slices.IndexFunc(groups, func(g *group) bool { return slices.Equal(g.cells, cells) })
		if k < 0 {
			groups = append(groups, &group{cells: cells})
			k = len(groups) - 1
		}
		groups[k].verbs = append(groups[k].verbs, "`"+strings.TrimPrefix(r.verb, "$JS.API.")+"`")
	}
	var b strings.Builder
	b.WriteString("| `$JS.API.` request |")
	for _, g := range cols {
		var names []string
		for _, c := range g {
			names = append(names, mxTargets[c].col)
		}
		fmt.Fprintf(&b, " %s |", strings.Join(names, ", "))
	}
	b.WriteString("\n|---|" + strings.Repeat("---|", len(cols)) + "\n")
	for _, g := range groups {
		fmt.Fprintf(&b, "| %s | %s |\n", strings.Join(g.verbs, ", "), strings.Join(g.cells, " | "))
	}
	return b.String()
}
