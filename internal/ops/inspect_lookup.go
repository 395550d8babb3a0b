package ops

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/wire"
)

// Finding one command's copies in OUTBOX without reading OUTBOX.
//
// OUTBOX has one subject per kind, so no subject or index leads to one
// command. What does: the relay reads decisions in log order, and its
// consumer holds at most MaxAckPending of them unacked; a decision's
// commands are stored in OUTBOX before the relay acks it. So the relay's
// copy of a command is stored after its decision's time, and before any
// relay copy of a decision more than MaxAckPending log sequences later.
// The search reads OUTBOX from the decision's time (a time lookup in the
// server) and stops at the copy, or at the first relay copy past that
// horizon: it reads what the relay stored while it was relaying the
// decision, whatever OUTBOX's size. A copy re-driven from the DLQ is read
// by the sequence its audit record names; a delayed command's fired copy
// from its due time.
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
	subject := wire.CommandSubject(in.names.Namespace, kind)
	sc := streams.NewScanner(in.js, in.names.Outbox, in.batch)
	defer sc.Close()
	from := cause.Time
	if cause.DeliverAfter.After(from) {
		from = cause.DeliverAfter // fired when due, as a copy without the Msg-Id
	}
	// Unfiltered: with a subject filter the server counts what is pending
	// for it over the rest of the stream on every batch.
	_, err = sc.Scan(ctx, streams.ScanRange{Since: from.Add(-clockSkew)}, func(m *jetstream.RawStreamMsg) error {
		in.outboxRead.Add(1)
		if m.Subject == subject && m.Header.Get(wire.HeaderCommandID) == id {
			add(m)
			if !wire.IsRedrive(id, m.Header.Get(jetstream.MsgIDHeader)) {
				return streams.ErrStopScan
			}
			return nil
		}
		if cause.DeliverAfter.IsZero() {
			if seq, err := strconv.ParseUint(m.Header.Get(wire.HeaderDecisionSeq), 10, 64); err == nil && seq > cause.Seq+horizon &&
				m.Header.Get(jetstream.MsgIDHeader) == m.Header.Get(wire.HeaderCommandID) {
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
