package outbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/streams"
)

// Inspector answers an operator's questions about one namespace's outbox:
// how far behind the relay is, what each kind of command is doing, and
// where one command is. It only reads. It is safe for concurrent use.
type Inspector struct {
	js    jetstream.JetStream
	names streams.Names
	batch int
	now   func() time.Time
}

// Inspect returns the Inspector of namespace ns. It does no I/O.
func Inspect(js jetstream.JetStream, ns string) *Inspector {
	return &Inspector{js: js, names: streams.NamesFor(ns), batch: 1000, now: time.Now}
}

// Lag is how far the relay is behind the log.
type Lag struct {
	// RelayConsumer says whether the relay's consumer exists; without it
	// no decision was ever relayed.
	RelayConsumer bool `json:"relay_consumer"`
	// Unrelayed: decisions not yet relayed (not delivered to the relay,
	// plus delivered and not acked).
	Unrelayed  uint64 `json:"unrelayed"`
	Pending    uint64 `json:"pending"`     // not yet delivered to the relay
	AckPending uint64 `json:"ack_pending"` // delivered, not acked
	// AckFloor: every decision up to this EVENTS sequence is relayed.
	AckFloor      uint64 `json:"ack_floor"`
	EventsLastSeq uint64 `json:"events_last_seq"`
	// The oldest unrelayed decision; zero when the relay is caught up.
	OldestSeq uint64        `json:"oldest_seq,omitempty"`
	OldestAt  time.Time     `json:"oldest_at,omitzero"`
	OldestAge time.Duration `json:"oldest_age_ns"`
}

// Lag reports the relay's lag: its consumer's pending and ack-pending
// counts, and the age of the decision right after its ack floor.
func (in *Inspector) Lag(ctx context.Context) (Lag, error) {
	events, err := in.js.Stream(ctx, in.names.Events)
	if err != nil {
		return Lag{}, fmt.Errorf("relay lag: event log %s: %w", in.names.Events, err)
	}
	st := events.CachedInfo().State
	lag := Lag{EventsLastSeq: st.LastSeq}
	cons, err := in.js.Consumer(ctx, in.names.Events, ConsumerName)
	switch {
	case errors.Is(err, jetstream.ErrConsumerNotFound):
		lag.Unrelayed, lag.Pending = st.Msgs, st.Msgs
	case err != nil:
		return lag, fmt.Errorf("relay lag: consumer %s: %w", ConsumerName, err)
	default:
		ci := cons.CachedInfo()
		lag.RelayConsumer = true
		lag.Pending, lag.AckPending = ci.NumPending, uint64(ci.NumAckPending)
		lag.Unrelayed = lag.Pending + lag.AckPending
		lag.AckFloor = ci.AckFloor.Stream
	}
	if lag.Unrelayed == 0 || lag.AckFloor >= st.LastSeq {
		return lag, nil
	}
	from := max(lag.AckFloor+1, st.FirstSeq)
	sc := streams.NewScanner(in.js, in.names.Events, 1)
	defer sc.Close()
	_, err = sc.Scan(ctx, streams.ScanRange{From: from}, func(m *jetstream.RawStreamMsg) error {
		lag.OldestSeq, lag.OldestAt = m.Sequence, m.Time.UTC()
		return streams.ErrStopScan
	})
	if err != nil {
		return lag, fmt.Errorf("relay lag: %w", err)
	}
	if !lag.OldestAt.IsZero() {
		lag.OldestAge = max(in.now().Sub(lag.OldestAt), 0)
	}
	return lag, nil
}

// KindStats is what the commands of one kind are doing.
type KindStats struct {
	Kind string `json:"kind"`
	// Messages on <ns>.outbox.<kind> (OUTBOX keeps them after processing).
	Messages uint64 `json:"messages"`
	// Scheduled: delayed commands whose schedule has not fired.
	Scheduled uint64 `json:"scheduled"`
	// Consumer is the kind's worker consumer (esjet-worker-<kind>), ""
	// when there is none yet.
	Consumer string `json:"consumer,omitempty"`
	// Pending: not yet delivered to a worker — the consumer's pending
	// count, or every message when there is no consumer yet.
	Pending uint64 `json:"pending"`
	// InFlight: delivered to a worker, not acked yet.
	InFlight uint64 `json:"in_flight"`
	Done     uint64 `json:"done"`   // receipts with outcome done
	Failed   uint64 `json:"failed"` // receipts with another outcome
	Dead     uint64 `json:"dead"`   // messages in the DLQ
}

// Kinds reports per kind, sorted by kind: every kind that has messages in
// OUTBOX, a pending schedule, a receipt or a dead letter.
func (in *Inspector) Kinds(ctx context.Context) ([]KindStats, error) {
	stats := map[string]*KindStats{}
	get := func(kind string) *KindStats {
		if stats[kind] == nil {
			stats[kind] = &KindStats{Kind: kind}
		}
		return stats[kind]
	}
	outbox, err := in.js.Stream(ctx, in.names.Outbox)
	if err != nil {
		return nil, fmt.Errorf("outbox kinds: %s: %w", in.names.Outbox, err)
	}
	counts, err := subjectCounts(ctx, outbox, in.names.OutboxFilter())
	if err != nil {
		return nil, err
	}
	for subj, n := range counts {
		get(lastTokens(subj, in.names.Namespace+".outbox.")).Messages += n
	}
	counts, err = subjectCounts(ctx, outbox, in.names.ScheduleFilter())
	if err != nil {
		return nil, err
	}
	for subj, n := range counts {
		kind, _, _ := strings.Cut(lastTokens(subj, in.names.Namespace+".schedule."), ".")
		get(kind).Scheduled += n
	}
	if dlq, err := optionalStream(ctx, in.js, in.names.DLQ); err != nil {
		return nil, err
	} else if dlq != nil {
		counts, err := subjectCounts(ctx, dlq, DeadLetterFilter(in.names.Namespace)) // not the audit records
		if err != nil {
			return nil, err
		}
		for subj, n := range counts {
			get(lastTokens(subj, in.names.Namespace+".dlq.")).Dead += n
		}
	}
	if err := in.scanReceipts(ctx, func(rc Receipt) {
		if rc.Kind == "" {
			return
		}
		if rc.Outcome == OutcomeDone {
			get(rc.Kind).Done++
		} else {
			get(rc.Kind).Failed++
		}
	}); err != nil {
		return nil, err
	}
	out := make([]KindStats, 0, len(stats))
	for _, kind := range slices.Sorted(maps.Keys(stats)) {
		ks := stats[kind]
		ks.Pending = ks.Messages
		cons, err := in.js.Consumer(ctx, in.names.Outbox, WorkerConsumerName(kind))
		switch {
		case errors.Is(err, jetstream.ErrConsumerNotFound):
		case err != nil:
			return nil, fmt.Errorf("outbox kinds: consumer %s: %w", WorkerConsumerName(kind), err)
		default:
			ci := cons.CachedInfo()
			ks.Consumer = ci.Name
			ks.Pending, ks.InFlight = ci.NumPending, uint64(ci.NumAckPending)
		}
		out = append(out, *ks)
	}
	return out, nil
}

// scanReceipts calls fn with every current receipt.
func (in *Inspector) scanReceipts(ctx context.Context, fn func(Receipt)) error {
	st, err := optionalStream(ctx, in.js, kvStream(in.names.Receipts))
	if err != nil || st == nil {
		return err
	}
	prefix := "$KV." + in.names.Receipts + "."
	sc := streams.NewScanner(in.js, st.CachedInfo().Config.Name, in.batch)
	defer sc.Close()
	_, err = sc.Scan(ctx, streams.ScanRange{Filter: prefix + ">"}, func(m *jetstream.RawStreamMsg) error {
		if op := m.Header.Get(kvOperationHeader); op == "DEL" || op == "PURGE" {
			return nil
		}
		var rc Receipt
		if json.Unmarshal(m.Data, &rc) == nil {
			fn(rc)
		}
		return nil
	})
	return err
}

// subjectCounts returns the stream's message count per subject on filter.
func subjectCounts(ctx context.Context, st jetstream.Stream, filter string) (map[string]uint64, error) {
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(filter))
	if err != nil {
		return nil, fmt.Errorf("subjects of %s on %s: %w", st.CachedInfo().Config.Name, filter, err)
	}
	return info.State.Subjects, nil
}

func lastTokens(subject, prefix string) string { return strings.TrimPrefix(subject, prefix) }

// ErrUnknownCommand means nothing in the log, OUTBOX, the receipts or the
// DLQ knows the command id.
var ErrUnknownCommand = errors.New("outbox: unknown command")

// CommandRef is a command id's parts: <type>:<id>:<version>:<index>.
type CommandRef struct {
	AggregateType string
	AggregateID   string
	Version       uint64 // aggregate version of the issuing decision's last event
	Index         int    // the command's index in the decision
}

// ParseCommandID splits a command id made by [streams.CommandID].
func ParseCommandID(id string) (CommandRef, error) {
	parts := strings.Split(id, ":")
	if len(parts) != 4 {
		return CommandRef{}, fmt.Errorf("command id %q: want <type>:<id>:<version>:<index>, e.g. trip:t1:4:0", id)
	}
	ref := CommandRef{AggregateType: parts[0], AggregateID: parts[1]}
	if err := streams.ValidateToken("aggregate type", ref.AggregateType); err != nil {
		return CommandRef{}, fmt.Errorf("command id %q: %w", id, err)
	}
	if err := streams.ValidateToken("aggregate id", ref.AggregateID); err != nil {
		return CommandRef{}, fmt.Errorf("command id %q: %w", id, err)
	}
	v, err := strconv.ParseUint(parts[2], 10, 64)
	if err != nil || v == 0 {
		return CommandRef{}, fmt.Errorf("command id %q: version %q is not a positive integer", id, parts[2])
	}
	i, err := strconv.Atoi(parts[3])
	if err != nil || i < 0 {
		return CommandRef{}, fmt.Errorf("command id %q: index %q is not a non-negative integer", id, parts[3])
	}
	ref.Version, ref.Index = v, i
	return ref, nil
}

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
	Schedule *Copy    `json:"schedule,omitempty"`
	Receipt  *Receipt `json:"receipt,omitempty"`
	Dead     []Copy   `json:"dead"`
	// Relayed: its decision is at or below the relay's ack floor.
	Relayed bool `json:"relayed"`
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
	ref, err := ParseCommandID(id)
	if err != nil {
		return CommandInfo{}, err
	}
	info := CommandInfo{ID: id, Outbox: []Copy{}, Dead: []Copy{}}
	log, err := streams.Open(ctx, in.js, in.names.Namespace, streams.Config{}, nil)
	if err != nil {
		return info, err
	}
	recs, err := log.Load(ctx, ref.AggregateType, ref.AggregateID, streams.Position{})
	if err != nil {
		return info, fmt.Errorf("command %s: %w", id, err)
	}
	for _, rec := range recs {
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

	// OUTBOX: the kind's subject from the decision's time on, or (no cause)
	// every kind from the beginning.
	rng := streams.ScanRange{Filter: in.names.OutboxFilter()}
	if info.Cause != nil {
		rng = streams.ScanRange{Filter: CommandSubject(in.names.Namespace, info.Kind), Since: info.Cause.Time.Add(-clockSkew)}
	}
	if err := in.find(ctx, in.names.Outbox, rng, id, func(c Copy, m *jetstream.RawStreamMsg) {
		info.Outbox = append(info.Outbox, c)
		if info.Kind == "" {
			info.Kind = m.Header.Get(HeaderCommandKind)
		}
	}); err != nil {
		return info, err
	}
	// A pending schedule has a subject of its own: <ns>.schedule.<kind>.<id with dots>.
	sched := streams.ScanRange{Filter: in.names.Namespace + ".schedule.*." + ReceiptKey(id)}
	if err := in.find(ctx, in.names.Outbox, sched, id, func(c Copy, m *jetstream.RawStreamMsg) {
		info.Schedule = &c
		if info.Kind == "" {
			info.Kind = m.Header.Get(HeaderCommandKind)
		}
	}); err != nil {
		return info, err
	}

	if kv, err := in.js.KeyValue(ctx, in.names.Receipts); err == nil {
		entry, err := kv.Get(ctx, ReceiptKey(id))
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
		case err != nil:
			return info, fmt.Errorf("command %s: receipt: %w", id, err)
		default:
			var rc Receipt
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
		rng := streams.ScanRange{Filter: DeadLetterFilter(in.names.Namespace)} // not the audit records
		if info.Kind != "" {
			rng.Filter = DeadLetterSubject(in.names.Namespace, info.Kind)
		}
		if err := in.find(ctx, in.names.DLQ, rng, id, func(c Copy, m *jetstream.RawStreamMsg) {
			c.Error = m.Header.Get(HeaderError)
			c.Attempts, _ = strconv.Atoi(m.Header.Get(HeaderAttempts))
			c.Worker = m.Header.Get(HeaderWorker)
			info.Dead = append(info.Dead, c)
		}); err != nil {
			return info, err
		}
	}

	if info.Cause == nil && len(info.Outbox) == 0 && info.Schedule == nil && info.Receipt == nil && len(info.Dead) == 0 {
		return info, fmt.Errorf("%w %s in namespace %s: not in the log, OUTBOX, the receipts or the DLQ", ErrUnknownCommand, id, in.names.Namespace)
	}
	if info.Cause != nil {
		cons, err := in.js.Consumer(ctx, in.names.Events, ConsumerName)
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
		if m.Header.Get(HeaderCommandID) != id {
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
