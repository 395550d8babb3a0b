package outbox

import (
	"testing"
	"time"

	"github.com/esjet/esjet/internal/natstest"
	"github.com/esjet/esjet/internal/streams"
)

// While OUTBOX has no leader (an R3 election after its leader died, 4–15 s
// measured on a loaded 2-core machine) every publish answers "no response
// from stream" at once. The relay keeps trying its batch; once OUTBOX
// answers again it must notice within about a second, not after a retry
// pause that has grown to several seconds on top of the election.
func TestRelayNoticesOutboxBackWithinASecondOrSo(t *testing.T) {
	t.Parallel()
	e := newRelayEnv(t, natstest.RunServer(t))
	names := streams.NamesFor(e.ns)
	ob, err := e.js.Stream(t.Context(), names.Outbox)
	if err != nil {
		t.Fatal(err)
	}
	cfg := ob.CachedInfo().Config
	leaderless := cfg
	leaderless.Subjects = []string{names.ScheduleFilter()} // nobody takes <ns>.outbox.>: no responders
	if _, err := e.js.UpdateStream(t.Context(), leaderless); err != nil {
		t.Fatal(err)
	}
	r, _ := runRelay(t, e, RelayConfig{})
	rec := e.appendWithCommands(t, "f1", "ship", 1, time.Time{})
	natstest.Eventually(t, 10*time.Second, func() bool { return r.Stats().Failures > 0 })
	// An outage as long as a slow election: the relay's pauses have had
	// time to grow as far as they go.
	time.Sleep(10 * time.Second)
	if _, err := e.js.UpdateStream(t.Context(), cfg); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	natstest.Eventually(t, 20*time.Second, func() bool { return r.Stats().LastSeq == rec.Seq })
	late := time.Since(back)
	t.Logf("relayed %s after OUTBOX answered again (%d failed publishes during the outage)", late.Round(time.Millisecond), r.Stats().Failures)
	if late > 3*time.Second {
		t.Fatalf("the relay noticed OUTBOX back only after %s: its retry pause grew past the outage's end", late.Round(time.Millisecond))
	}
	if got := e.outboxByCommand(t)[rec.Commands[0].ID]; got != 1 {
		t.Fatalf("command %s is in OUTBOX %d times", rec.Commands[0].ID, got)
	}
}
