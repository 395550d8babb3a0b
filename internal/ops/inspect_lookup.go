package ops

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/wire"
)

// Finding one command's copies in OUTBOX without reading OUTBOX.
//
// OUTBOX has one subject per kind, so no subject or index leads to one
// command. What does: the relay reads decisions in log order, and its
// consumer holds at most MaxAckPending (the horizon H) of them unacked; a
// decision's commands are stored in OUTBOX before the relay acks it. So
// once a relay copy of decision D is stored, no relay copy of a decision
// before D−H is stored after it: relay copies are in log order but for a
// disorder of H. Every relay copy names its decision's sequence
// (Esjet-Decision-Seq), so the copy of decision S is found by bisecting
// OUTBOX by sequence with direct gets — a probe whose decision is before
// S−H proves the copy is after it — and then reading from the last such
// probe until the copy, or the first relay copy past S+H (which proves
// there is none after). That is log₂(OUTBOX) gets and the copies of about
// 2H decisions, whatever OUTBOX's size and however far the relay lagged
// when it stored the copy. A copy re-driven from the DLQ is read by the
// sequence its audit record names; a delayed command's fired copy from its
// due time.
//
// A second relay copy (stored after the first, beyond OUTBOX's duplicate
// window) is not searched for: `esjet reconcile` counts duplicates.

// defaultRelayHorizon is the horizon without a relay consumer to read it
// from (the relay's default MaxAckPending).
const defaultRelayHorizon = 2048

// outboxCopies returns the copies of command id, issued by cause, of kind,
// in OUTBOX order: the relay's (or, for a delayed command, the fired one)
// and the re-drives named by audits.
func (in *Inspector) outboxCopies(ctx context.Context, id, kind string, cause *Cause, audits []AuditRecord) ([]Copy, error) {
	outbox, err := in.js.Stream(ctx, in.names.Outbox)
	if err != nil {
		return nil, fmt.Errorf("command %s: %w", id, err)
	}
	seen := map[uint64]bool{}
	var out []Copy
	add := func(m *jetstream.RawStreamMsg) {
		if !seen[m.Sequence] {
			seen[m.Sequence] = true
			out = append(out, Copy{Stream: in.names.Outbox, Subject: m.Subject, Seq: m.Sequence, Time: m.Time.UTC(), MsgID: m.Header.Get(jetstream.MsgIDHeader)})
		}
	}
	horizon := uint64(defaultRelayHorizon)
	if cons, err := in.js.Consumer(ctx, in.names.Events, wire.RelayConsumerName); err == nil && cons.CachedInfo().Config.MaxAckPending > 0 {
		horizon = uint64(cons.CachedInfo().Config.MaxAckPending)
	}
	// A delayed command is fired when due, as a copy without the Msg-Id.
	rng := streams.ScanRange{Since: later(cause.Time, cause.DeliverAfter).Add(-clockSkew)}
	if cause.DeliverAfter.IsZero() {
		from, err := in.relayedAfter(ctx, outbox, cause.Seq, horizon)
		if err != nil {
			return nil, fmt.Errorf("command %s: %w", id, err)
		}
		rng = streams.ScanRange{From: from}
	}
	sc := streams.NewScanner(in.js, in.names.Outbox, in.batch)
	defer sc.Close()
	// Unfiltered: with a subject filter the server counts what is pending
	// for it over the rest of the stream on every batch.
	_, err = sc.Scan(ctx, rng, func(m *jetstream.RawStreamMsg) error {
		in.outboxRead.Add(1)
		if wire.KindOfCommandSubject(in.names.Namespace, m.Subject) == kind && m.Header.Get(wire.HeaderCommandID) == id {
			add(m)
			if !wire.IsRedrive(id, m.Header.Get(jetstream.MsgIDHeader)) {
				return streams.ErrStopScan
			}
			return nil
		}
		if cause.DeliverAfter.IsZero() {
			if seq, ok := relayCopyOf(m.Header); ok && seq > cause.Seq+horizon {
				return streams.ErrStopScan // a relay copy past the horizon
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("command %s: %w", id, err)
	}
	for _, a := range audits {
		if a.NewOutboxSeq == 0 || seen[a.NewOutboxSeq] {
			continue
		}
		m, err := outbox.GetMsg(ctx, a.NewOutboxSeq)
		switch {
		case errors.Is(err, jetstream.ErrMsgNotFound): // aged out
		case err != nil:
			return nil, fmt.Errorf("command %s: re-drive at OUTBOX seq %d: %w", id, a.NewOutboxSeq, err)
		case m.Header.Get(wire.HeaderCommandID) == id:
			add(&jetstream.RawStreamMsg{Subject: m.Subject, Sequence: m.Sequence, Header: m.Header, Time: m.Time})
		}
	}
	slices.SortFunc(out, func(a, b Copy) int { return cmp.Compare(a.Seq, b.Seq) })
	return out, nil
}

// probeSteps is how many messages a probe steps over (deleted, or not relay
// copies: re-drives, fired schedules, foreign messages) looking for a relay
// copy before it gives up on that probe.
const probeSteps = 32

// relayedAfter returns an OUTBOX sequence at or before which no relay copy
// of decision seq is stored: the bisection described above. Only a probe
// that proves the copy is after it moves the result; any other probe only
// narrows where to look next.
func (in *Inspector) relayedAfter(ctx context.Context, outbox jetstream.Stream, seq, horizon uint64) (uint64, error) {
	info, err := outbox.Info(ctx)
	if err != nil {
		return 0, err
	}
	lo, hi := info.State.FirstSeq, info.State.LastSeq+1
	for hi-lo > probeSteps {
		mid := lo + (hi-lo)/2
		at, ds, found, err := in.probe(ctx, outbox, mid, hi)
		if err != nil {
			return 0, err
		}
		if found && ds+horizon < seq {
			lo = at + 1 // a relay copy of a decision before seq−H: the copy is after it
		} else {
			hi = mid
		}
	}
	return lo, nil
}

// probe reads OUTBOX from sequence from (below limit) to the first relay
// copy, at most probeSteps messages, and returns its sequence and its
// decision's.
func (in *Inspector) probe(ctx context.Context, outbox jetstream.Stream, from, limit uint64) (at, decisionSeq uint64, found bool, err error) {
	for at = from; at < limit && at < from+probeSteps; at++ {
		m, err := outbox.GetMsg(ctx, at)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue // aged out or deleted
		}
		if err != nil {
			return 0, 0, false, fmt.Errorf("OUTBOX seq %d: %w", at, err)
		}
		in.outboxRead.Add(1)
		if ds, ok := relayCopyOf(m.Header); ok {
			return at, ds, true, nil
		}
	}
	return 0, 0, false, nil
}

// relayCopyOf says whether a message with headers h is a relay copy (its
// Msg-Id is its command id: not a re-drive, not a fired schedule) and
// returns its decision's sequence.
func relayCopyOf(h nats.Header) (uint64, bool) {
	id := h.Get(wire.HeaderCommandID)
	if id == "" || h.Get(jetstream.MsgIDHeader) != id {
		return 0, false
	}
	seq, err := strconv.ParseUint(h.Get(wire.HeaderDecisionSeq), 10, 64)
	return seq, err == nil && seq > 0
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
