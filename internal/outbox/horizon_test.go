package outbox

import (
	"fmt"
	"testing"
	"time"

	"github.com/esjet/esjet/internal/natstest"
)

// A relay consumer made anew (or a node down for months) hands the relay
// decisions whose commands ran long ago: once receipts expire
// (streams.receipts_max_age), nothing would fold a second run, so the relay
// skips them and acks the decisions; younger ones go out as always.
func TestRelayPublishesNoCommandOlderThanTheReceipts(t *testing.T) {
	e := newRelayEnv(t, natstest.RunServer(t))
	old := e.appendWithCommands(t, "old", "ship", 2, time.Time{})
	const horizon = time.Hour
	// The relay's clock is a horizon and a minute ahead: the decision just
	// made is older than the receipts to it.
	later := func() time.Time { return time.Now().Add(horizon + time.Minute) }
	r, stop := runRelay(t, e, RelayConfig{Batch: 8, Now: later, ReceiptsMaxAge: horizon})
	natstest.Eventually(t, 10*time.Second, func() bool { return r.Stats().LastSeq == old.Seq })
	stop()
	if got := e.outboxByCommand(t); len(got) != 0 {
		t.Fatalf("OUTBOX holds %v: commands of a decision older than the receipts were published again", got)
	}
	if st := r.Stats(); st.PastReceipts != 2 || st.Commands != 0 {
		t.Fatalf("stats %+v, want 2 commands past the receipts' age, none published", st)
	}

	// The same relay with the receipts' age still ahead publishes them.
	fresh := e.appendWithCommands(t, "fresh", "ship", 1, time.Time{})
	r2, _ := runRelay(t, e, RelayConfig{Batch: 8, ReceiptsMaxAge: horizon})
	natstest.Eventually(t, 10*time.Second, func() bool { return r2.Stats().LastSeq == fresh.Seq })
	if got := e.outboxByCommand(t); len(got) != 1 || got[fresh.Commands[0].ID] != 1 {
		t.Fatalf("OUTBOX holds %v, want %s once", got, fmt.Sprint(fresh.Commands[0].ID))
	}
}
