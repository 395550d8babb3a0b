package ops

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/esjet/esjet/internal/archive"
	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/wire"
	"github.com/nats-io/nats.go/jetstream"
)

// Cause is the decision that issued a command.
type Cause struct {
	AggregateType string          `json:"aggregate_type"`
	AggregateID   string          `json:"aggregate_id"`
	Version       uint64          `json:"version"`
	DecisionID    string          `json:"decision_id"`
	Seq           uint64          `json:"seq"`
	Time          time.Time       `json:"time"`
	EventTypes    []string        `json:"event_types"`
	CorrelationID string          `json:"correlation_id,omitempty"`
	Report        bool            `json:"report"`
	DeliverAfter  time.Time       `json:"deliver_after,omitzero"`
	Payload       json.RawMessage `json:"payload,omitempty"`
}

// Copy is one stored message about a command (in OUTBOX or the DLQ).
type Copy struct {
	Stream  string    `json:"stream"`
	Subject string    `json:"subject"`
	Seq     uint64    `json:"seq"`
	Time    time.Time `json:"time"`
	MsgID   string    `json:"msg_id,omitempty"`
	// Dead letters only.
	Error    string `json:"error,omitempty"`
	Attempts int    `json:"attempts,omitempty"`
	Worker   string `json:"worker,omitempty"`
}

// CommandInfo is everything known about one command.
type CommandInfo struct {
	ID   string `json:"id"`
	Kind string `json:"kind,omitempty"`
	// Cause is nil when the log has no such command (an id published
	// to OUTBOX by another producer, or a typo).
	Cause *Cause `json:"cause,omitempty"`
	// Outbox are its copies on <ns>.outbox.<kind>, oldest first: none
	// before the relay ran (or after OUTBOX aged it out), two or more for a
	// duplicate.
	Outbox []Copy `json:"outbox"`
	// Schedule is its pending schedule, for a delayed command not yet due.
	Schedule *Copy         `json:"schedule,omitempty"`
	Receipt  *wire.Receipt `json:"receipt,omitempty"`
	Dead     []Copy        `json:"dead"`
	// Relayed: its decision is at or below the relay's ack floor.
	Relayed bool `json:"relayed"`
	// Reported are the outcomes its aggregate recorded for it
	// (<kind>_done, <kind>_failed), oldest first.
	Reported []ReportedOutcome `json:"reported"`
	// LateEffect: the receipt says done, but the aggregate was told the
	// command failed — an effect the aggregate will never take into
	// account (reconcile counts it as drift).
	LateEffect bool `json:"late_effect,omitempty"`
}

// clockSkew widens the OUTBOX search window before the decision's time: on
// a cluster EVENTS and OUTBOX may have leaders with different clocks.
const clockSkew = 5 * time.Second

// Command finds everything about command id: its cause (the decision in the
// log that issued it), its copies in OUTBOX or its pending schedule, its
// receipt and its dead letters. It returns [ErrUnknownCommand] when none of
// them knows the id, and an error naming the expected shape for an id that
// is not <type>:<id>:<version>:<index>.
func (in *Inspector) Command(ctx context.Context, id string) (CommandInfo, error) {
	ref, err := wire.ParseCommandID(id)
	if err != nil {
		return CommandInfo{}, err
	}
	info := CommandInfo{ID: id, Outbox: []Copy{}, Dead: []Copy{}}
	log, err := streams.Open(ctx, in.js, in.names.Namespace, streams.Config{}, nil)
	if err != nil {
		return info, err
	}
	// The whole history: an archived decision is read from the archive
	// (the log holds its tombstone only).
	if in.archive != nil {
		log.SetArchive(archive.Reader(in.archive, log))
	}
	recs, err := log.History(ctx, ref.AggregateType, ref.AggregateID)
	if err != nil {
		return info, fmt.Errorf("command %s: %w", id, err)
	}
	info.Reported = outcomesIn(log.IDSpace(), recs, id)
	if info.Reported == nil {
		info.Reported = []ReportedOutcome{}
	}
	issued := -1 // commands of the decision at ref.Version, when the log has it
	for _, rec := range recs {
		if rec.LastVersion() == ref.Version {
			issued = len(rec.Commands)
		}
		if rec.LastVersion() != ref.Version || ref.Index >= len(rec.Commands) || rec.Commands[ref.Index].ID != id {
			continue
		}
		c := rec.Commands[ref.Index]
		types := make([]string, len(rec.Events))
		for i, e := range rec.Events {
			types[i] = e.Type
		}
		info.Kind = c.Kind
		info.Cause = &Cause{
			AggregateType: rec.AggregateType, AggregateID: rec.AggregateID, Version: rec.LastVersion(),
			DecisionID: rec.ID, Seq: rec.Seq, Time: rec.Stored.UTC(), EventTypes: types,
			CorrelationID: rec.CorrelationID, Report: c.Report, DeliverAfter: c.DeliverAfter, Payload: c.Payload,
		}
		break
	}

	// OUTBOX: with a cause, its copies found from the decision (see
	// inspect_lookup.go); without one (an id the log never issued), every
	// kind from the beginning.
	var hist []AuditRecord
	if info.Cause != nil {
		if hist, err = OpenDLQ(in.js, in.names.Namespace).History(ctx, id, info.Kind); err != nil {
			return info, err
		}
		copies, err := in.outboxCopies(ctx, id, info.Kind, info.Cause, hist)
		if err != nil {
			return info, err
		}
		info.Outbox = append(info.Outbox, copies...)
	} else if err := in.find(ctx, in.names.Outbox, streams.ScanRange{Filter: in.names.OutboxFilter()}, id, func(c Copy, m *jetstream.RawStreamMsg) {
		info.Outbox = append(info.Outbox, c)
		if info.Kind == "" {
			info.Kind = m.Header.Get(wire.HeaderCommandKind)
		}
	}); err != nil {
		return info, err
	}
	// A pending schedule has a subject of its own: <ns>.schedule.<kind>.<id with dots>.
	sched := streams.ScanRange{Filter: wire.ScheduleFilterFor(in.names.Namespace, id)}
	if err := in.find(ctx, in.names.Outbox, sched, id, func(c Copy, m *jetstream.RawStreamMsg) {
		info.Schedule = &c
		if info.Kind == "" {
			info.Kind = m.Header.Get(wire.HeaderCommandKind)
		}
	}); err != nil {
		return info, err
	}

	if kv, err := in.js.KeyValue(ctx, in.names.Receipts); err == nil {
		entry, err := kv.Get(ctx, wire.ReceiptKey(id))
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
		case err != nil:
			return info, fmt.Errorf("command %s: receipt: %w", id, err)
		default:
			var rc wire.Receipt
			if err := json.Unmarshal(entry.Value(), &rc); err != nil {
				return info, fmt.Errorf("command %s: receipt %s is not JSON: %w", id, entry.Key(), err)
			}
			info.Receipt = &rc
			if info.Kind == "" {
				info.Kind = rc.Kind
			}
		}
	} else if !errors.Is(err, jetstream.ErrBucketNotFound) {
		return info, fmt.Errorf("command %s: receipts: %w", id, err)
	}

	if dlq, err := optionalStream(ctx, in.js, in.names.DLQ); err != nil {
		return info, err
	} else if dlq != nil {
		rng := streams.ScanRange{Filter: wire.DeadLetterFilter(in.names.Namespace)} // not the audit records
		if info.Kind != "" {
			if f, err := wire.DeadLetterFilterFor(in.names.Namespace, info.Kind); err == nil {
				rng.Filter = f
			}
		}
		// A settled letter is replaced on its subject by a mark that
		// expires: it is no longer dead.
		if err := in.find(ctx, in.names.DLQ, rng, id, func(c Copy, m *jetstream.RawStreamMsg) {
			if wire.IsSettleMark(m.Header) {
				return
			}
			c.Error = m.Header.Get(wire.HeaderError)
			c.Attempts, _ = strconv.Atoi(m.Header.Get(wire.HeaderAttempts))
			c.Worker = m.Header.Get(wire.HeaderWorker)
			info.Dead = append(info.Dead, c)
		}); err != nil {
			return info, err
		}
	}

	if _, failed := toldFailed(info.Reported); failed && info.Receipt != nil && info.Receipt.Outcome == wire.OutcomeDone {
		info.LateEffect = true
	}
	if info.Cause == nil && len(info.Outbox) == 0 && info.Schedule == nil && info.Receipt == nil && len(info.Dead) == 0 {
		if issued >= 0 {
			what := "no commands"
			if issued > 0 {
				what = fmt.Sprintf("%d command(s) (index 0 to %d)", issued, issued-1)
			}
			return info, fmt.Errorf("%w %s in namespace %s: %s/%s's decision at version %d issued %s, and OUTBOX, the receipts and the DLQ do not know the id",
				ErrUnknownCommand, id, in.names.Namespace, ref.AggregateType, ref.AggregateID, ref.Version, what)
		}
		return info, fmt.Errorf("%w %s in namespace %s: not in the log, OUTBOX, the receipts or the DLQ", ErrUnknownCommand, id, in.names.Namespace)
	}
	if info.Cause != nil {
		cons, err := in.js.Consumer(ctx, in.names.Events, wire.RelayConsumerName)
		if err == nil {
			info.Relayed = cons.CachedInfo().AckFloor.Stream >= info.Cause.Seq
		} else if !errors.Is(err, jetstream.ErrConsumerNotFound) {
			return info, fmt.Errorf("command %s: relay consumer: %w", id, err)
		}
	}
	return info, nil
}

// find scans stream over rng and calls fn for each message about command id.
func (in *Inspector) find(ctx context.Context, stream string, rng streams.ScanRange, id string, fn func(Copy, *jetstream.RawStreamMsg)) error {
	sc := streams.NewScanner(in.js, stream, in.batch)
	defer sc.Close()
	_, err := sc.Scan(ctx, rng, func(m *jetstream.RawStreamMsg) error {
		if stream == in.names.Outbox {
			in.outboxRead.Add(1)
		}
		if m.Header.Get(wire.HeaderCommandID) != id {
			return nil
		}
		fn(Copy{Stream: stream, Subject: m.Subject, Seq: m.Sequence, Time: m.Time.UTC(), MsgID: m.Header.Get(jetstream.MsgIDHeader)}, m)
		return nil
	})
	if err != nil {
		return fmt.Errorf("command %s: %w", id, err)
	}
	return nil
}
