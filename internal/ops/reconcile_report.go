package ops

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/esjet/esjet/internal/wire"
)

// classify turns the entries into the report's counts and lists, adding
// the counts of the commands cp (when not nil) had settled. It removes
// from s the entries settled for good and returns the settled counts, old
// and new, for the next checkpoint.
func (r *Reconciler) classify(s *scan, rep *Report, now time.Time, cp *checkpoint) map[string]Counts {
	stuckBefore := now.Add(-r.cfg.StuckAfter).UnixNano()
	var expiredBefore int64
	if !rep.ExpiredBefore.IsZero() {
		expiredBefore = rep.ExpiredBefore.UnixNano()
	}
	closed := map[string]Counts{}
	if cp != nil {
		addClosed(rep, cp.Closed)
		maps.Copy(closed, cp.Closed)
	}
	addClosed(rep, s.closed) // earlier chunks of this run
	for k, n := range s.closed {
		c := closed[k]
		c.add(n)
		closed[k] = c
	}
	rep.Orphans, rep.Duplicates, rep.Stuck, rep.LateEffects = []Orphan{}, []Duplicate{}, []Stuck{}, []LateEffect{}
	rep.OutcomesRefused = []RefusedOutcome{}
	for id, e := range s.entries {
		var c Counts
		issued := e.decisionSeq > 0
		inOutbox := e.copies > 0 || e.scheduled
		if issued {
			c.Issued++
			if e.decisionSeq > rep.RelayAckFloor {
				c.NotYetRelayed++
			}
		}
		if inOutbox {
			c.InOutbox++
		}
		if e.scheduled {
			c.Scheduled++
		}
		switch e.outcome {
		case "":
		case wire.OutcomeDone:
			c.Completed++
		default:
			c.Failed++
		}
		if e.dead {
			c.Dead++
		}
		if e.toldFailed && e.outcome == wire.OutcomeDone {
			c.LateEffects++
			rep.LateEffects = append(rep.LateEffects, LateEffect{ID: id, Kind: e.kind})
		}
		if e.refused != "" && e.report && !e.reported {
			c.OutcomesRefused++
			rep.OutcomesRefused = append(rep.OutcomesRefused, RefusedOutcome{ID: id, Kind: e.kind, Reason: e.refused})
		}
		discarded := e.discarded && !e.dead // still dead: the discard did not finish
		if discarded {
			c.Discarded++
		}
		if e.copies > 1 {
			c.Duplicates++
			rep.Duplicates = append(rep.Duplicates, Duplicate{ID: id, Kind: e.kind, Count: e.copies})
		}
		settled := e.outcome != "" || e.dead || discarded
		if e.copies > 0 && !settled {
			c.InFlight++
			if e.lastAt < stuckBefore {
				c.Stuck++
				rep.Stuck = append(rep.Stuck, Stuck{ID: id, Kind: e.kind, Seq: e.lastSeq, Since: time.Unix(0, e.lastAt).UTC()})
			}
		}
		if issued && !inOutbox && !settled && e.decisionSeq <= rep.RelayAckFloor {
			if e.dueAt < expiredBefore {
				c.Expired++
			} else {
				c.Orphans++
				rep.Orphans = append(rep.Orphans, Orphan{ID: id, Kind: e.kind, DecisionSeq: e.decisionSeq})
			}
		}
		k := rep.Kinds[e.kind]
		k.add(c)
		rep.Kinds[e.kind] = k
		if closable(e, c, rep.RelayAckFloor) {
			k := closed[e.kind]
			k.add(c)
			closed[e.kind] = k
			delete(s.entries, id)
		}
	}
	for seq, e := range s.unsettled {
		if !e.dead {
			delete(s.unsettled, seq)
		}
	}
	for _, c := range rep.Kinds {
		rep.Totals.add(c)
	}
	slices.SortFunc(rep.Orphans, func(a, b Orphan) int {
		return cmp.Or(cmp.Compare(a.DecisionSeq, b.DecisionSeq), strings.Compare(a.ID, b.ID))
	})
	slices.SortFunc(rep.Duplicates, func(a, b Duplicate) int { return strings.Compare(a.ID, b.ID) })
	slices.SortFunc(rep.LateEffects, func(a, b LateEffect) int { return strings.Compare(a.ID, b.ID) })
	slices.SortFunc(rep.OutcomesRefused, func(a, b RefusedOutcome) int { return strings.Compare(a.ID, b.ID) })
	slices.SortFunc(rep.Stuck, func(a, b Stuck) int {
		return cmp.Or(a.Since.Compare(b.Since), strings.Compare(a.ID, b.ID))
	})
	return closed
}

// KindNames returns the report's kinds, sorted.
func (r Report) KindNames() []string { return slices.Sorted(maps.Keys(r.Kinds)) }

// Counts are one kind's (or all kinds') commands by state. A command is
// counted once in each line that applies to it.
type Counts struct {
	// Issued: recorded in a decision in the log.
	Issued uint64 `json:"issued"`
	// InOutbox: distinct ids in OUTBOX, on <ns>.outbox.<kind> or as a
	// pending schedule (also ids published there by other producers).
	InOutbox uint64 `json:"in_outbox"`
	// Scheduled: a delayed command whose schedule has not fired yet.
	Scheduled uint64 `json:"scheduled"`
	// InFlight: on <ns>.outbox.<kind>, with no receipt and not dead.
	InFlight uint64 `json:"in_flight"`
	// Completed: a receipt with outcome done.
	Completed uint64 `json:"completed"`
	// Failed: a receipt with another outcome (failed).
	Failed uint64 `json:"failed"`
	// Dead: in the DLQ.
	Dead uint64 `json:"dead"`
	// Discarded: taken out of the DLQ by `esjet dlq discard` (its last
	// audit record says so) and not dead again: settled, never an orphan
	// or in flight.
	Discarded uint64 `json:"discarded"`
	// NotYetRelayed: issued by a decision the relay has not acked yet.
	NotYetRelayed uint64 `json:"not_yet_relayed"`
	// Expired: relayed, no outcome, no longer in OUTBOX, and its decision
	// (or its deliver-after time, when later) is older than OUTBOX's
	// retention (max age): aged out, not lost.
	Expired uint64 `json:"expired"`
	// Orphans: issued by a decision at or below the relay's ack floor, not
	// in OUTBOX (nor a pending schedule), no receipt, not dead, not
	// discarded, not expired.
	Orphans uint64 `json:"orphans"`
	// Duplicates: ids stored more than once on <ns>.outbox.<kind>.
	Duplicates uint64 `json:"duplicates"`
	// Stuck: in flight, the newest OUTBOX copy older than StuckAfter.
	Stuck uint64 `json:"stuck"`
	// LateEffects: completed (a receipt that says done) after the
	// aggregate was told the command failed (it recorded <kind>_failed):
	// an effect applied that the aggregate will never take into account,
	// typically a dead letter re-driven after the aggregate compensated.
	LateEffects uint64 `json:"late_effects"`
	// OutcomesRefused: its outcome was reported and its aggregate refused
	// it (the receipt says why): the aggregate still awaits the command.
	// Not drift (the outbox holds what the log recorded), but never
	// settled by itself: fix the aggregate's outcome handler, then settle
	// it with the aggregate by hand.
	OutcomesRefused uint64 `json:"outcomes_refused"`
}

// Drift is orphans + duplicates + stuck + late effects: what needs a look
// or a repair.
func (c Counts) Drift() uint64 { return c.Orphans + c.Duplicates + c.Stuck + c.LateEffects }

func (c *Counts) add(o Counts) {
	c.Issued += o.Issued
	c.InOutbox += o.InOutbox
	c.Scheduled += o.Scheduled
	c.InFlight += o.InFlight
	c.Completed += o.Completed
	c.Failed += o.Failed
	c.Dead += o.Dead
	c.Discarded += o.Discarded
	c.NotYetRelayed += o.NotYetRelayed
	c.Expired += o.Expired
	c.Orphans += o.Orphans
	c.Duplicates += o.Duplicates
	c.Stuck += o.Stuck
	c.LateEffects += o.LateEffects
	c.OutcomesRefused += o.OutcomesRefused
}

// RefusedOutcome is a command whose aggregate refused its reported outcome.
type RefusedOutcome struct {
	ID     string `json:"id"`
	Kind   string `json:"kind"`
	Reason string `json:"reason"`
}

// Orphan is a relayed command missing from OUTBOX.
type Orphan struct {
	ID          string `json:"id"`
	Kind        string `json:"kind"`
	DecisionSeq uint64 `json:"decision_seq"` // EVENTS sequence of its decision
}

// Duplicate is a command id stored more than once on <ns>.outbox.<kind>.
// Harmless (receipts fold the later copies), reported, never repaired.
type Duplicate struct {
	ID    string `json:"id"`
	Kind  string `json:"kind"`
	Count int    `json:"count"`
}

// Stuck is a command in flight for longer than StuckAfter.
type Stuck struct {
	ID    string    `json:"id"`
	Kind  string    `json:"kind"`
	Seq   uint64    `json:"seq"`   // OUTBOX sequence of the newest copy
	Since time.Time `json:"since"` // when that copy was stored
}

// LateEffect is a command whose effect completed after its aggregate was
// told it failed. Never repaired: the aggregate must be told (or the effect
// undone) by hand.
type LateEffect struct {
	ID   string `json:"id"`
	Kind string `json:"kind"`
}

// Scanned counts the messages each scan read.
type Scanned struct {
	Events   uint64 `json:"events"`
	Outbox   uint64 `json:"outbox"`
	DLQ      uint64 `json:"dlq"`
	Receipts uint64 `json:"receipts"`
	// Unidentified: OUTBOX or DLQ messages without a command id.
	Unidentified uint64 `json:"unidentified"`
}

// Report is the outcome of one [Reconciler.Run].
type Report struct {
	Namespace  string        `json:"namespace"`
	At         time.Time     `json:"at"`
	StuckAfter time.Duration `json:"-"` // in JSON: "stuck_after", e.g. "15m0s"
	// RelayConsumer says whether the relay's consumer exists; without it
	// nothing was relayed and every command is not_yet_relayed.
	RelayConsumer bool `json:"relay_consumer"`
	// RelayAckFloor: every decision at or below this EVENTS sequence has
	// been relayed.
	RelayAckFloor uint64 `json:"relay_ack_floor"`
	// EventsLastSeq is the last decision the scan read.
	EventsLastSeq uint64 `json:"events_last_seq"`
	// ExpiredBefore: commands due (decided, or deliver-after) before this
	// time may have aged out of OUTBOX (now − OUTBOX max age), or their
	// receipts out of the receipts bucket (now − ReceiptsMaxAge), whichever
	// is later: with no outcome they count as expired, never as orphans.
	ExpiredBefore time.Time `json:"expired_before,omitzero"`
	// ReceiptsMaxAge is the receipts bucket's max age; 0: kept forever.
	ReceiptsMaxAge time.Duration `json:"receipts_max_age,omitempty"`
	// Undecodable counts messages in the log that are not esjet decisions.
	Undecodable uint64 `json:"undecodable"`
	// Tombstones counts the archived aggregates' tombstones this run read
	// (docs/archiving.md): their archived decisions' commands were all
	// settled when archived, so they are not read as issued; their OUTBOX
	// copies and receipts still count where they are.
	Tombstones uint64 `json:"tombstones,omitempty"`
	// Checkpoint says whether the run started from the last one's
	// checkpoint (and what it read), or why it read everything.
	Checkpoint CheckpointInfo    `json:"checkpoint"`
	Scanned    Scanned           `json:"scanned"`
	Kinds      map[string]Counts `json:"kinds"`
	Totals     Counts            `json:"totals"`
	// The lists behind the drift counts, every one of them.
	Orphans    []Orphan    `json:"orphans"`
	Duplicates []Duplicate `json:"duplicates"`
	Stuck      []Stuck     `json:"stuck"`
	// LateEffects are effects completed after their aggregate was told
	// the command failed.
	LateEffects []LateEffect `json:"late_effects"`
	// OutcomesRefused are the commands whose outcome their aggregate
	// refused, with its reason: awaited there for ever unless settled by
	// hand.
	OutcomesRefused []RefusedOutcome `json:"outcomes_refused"`
}

// Drift is the totals' orphans + duplicates + stuck + late effects; zero
// means the outbox holds exactly what the log recorded, and every effect
// completed is one its aggregate still expected.
func (r Report) Drift() uint64 { return r.Totals.Drift() }

type reportJSON Report

// MarshalJSON adds "stuck_after" (a Go duration string) and "drift".
func (r Report) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		reportJSON
		StuckAfter string `json:"stuck_after"`
		Drift      uint64 `json:"drift"`
	}{reportJSON(r), r.StuckAfter.String(), r.Drift()})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (r *Report) UnmarshalJSON(data []byte) error {
	var v struct {
		*reportJSON
		StuckAfter string `json:"stuck_after"`
	}
	v.reportJSON = (*reportJSON)(r)
	if err := json.Unmarshal(data, &v); err != nil {
		return err
	}
	if v.StuckAfter != "" {
		d, err := time.ParseDuration(v.StuckAfter)
		if err != nil {
			return fmt.Errorf("stuck_after: %w", err)
		}
		r.StuckAfter = d
	}
	return nil
}
