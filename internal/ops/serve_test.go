package ops

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/esjet/esjet/internal/natstest"
	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/wire"
)

// The node's DLQ action server: the user token of the subject is who the
// audit record names ("nats user U" on a server with users), the existing
// checks hold (a retry of a command whose aggregate was told it failed is
// refused without after_failed), and a request it cannot read changes
// nothing.
func TestServerRetriesAndDiscardsAsTheSubjectsUser(t *testing.T) {
	t.Parallel()
	s := natstest.RunServer(t)
	e := newRCEnv(t, s, streams.ProvisionConfig{})
	ctx := t.Context()
	rec1, seq1 := e.relayed("t1", "pay")
	rec2, seq2 := e.relayed("t2", "pay")
	id1, id2 := rec1.Commands[0].ID, rec2.Commands[0].ID
	dl1 := e.kill(seq1, "declined", time.Now())
	dl2 := e.kill(seq2, "declined", time.Now())
	e.tellFailed("t1", id1)
	srv := NewServer(OpenDLQ(e.js, e.ns), WithUsers)

	bad := []struct {
		user, action, body string
		want               error
	}{
		{"a.b", ActionRetry, `{"seq":1}`, ErrBadOpsRequest},
		{"", ActionRetry, `{"seq":1}`, ErrBadOpsRequest},
		{"oncall", "purge", `{"seq":1}`, ErrBadOpsRequest},
		{"oncall", ActionRetry, `{"seq":0}`, ErrBadOpsRequest},
		{"oncall", ActionRetry, `{"seq":1,"by":"someone else"}`, ErrBadOpsRequest},
		{"oncall", ActionRetry, `not json`, ErrBadOpsRequest},
		{"oncall", ActionDiscard, `{"seq":` + u64(dl2.Sequence) + `}`, ErrReasonRequired},
		{"oncall", ActionRetry, `{"seq":` + u64(dl2.Sequence) + `,"command_id":"` + id1 + `"}`, ErrDeadLetterNotFound},
		{"oncall", ActionRetry, `{"seq":` + u64(dl1.Sequence) + `}`, ErrReportedFailure},
	}
	for _, b := range bad {
		if _, err := srv.Serve(ctx, b.user, b.action, []byte(b.body)); !errors.Is(err, b.want) {
			t.Errorf("Serve(%q, %q, %s): %v, want %v", b.user, b.action, b.body, err, b.want)
		}
	}
	if n := e.deadCount(); n != 2 {
		t.Fatalf("dead letters after refused requests: %d, want 2", n)
	}
	if n := len(e.outboxCopies(id1)); n != 1 {
		t.Fatalf("refused requests re-drove %s: %d OUTBOX copies", id1, n)
	}

	rep, err := srv.Serve(ctx, "oncall", ActionRetry, []byte(`{"seq":`+u64(dl1.Sequence)+`,"command_id":"`+id1+`","after_failed":true}`))
	if err != nil || rep.Action != AuditRetried || rep.CommandID != id1 || rep.By != "nats user oncall" || !strings.Contains(rep.MsgID, ":redrive:") {
		t.Fatalf("retry: %+v, %v", rep, err)
	}
	if n := len(e.outboxCopies(id1)); n != 2 {
		t.Fatalf("OUTBOX copies of %s after the retry: %d", id1, n)
	}
	rep, err = srv.Serve(ctx, "oncall", ActionDiscard, []byte(`{"seq":`+u64(dl2.Sequence)+`,"reason":"refunded by hand"}`))
	if err != nil || rep.Action != AuditDiscarded || rep.By != "nats user oncall" {
		t.Fatalf("discard: %+v, %v", rep, err)
	}
	d := OpenDLQ(e.js, e.ns)
	for _, id := range []string{id1, id2} {
		hist, err := d.History(ctx, id, "")
		if err != nil || len(hist) != 1 || hist[0].By != "nats user oncall" {
			t.Errorf("audit of %s: %+v, %v", id, hist, err)
		}
	}
	if n := e.deadCount(); n != 0 {
		t.Fatalf("dead letters after retry and discard: %d", n)
	}
	// Settled: asked again, the node says so and writes nothing.
	if _, err := srv.Serve(ctx, "oncall", ActionDiscard, []byte(`{"seq":`+u64(dl2.Sequence)+`,"reason":"again"}`)); !errors.Is(err, ErrDeadLetterNotFound) ||
		!strings.Contains(err.Error(), "discarded by nats user oncall") {
		t.Fatalf("discard of a settled entry: %v", err)
	}

	// Without users the token is recorded as the CLI gave it.
	if by := NewServer(d, NoUsers).By("ann@box"); by != "ann@box" {
		t.Errorf("without users: by %q", by)
	}
}

func TestUserTokenAndCheckUserToken(t *testing.T) {
	for in, want := range map[string]string{"ann@box.example.com": "ann@box_example_com", "a b*c>": "a_b_c_", "": "unknown", "oncall": "oncall"} {
		if got := UserToken(in); got != want || CheckUserToken(got) != nil {
			t.Errorf("UserToken(%q) = %q (check %v), want %q", in, got, CheckUserToken(got), want)
		}
	}
	for _, bad := range []string{"", "a.b", "*", ">", "a b", "a\tb"} {
		if err := CheckUserToken(bad); !errors.Is(err, ErrBadOpsRequest) {
			t.Errorf("CheckUserToken(%q) = %v", bad, err)
		}
	}
	if got := wire.ActionSubject("trips", "oncall", ActionRetry); got != "esjet.trips.ops.oncall.dlq.retry" {
		t.Errorf("ActionSubject = %q", got)
	}
}

func u64(n uint64) string { return strconv.FormatUint(n, 10) }
