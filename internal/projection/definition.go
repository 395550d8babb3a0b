package projection

import (
	"context"
	"hash/fnv"
	"slices"
	"strings"

	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/wire"
)

// Event is one event as a projection's handler sees it: the event, its
// global position, its aggregate and decision.
type Event struct {
	streams.LogEvent
	// Replay is true while the view is rebuilt from the start (a new
	// generation being built beside the one serving queries): keep side
	// effects (mails, calls) out of a replay.
	Replay bool
}

// Handler folds one event into the view through tx. It must be
// deterministic given the documents it reads: after a concurrent change
// (partitioned views writing one document) a batch's events are applied
// again on fresh documents. An error is retried (bounded), then the event
// is parked.
type Handler func(ctx context.Context, tx *Tx, e Event) error

// Sink is a view kept in the user's own store (a SQL database): the
// position travels in the same transaction as the update. A Sink
// projection has one partition and stops at a failing event.
type Sink interface {
	// Position is the position of the last event applied (0: none).
	Position(ctx context.Context) (uint64, error)
	// Apply applies events (possibly none: the log moved past events the
	// filters skip) and records position to, in one transaction, only if
	// the recorded position is still from; otherwise it changes nothing and
	// returns an error wrapping [ErrFenced].
	Apply(ctx context.Context, from, to uint64, events []Event) error
}

// Definition is a projection: a name, filters and a handler.
type Definition struct {
	// Name names the view (bucket <ns>_view_<name>, GET /v1/views/<name>/…).
	Name string
	// AggregateTypes, when set, limits the events to these aggregate types
	// (a server-side subject filter: others are never sent).
	AggregateTypes []string
	// EventTypes, when set, limits the events the handler sees to these
	// types. The checkpoint moves past the others all the same.
	EventTypes []string
	// Partitions splits the view by aggregate into this many partitions,
	// each with its own owner and checkpoint (each aggregate's order kept):
	// a failing event parks its aggregate while the others go on. 0 means
	// one partition that stops at a failing event.
	Partitions int
	// Handle folds events into the built-in store (a KV bucket). Exactly
	// one of Handle and Sink is set.
	Handle Handler
	// Sink is the user's own store.
	Sink Sink
	// Personal says the view's documents hold personal data (or are keyed
	// by it): forgetting a data subject resets the view, which refills
	// from the log with that subject's fields erased (docs/personal-data.md).
	// A Sink's owner is told nothing: keep personal data out of it.
	Personal bool
	// Archived is what the view gets of an archived aggregate
	// (docs/archiving.md). Zero: [ArchivedReplay].
	Archived ArchivedEvents
}

// ArchivedEvents is what a view gets of an aggregate archived behind a
// tombstone (internal/archive).
type ArchivedEvents int

const (
	// ArchivedReplay: a rebuild reads the archived events from the
	// archive and hands them to the handler as they were (their own
	// positions), so the view is the same as before archiving, whatever
	// its handler does; a view that is following skips the tombstone (it
	// saw those events when they were live). Exact, and slower: one
	// archive read per archived aggregate.
	ArchivedReplay ArchivedEvents = iota
	// ArchivedTombstone: the handler gets the tombstone itself, one event
	// of type wire.EventArchived whose data is a wire.Tombstone with the
	// aggregate's final state, live and in a rebuild; nothing is read from
	// the archive. The fast rebuild, for a view that can build its
	// document from the final state.
	ArchivedTombstone
)

// Validate checks the definition.
func (d Definition) Validate() error {
	if err := ValidateName(d.Name); err != nil {
		return err
	}
	if (d.Handle == nil) == (d.Sink == nil) {
		return invalid("projection %s: set exactly one of Handle (built-in store) and Sink (your own store)", d.Name)
	}
	if d.Partitions < 0 || d.Partitions > 64 {
		return invalid("projection %s: partitions %d: use 0 (one, stopping at a failing event) to 64", d.Name, d.Partitions)
	}
	if d.Sink != nil && d.Partitions > 1 {
		return invalid("projection %s: a Sink projection has one partition, not %d", d.Name, d.Partitions)
	}
	for _, t := range d.AggregateTypes {
		if err := wire.ValidateToken("aggregate type", t); err != nil {
			return invalid("projection %s: %v", d.Name, err)
		}
	}
	for _, t := range d.EventTypes {
		if err := wire.ValidateToken("event type", t); err != nil {
			return invalid("projection %s: %v", d.Name, err)
		}
	}
	return nil
}

// partitions is how many partitions run (at least one).
func (d Definition) partitions() int { return max(d.Partitions, 1) }

// parking says whether a failing event parks its aggregate (partitioned)
// rather than stopping the projection.
func (d Definition) parking() bool { return d.Partitions > 0 && d.Sink == nil }

// filters are the consumer's subject filters.
func (d Definition) filters(names streams.Names) []string {
	if len(d.AggregateTypes) == 0 {
		return []string{names.EventsFilter()}
	}
	out := make([]string, len(d.AggregateTypes))
	for i, t := range d.AggregateTypes {
		out[i] = names.TypeFilter(t)
	}
	return out
}

// wants says whether the handler sees an event of this type.
func (d Definition) wants(eventType string) bool {
	return len(d.EventTypes) == 0 || slices.Contains(d.EventTypes, eventType)
}

// wantsAny says, from a decision's Esjet-Event-Types header, whether any of
// its events may be wanted, so a decision with none is not decoded.
func (d Definition) wantsAny(typesHeader string) bool {
	if len(d.EventTypes) == 0 || typesHeader == "" {
		return true
	}
	for t := range strings.SplitSeq(typesHeader, ",") {
		if slices.Contains(d.EventTypes, t) {
			return true
		}
	}
	return false
}

// PartitionOf is the partition of the aggregate on subject (FNV-1a of the
// subject modulo n): every event of one aggregate goes to one partition.
func PartitionOf(subject string, n int) int {
	if n <= 1 {
		return 0
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(subject))
	return int(h.Sum32() % uint32(n))
}
