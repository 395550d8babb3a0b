package backup

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strconv"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/natstest"
	"github.com/esjet/esjet/internal/streams"
)

func opener(b []byte) func() (io.ReadCloser, error) {
	return func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
}

// A namespace restored on another server, under another name, keeps the
// sequences of its log and OUTBOX (a gap included: a fired schedule leaves
// one), its buckets' keys and values, and the schedule's target is
// rewritten; a cut archive and a second restore are refused.
func TestRestoreKeepsSequencesAndRenames(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	_, js := natstest.Connect(t, natstest.RunServer(t))
	ns := natstest.Namespace(t)
	names := streams.NamesFor(ns)
	if _, err := streams.Provision(ctx, js, ns, streams.ProvisionConfig{}, nil); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		m := nats.NewMsg(ns + ".evt.trip.t" + strconv.Itoa(i))
		m.Header.Set(jetstream.MsgIDHeader, "d"+strconv.Itoa(i))
		m.Data = []byte(`{"n":` + strconv.Itoa(i) + `}`)
		if _, err := js.PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 4 {
		if _, err := js.Publish(ctx, ns+".outbox.book_flight", []byte("c"+strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
	}
	outbox, err := js.Stream(ctx, names.Outbox)
	if err != nil {
		t.Fatal(err)
	}
	if err := outbox.DeleteMsg(ctx, 2); err != nil { // a gap
		t.Fatal(err)
	}
	sched := nats.NewMsg(ns + ".schedule.c9")
	sched.Header.Set("Nats-Schedule", "@at 2099-01-01T00:00:00Z")
	sched.Header.Set("Nats-Schedule-Target", ns+".outbox.book_flight")
	if _, err := js.PublishMsg(ctx, sched); err != nil {
		t.Fatal(err)
	}
	receipts, err := js.KeyValue(ctx, names.Receipts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := receipts.Put(ctx, "trip_t1_1_0", []byte("done")); err != nil {
		t.Fatal(err)
	}

	var archive bytes.Buffer
	if _, err := Backup(ctx, js, ns, &archive, Options{}); err != nil {
		t.Fatal(err)
	}
	_, js2 := natstest.Connect(t, natstest.RunServer(t))
	to := ns + "x"
	if _, err := Restore(ctx, js2, opener(archive.Bytes()), RestoreOptions{Namespace: to}); err != nil {
		t.Fatal(err)
	}
	tn := streams.NamesFor(to)
	for name, want := range map[string][]uint64{tn.Events: {1, 2, 3}, tn.Outbox: {1, 3, 4, 5}} {
		var got []uint64
		if _, err := streams.NewScanner(js2, name, 100).Scan(ctx, streams.ScanRange{}, func(m *jetstream.RawStreamMsg) error {
			got = append(got, m.Sequence)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) {
			t.Errorf("%s: sequences %v, want %v", name, got, want)
			continue
		}
		for i := range got {
			if got[i] != want[i] {
				t.Errorf("%s: sequences %v, want %v", name, got, want)
				break
			}
		}
	}
	st, err := js2.Stream(ctx, tn.Outbox)
	if err != nil {
		t.Fatal(err)
	}
	m, err := st.GetMsg(ctx, 5)
	if err != nil || m.Subject != to+".schedule.c9" || m.Header.Get("Nats-Schedule-Target") != to+".outbox.book_flight" {
		t.Errorf("the schedule after the restore: %+v, %v; want its subject and target in namespace %s", m, err, to)
	}
	ev, err := js2.Stream(ctx, tn.Events)
	if err != nil || !ev.CachedInfo().Config.DenyDelete || !ev.CachedInfo().Config.DenyPurge {
		t.Errorf("restored event log: %v; want deny delete and purge back on", err)
	}
	kv, err := js2.KeyValue(ctx, tn.Receipts)
	if err != nil {
		t.Fatal(err)
	}
	if e, err := kv.Get(ctx, "trip_t1_1_0"); err != nil || string(e.Value()) != "done" {
		t.Errorf("receipt after the restore: %v, %v", e, err)
	}

	if _, err := Restore(ctx, js2, opener(archive.Bytes()), RestoreOptions{Namespace: to}); !errors.Is(err, ErrExists) {
		t.Errorf("second restore: %v, want ErrExists", err)
	}
	if _, err := Restore(ctx, js2, opener(archive.Bytes()), RestoreOptions{Namespace: to, Force: true}); err != nil {
		t.Errorf("restore --force: %v", err)
	}
	cut := archive.Bytes()[:archive.Len()*2/3]
	_, js3 := natstest.Connect(t, natstest.RunServer(t))
	if _, err := Restore(ctx, js3, opener(cut), RestoreOptions{}); err == nil {
		t.Error("a cut archive was restored")
	}
	if _, err := Restore(context.Background(), js3, opener([]byte("not gzip")), RestoreOptions{}); !errors.Is(err, ErrNotAnArchive) {
		t.Errorf("restore of junk: %v, want ErrNotAnArchive", err)
	}
}
