package wire

import "time"

// Global positions. Every event of the namespace has one: a uint64 that
// strictly increases across all events in log order, derived from its
// decision's stream sequence and its index in the decision:
//
//	position = seq × PositionsPerDecision + index
//
// Decimal on purpose: position 420003 reads as "event 3 of the decision at
// seq 42" in a curl reply or a CLI column, where seq<<16 would not. A
// decision holds at most [MaxEventsPerDecision] events (Append refuses more),
// so positions never overlap. No event has position 0: 0 means "before the
// first event", the resume point of a reader starting from scratch.
const (
	PositionsPerDecision = 10_000
	MaxEventsPerDecision = PositionsPerDecision
)

// EventPosition is the global position of the index-th event of the
// decision stored at stream sequence seq.
func EventPosition(seq uint64, index int) uint64 {
	return seq*PositionsPerDecision + uint64(index)
}

// SplitPosition is the stream sequence and event index a position names.
func SplitPosition(p uint64) (seq uint64, index int) {
	return p / PositionsPerDecision, int(p % PositionsPerDecision)
}

// EndOfSeq is the highest position a message at stream sequence seq can
// hold: a reader that has passed the whole message (a decision, a foreign
// message, a message its filter does not match) stands there, and resuming
// after it starts at seq+1. EndOfSeq(0) is 0: nothing read yet.
func EndOfSeq(seq uint64) uint64 {
	if seq == 0 {
		return 0
	}
	return seq*PositionsPerDecision + (PositionsPerDecision - 1)
}

// ResumeSeq is where a reader resuming after position p starts reading the
// stream, and how many events of that first message it has already seen
// (skip): p = 0 starts at seq 1 skipping nothing.
func ResumeSeq(p uint64) (seq uint64, skip int) {
	if p == 0 {
		return 1, 0
	}
	s, i := SplitPosition(p)
	if i == PositionsPerDecision-1 {
		return s + 1, 0
	}
	return s, i + 1
}

// Position of the index-th event of r.
func (r Record) EventPosition(index int) uint64 { return EventPosition(r.Seq, index) }

// LastPosition is the position of r's last event.
func (r Record) LastPosition() uint64 { return EventPosition(r.Seq, len(r.Events)-1) }

// LogEvent is one event as a reader of the whole log sees it: the event,
// its global position and the decision it belongs to.
type LogEvent struct {
	Event
	Position      uint64    `json:"position"`
	Seq           uint64    `json:"seq"`
	Index         int       `json:"index"`
	AggregateType string    `json:"aggregate_type"`
	AggregateID   string    `json:"aggregate_id"`
	DecisionID    string    `json:"decision_id"`
	Stored        time.Time `json:"stored"`
}

// LogEvents appends to out the events of r from index skip on, positioned.
func (r Record) LogEvents(out []LogEvent, skip int) []LogEvent {
	for i := skip; i < len(r.Events); i++ {
		out = append(out, LogEvent{Event: r.Events[i], Position: EventPosition(r.Seq, i), Seq: r.Seq, Index: i,
			AggregateType: r.AggregateType, AggregateID: r.AggregateID, DecisionID: r.ID, Stored: r.Stored})
	}
	return out
}
