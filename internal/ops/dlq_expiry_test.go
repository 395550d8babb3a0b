package ops

import (
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/esjet/esjet/internal/natstest"
	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/wire"
)

// Settled letters expire after the configured age, their audit records
// stay, open letters never expire, and a listing reads the open letters
// only, however many were settled.
func TestDLQSettledLettersExpireAndListingReadsOnlyOpenOnes(t *testing.T) {
	t.Parallel()
	s := natstest.RunServer(t)
	e := newRCEnv(t, s, streams.ProvisionConfig{})
	ctx := t.Context()
	const open, settled = 3, 30
	age := 2 * time.Second
	d := OpenDLQ(e.js, e.ns).WithSettledMaxAge(age)
	var openIDs []string
	var gone DeadLetter
	for i := range open + settled {
		rec, seq := e.relayed(fmt.Sprintf("t%d", i), "pay")
		ack := e.kill(seq, "card declined", time.Now())
		if i < open {
			openIDs = append(openIDs, rec.Commands[0].ID)
			continue
		}
		dl, err := d.Get(ctx, strconv.FormatUint(ack.Sequence, 10))
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Discard(ctx, dl, "supplier gone", "ops@test"); err != nil {
			t.Fatal(err)
		}
		gone = dl
	}
	// Right after it was settled, show still has the whole letter.
	det, err := d.Show(ctx, gone.ID)
	if err != nil || det.Settled == nil || det.Seq != gone.Seq || string(det.Payload) != `{"n":1}` || det.Worker != "node-1" {
		t.Fatalf("show of a letter just discarded: %+v, %v", det, err)
	}

	// A listing of the open letters reads them, and no settled one (their
	// marks expire within a second or two).
	eventuallyNil(t, 15*time.Second, func() error {
		d.reads.Store(0)
		list, err := d.List(ctx, Filter{})
		if err != nil {
			return err
		}
		if n := d.reads.Load(); len(list) != open || n != open {
			return fmt.Errorf("listed %d letters reading %d messages; want %d and %d", len(list), n, open, open)
		}
		return nil
	})

	// Past the age the settled copies are gone from the stream; the audit
	// records and the open letters stay.
	eventuallyNil(t, 20*time.Second, func() error {
		if n := e.dlqCount(wire.SettledFilter(e.ns)); n != 0 {
			return fmt.Errorf("%d settled copies left", n)
		}
		return nil
	})
	if n := e.dlqCount(wire.AuditFilter(e.ns)); n != settled {
		t.Fatalf("audit records: %d, want %d", n, settled)
	}
	if n := e.dlqCount(wire.DeadLetterFilter(e.ns)); n != open {
		t.Fatalf("letter subjects: %d, want the %d open letters only", n, open)
	}
	for _, id := range openIDs {
		if _, err := d.Get(ctx, id); err != nil {
			t.Fatalf("open letter %s: %v", id, err)
		}
	}
	det, err = d.Show(ctx, strconv.FormatUint(gone.Seq, 10))
	if err != nil || det.Settled == nil || det.Settled.Action != AuditDiscarded || det.ID != gone.ID || string(det.Payload) != "null" {
		t.Fatalf("show of an expired letter: %+v, %v", det, err)
	}
	if _, err := d.Get(ctx, gone.ID); !errors.Is(err, ErrDeadLetterNotFound) {
		t.Fatalf("get of an expired letter: %v", err)
	}
}

// eventuallyNil polls cond until it returns nil, failing with its last
// error after timeout.
func eventuallyNil(t *testing.T, timeout time.Duration, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %v", timeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
