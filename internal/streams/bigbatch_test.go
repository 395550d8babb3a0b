package streams

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/esjet/esjet/internal/natstest"
)

// TestLargeDecisionsAreReadInFullAcrossShortBatches: a batch ends early at
// max_bytes (and at the server's max_pending); readers must continue while
// more is pending instead of taking a short batch for the end.
func TestLargeDecisionsAreReadInFullAcrossShortBatches(t *testing.T) {
	t.Parallel()
	s := natstest.RunServer(t, func(o *server.Options) { o.MaxPending, o.MaxPayload = 2<<20, 1<<20 })
	h := provisioned([]*server.Server{s}, 1)(t, Config{})
	big := json.RawMessage(`"` + strings.Repeat("x", 30<<10) + `"`)
	var pos Position
	for range 200 {
		d := decision("doc", "big", "edited")
		d.Events[0].Data = big
		rec, err := h.log.Append(t.Context(), d, pos)
		if err != nil {
			t.Fatal(err)
		}
		pos = rec.Position()
	}
	recs, err := h.log.Load(t.Context(), "doc", "big", Position{})
	if err != nil || len(recs) != 200 {
		t.Fatalf("Load: %d of 200 decisions, %v", len(recs), err)
	}
	all, err := h.log.ReadFrom(t.Context(), 0, 0)
	if err != nil || len(all) != 200 {
		t.Fatalf("ReadFrom: %d of 200 decisions, %v", len(all), err)
	}
	if !h.nc.IsConnected() {
		t.Fatal("the client was disconnected (slow consumer)")
	}
}

func TestDeliverAfterBeyondMaxDelayIsRefused(t *testing.T) {
	t.Parallel()
	s := natstest.RunServer(t)
	h := provisioned([]*server.Server{s}, 1)(t, Config{MaxDelay: time.Hour})
	d := decision("doc", "late", "edited")
	d.Commands = []Command{{Kind: "remind", DeliverAfter: time.Now().Add(2 * time.Hour)}}
	if _, err := h.log.Append(t.Context(), d, Position{}); !errors.Is(err, ErrInvalidDecision) || !strings.Contains(err.Error(), "outbox_max_age") {
		t.Fatalf("deliver-after beyond the bound: %v", err)
	}
	d.Commands[0].DeliverAfter = time.Now().Add(30 * time.Minute)
	if _, err := h.log.Append(t.Context(), d, Position{}); err != nil {
		t.Fatalf("within the bound: %v", err)
	}
}
