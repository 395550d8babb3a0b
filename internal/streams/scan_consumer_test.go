package streams_test

import (
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/natstest"
	"github.com/esjet/esjet/internal/streams"
)

// A range read through a consumer passes exactly the messages a scan of the
// same range passes, with their subjects, times and data, whatever was
// deleted inside it, at its ends or after it.
func TestReadRangeReadsWhatAScanOfTheRangeReads(t *testing.T) {
	t.Parallel()
	s := natstest.RunServer(t)
	_, js := natstest.Connect(t, s)
	name := scratchStream(t, js, 40, 10)
	st, err := js.Stream(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	for _, seq := range []uint64{5, 10, 20, 21, 22, 23, 24, 38, 39, 40} {
		if err := st.DeleteMsg(t.Context(), seq); err != nil {
			t.Fatal(err)
		}
	}
	sc := streams.NewScanner(js, name, 1000)
	defer sc.Close()
	cases := []struct {
		name string
		r    streams.ScanRange
	}{
		{"everything", streams.ScanRange{From: 1, To: 40}},
		{"from a deleted message", streams.ScanRange{From: 5, To: 12}},
		{"to a deleted message", streams.ScanRange{From: 6, To: 20}},
		{"only deleted messages, more after", streams.ScanRange{From: 20, To: 24}},
		{"only deleted messages, none after", streams.ScanRange{From: 38, To: 40}},
		{"one message", streams.ScanRange{From: 7, To: 7}},
		{"filtered", streams.ScanRange{Filter: name + ".b", From: 2, To: 37}},
		{"filtered, nothing in the range", streams.ScanRange{Filter: name + ".a", From: 2, To: 2}},
		{"with >", streams.ScanRange{Filter: ">", From: 30, To: 40}},
	}
	for _, c := range cases {
		var got []*jetstream.RawStreamMsg
		n, err := streams.ReadRange(t.Context(), js, name, c.r, 3, func(m *jetstream.RawStreamMsg) error {
			got = append(got, m)
			return nil
		})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		var want []*jetstream.RawStreamMsg
		if _, err := sc.Scan(t.Context(), c.r, func(m *jetstream.RawStreamMsg) error {
			want = append(want, m)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if n != len(got) || len(got) != len(want) {
			t.Fatalf("%s: read %d (returned %d), want %d", c.name, len(got), n, len(want))
		}
		for i := range got {
			g, w := got[i], want[i]
			if g.Sequence != w.Sequence || g.Subject != w.Subject || !g.Time.Equal(w.Time) || string(g.Data) != string(w.Data) {
				t.Errorf("%s: message %d is seq %d %s %s %q; want seq %d %s %s %q", c.name, i,
					g.Sequence, g.Subject, g.Time, g.Data, w.Sequence, w.Subject, w.Time, w.Data)
			}
		}
	}
	// Stopping early, and the consumers are gone afterwards.
	var seqs []uint64
	if _, err := streams.ReadRange(t.Context(), js, name, streams.ScanRange{From: 1, To: 40}, 2, func(m *jetstream.RawStreamMsg) error {
		seqs = append(seqs, m.Sequence)
		if len(seqs) == 3 {
			return streams.ErrStopScan
		}
		return nil
	}); err != nil || !slices.Equal(seqs, []uint64{1, 2, 3}) {
		t.Errorf("stopped after %v, %v; want [1 2 3]", seqs, err)
	}
	fail := errors.New("boom")
	if _, err := streams.ReadRange(t.Context(), js, name, streams.ScanRange{From: 1, To: 40}, 2, func(*jetstream.RawStreamMsg) error { return fail }); !errors.Is(err, fail) {
		t.Errorf("fn's error: got %v", err)
	}
	if _, err := streams.ReadRange(t.Context(), js, name, streams.ScanRange{To: 40}, 2, func(*jetstream.RawStreamMsg) error { return nil }); err == nil {
		t.Error("a range without its first sequence was read")
	}
	natstest.Eventually(t, 5e9, func() bool {
		info, err := st.Info(t.Context())
		return err == nil && info.State.Consumers == 0
	})
}

// Consumers are used only where the connection may create them: not by
// a user that may only read streams with direct gets (the operator role).
func TestConsumersAllowedFollowsThePermissions(t *testing.T) {
	t.Parallel()
	readOnly := &server.Permissions{Publish: &server.SubjectPermission{Allow: []string{
		"$JS.API.INFO", "$JS.API.STREAM.INFO.*", "$JS.API.DIRECT.GET.*", "$JS.API.CONSUMER.INFO.*.*", "$SYS.REQ.USER.INFO"}}}
	owner := &server.Permissions{Publish: &server.SubjectPermission{Allow: []string{
		"$JS.API.>", "$SYS.REQ.USER.INFO"}, Deny: []string{"$JS.API.STREAM.DELETE.>"}}}
	denied := &server.Permissions{Publish: &server.SubjectPermission{Allow: []string{">"}, Deny: []string{"$JS.API.CONSUMER.CREATE.EV.>"}}}
	s := natstest.RunServer(t, func(o *server.Options) {
		o.Users = []*server.User{
			{Username: "reader", Password: "x", Permissions: readOnly},
			{Username: "owner", Password: "x", Permissions: owner},
			{Username: "denied", Password: "x", Permissions: denied},
			{Username: "admin", Password: "x"},
		}
	})
	for user, want := range map[string]bool{"reader": false, "owner": true, "denied": false, "admin": true} {
		nc, err := nats.Connect(s.ClientURL(), nats.UserInfo(user, "x"))
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		if got := streams.ConsumersAllowed(t.Context(), js, "EV", "OB"); got != want {
			t.Errorf("%s: consumers allowed %v, want %v", user, got, want)
		}
	}
	plain := natstest.RunServer(t)
	_, js := natstest.Connect(t, plain)
	if !streams.ConsumersAllowed(t.Context(), js, "EV") {
		t.Error("a server without users: consumers not allowed")
	}
}

func TestSubjectMatches(t *testing.T) {
	for _, c := range []struct {
		p, s string
		want bool
	}{
		{"a.b", "a.b", true}, {"a.b", "a.c", false}, {"a.*", "a.b", true}, {"a.*", "a.b.c", false},
		{"a.>", "a.b", true}, {"a.>", "a.b.c", true}, {"a.>", "a", false}, {">", "a", true},
		{"a.b", "a", false}, {"a", "a.b", false}, {"*", "a", true}, {"*.b", "a.b", true},
		{"demo.svc.>", "demo.svc", false}, {"billing.charge", "billing.charge.x", false}, {"a.b", "", false},
	} {
		if got := streams.SubjectMatches(c.p, c.s); got != c.want {
			t.Errorf("SubjectMatches(%q, %q) = %v, want %v", c.p, c.s, got, c.want)
		}
	}
}

// A range read whose caller is slower than the server drops nothing: what
// the server sends for the read's pulls waits in the client until the
// caller takes it. Each pull asks for a batch and a byte limit, and the
// server ends every such pull that fills its batch with a status ("409
// Batch Completed"); an iterator whose buffer holds exactly one batch of
// messages (nats.go's Messages) had no room for it once the caller fell a
// batch behind, and the status was dropped as a slow consumer (with two
// statuses waiting, a message would have been).
func TestReadRangeForASlowCallerDropsNothing(t *testing.T) {
	t.Parallel()
	s := natstest.RunServer(t)
	_, admin := natstest.Connect(t, s)
	const n = 200
	name := scratchStream(t, admin, n, 10)
	var dropped atomic.Int64
	nc, js := natstest.Connect(t, s, nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		if errors.Is(err, nats.ErrSlowConsumer) {
			dropped.Add(1)
		}
	}))
	st, err := js.Stream(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	// The caller takes a message only once the server has sent all that
	// the read's pulls asked for (no pull waits while messages are left)
	// and the client has read it off the connection (a flush answered
	// after it).
	caughtUp := func() bool {
		if dropped.Load() > 0 {
			return true
		}
		lister := st.ListConsumers(t.Context())
		for info := range lister.Info() {
			if info.NumWaiting > 0 && info.Delivered.Stream < n {
				return false
			}
		}
		return lister.Err() == nil && nc.Flush() == nil
	}
	var seqs []uint64
	got, err := streams.ReadRange(t.Context(), js, name, streams.ScanRange{From: 1, To: n}, 10, func(m *jetstream.RawStreamMsg) error {
		seqs = append(seqs, m.Sequence)
		natstest.Eventually(t, 10*time.Second, caughtUp)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if d := dropped.Load(); d > 0 {
		t.Fatalf("%d message(s) for the read dropped as a slow consumer", d)
	}
	if got != n || len(seqs) != n || seqs[0] != 1 || seqs[n-1] != n {
		t.Fatalf("read %d messages (returned %d), want 1…%d", len(seqs), got, n)
	}
	for i, seq := range seqs {
		if seq != uint64(i+1) {
			t.Fatalf("message %d is seq %d, want %d", i, seq, i+1)
		}
	}
}
