package console

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/ops"
	"github.com/esjet/esjet/internal/wire"
)

// Timeline is one aggregate's history as the console shows it: each
// decision with its events, the commands it issued and what became of
// each, and the outcomes that came back.
type Timeline struct {
	Type    string          `json:"aggregate_type"`
	ID      string          `json:"aggregate_id"`
	Version uint64          `json:"version"`
	Seq     uint64          `json:"seq"`
	State   json.RawMessage `json:"state"`
	// Decisions are oldest first.
	Decisions []Decision `json:"decisions"`
	// Open counts the commands not finished yet (not relayed, scheduled,
	// pending, in flight): the page polls faster while there are any.
	Open int `json:"open"`
	// Uninspected: the oldest decisions' commands whose fate was not
	// looked up (beyond [MaxInspected]).
	Uninspected int `json:"uninspected,omitempty"`
}

// Decision is one decision of a timeline.
type Decision struct {
	Seq           uint64    `json:"seq"`
	ID            string    `json:"id"`
	Time          time.Time `json:"time"`
	CorrelationID string    `json:"correlation_id,omitempty"`
	Events        []Event   `json:"events"`
	Commands      []Command `json:"commands"`
	// OutcomeOf is set when the decision recorded a worker's outcome:
	// the command it came back for and done or failed.
	OutcomeOf *OutcomeRef `json:"outcome_of,omitempty"`
}

// Event is one event of a decision.
type Event struct {
	Type    string          `json:"type"`
	Version uint64          `json:"version"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// OutcomeRef names the command an outcome decision answered.
type OutcomeRef struct {
	CommandID string `json:"command_id"`
	Outcome   string `json:"outcome"`
}

// Command is a command a decision issued, with its fate.
type Command struct {
	ID           string          `json:"id"`
	Kind         string          `json:"kind"`
	Report       bool            `json:"report,omitempty"`
	DeliverAfter time.Time       `json:"deliver_after,omitzero"`
	Payload      json.RawMessage `json:"payload,omitempty"`
	// Fate is one of the Fate* words; Detail says more (the error, the
	// receipt's attempts, the schedule's time).
	Fate   string `json:"fate"`
	Detail string `json:"detail,omitempty"`
	// Info is what the inspector found ([ops.Inspector.Command]); nil when
	// not inspected.
	Info *ops.CommandInfo `json:"info,omitempty"`
	// History are the audit records of its dead letters (retried,
	// discarded), oldest first.
	History []ops.AuditRecord `json:"history,omitempty"`
}

// A command's fate.
const (
	FateNotRelayed = "not relayed"     // in the log, not yet in OUTBOX
	FateScheduled  = "scheduled"       // a delayed command not yet due
	FatePending    = "pending"         // in OUTBOX, no worker took it yet
	FateInFlight   = "in flight"       // delivered to a worker, not acked
	FateDone       = "done"            // receipt done
	FateFailed     = "failed"          // receipt failed, no dead letter
	FateDead       = "dead"            // a dead letter no audit record settled
	FateRefused    = "outcome refused" // ran; its aggregate refused the outcome and still awaits it
	FateDiscarded  = "discarded"       // its dead letter was discarded
	FateRelayed    = "relayed"         // passed the relay; not in OUTBOX (aged out) and no receipt
	FateUnknown    = "not inspected"
)

// MaxInspected caps the commands whose fate one timeline looks up, newest
// first: each is a few reads.
const MaxInspected = 64

func (c *Console) handleTimeline(w http.ResponseWriter, r *http.Request) {
	tl, err := c.timeline(r.Context(), r.PathValue("type"), r.PathValue("id"))
	c.reply(w, tl, err)
}

func (c *Console) timeline(ctx context.Context, typ, id string) (Timeline, error) {
	st, err := c.repo.Get(ctx, typ, id)
	if err != nil {
		return Timeline{}, err
	}
	state, err := json.Marshal(st.Value)
	if err != nil {
		return Timeline{}, fmt.Errorf("state of %s/%s: %w", typ, id, err)
	}
	recs, err := c.repo.Log().History(ctx, typ, id) // an archived aggregate's from its archive
	if err != nil {
		return Timeline{}, err
	}
	tl := Timeline{Type: typ, ID: id, Version: st.Position.Version, Seq: st.Position.Seq, State: state,
		Decisions: make([]Decision, 0, len(recs))}
	space := wire.OutcomeSpace(c.repo.Log().IDSpace())
	inspect := MaxInspected
	consumers := map[string]*jetstream.ConsumerInfo{}
	for i := len(recs) - 1; i >= 0; i-- { // newest first, for the cap
		rec := recs[i]
		d := Decision{Seq: rec.Seq, ID: rec.ID, Time: rec.Stored.UTC(), CorrelationID: rec.CorrelationID,
			Events: make([]Event, 0, len(rec.Events)), Commands: make([]Command, 0, len(rec.Commands))}
		for _, e := range rec.Events {
			d.Events = append(d.Events, Event{Type: e.Type, Version: e.Version, Data: e.Data})
		}
		if cid, outcome, ok := wire.OutcomeOf(space, rec); ok {
			d.OutcomeOf = &OutcomeRef{CommandID: cid, Outcome: outcome}
		}
		for _, cmd := range rec.Commands {
			cc := Command{ID: cmd.ID, Kind: cmd.Kind, Report: cmd.Report, DeliverAfter: cmd.DeliverAfter,
				Payload: cmd.Payload, Fate: FateUnknown}
			if inspect > 0 {
				inspect--
				if err := c.fate(ctx, &cc, consumers); err != nil {
					return tl, err
				}
			} else {
				tl.Uninspected++
			}
			switch cc.Fate {
			case FateNotRelayed, FateScheduled, FatePending, FateInFlight:
				tl.Open++
			}
			d.Commands = append(d.Commands, cc)
		}
		tl.Decisions = append(tl.Decisions, d)
	}
	for i, j := 0, len(tl.Decisions)-1; i < j; i, j = i+1, j-1 {
		tl.Decisions[i], tl.Decisions[j] = tl.Decisions[j], tl.Decisions[i]
	}
	return tl, nil
}

// fate looks command cc up and says what became of it. consumers caches
// the worker consumers' info per kind for one timeline.
func (c *Console) fate(ctx context.Context, cc *Command, consumers map[string]*jetstream.ConsumerInfo) error {
	if done, ok := c.done.get(cc.ID); ok {
		cc.Fate, cc.Detail, cc.Info = done.Fate, done.Detail, done.Info
		return nil
	}
	defer func() {
		// Done with its outcome reported (when asked): final, so kept.
		if cc.Fate == FateDone && cc.Info != nil && (!cc.Report || len(cc.Info.Reported) > 0) && !cc.Info.LateEffect {
			c.done.put(cc.ID, *cc)
		}
	}()
	info, err := c.insp.Command(ctx, cc.ID)
	if err != nil && !errors.Is(err, ops.ErrUnknownCommand) {
		return err
	}
	cc.Info = &info
	if len(info.Dead) > 0 || info.Receipt == nil || info.Receipt.Outcome != wire.OutcomeDone {
		if cc.History, err = c.dlq.History(ctx, cc.ID, cc.Kind); err != nil {
			return err
		}
	}
	switch {
	case len(info.Dead) > 0:
		dl := info.Dead[len(info.Dead)-1]
		cc.Fate, cc.Detail = FateDead, fmt.Sprintf("%s (after %d attempt(s))", dl.Error, dl.Attempts)
		return nil
	case info.Receipt != nil && info.Receipt.OutcomeRefused != "":
		cc.Fate, cc.Detail = FateRefused, fmt.Sprintf("receipt %s after %d attempt(s); outcome refused: %s", info.Receipt.Outcome, info.Receipt.Attempts, info.Receipt.OutcomeRefused)
		return nil
	case info.Receipt != nil && info.Receipt.Outcome == wire.OutcomeDone:
		cc.Fate, cc.Detail = FateDone, fmt.Sprintf("receipt done after %d attempt(s) at %s", info.Receipt.Attempts, info.Receipt.At.UTC().Format(time.RFC3339))
		return nil
	case info.Receipt != nil:
		cc.Fate, cc.Detail = FateFailed, fmt.Sprintf("%s (after %d attempt(s))", info.Receipt.LastError, info.Receipt.Attempts)
		if n := len(cc.History); n > 0 && cc.History[n-1].Action == ops.AuditDiscarded {
			// Who discarded it and why is its last history record, shown
			// under the detail: the detail keeps what failed.
			cc.Fate = FateDiscarded
		}
		return nil
	case info.Schedule != nil:
		cc.Fate, cc.Detail = FateScheduled, "due at "+cc.DeliverAfter.UTC().Format(time.RFC3339)
		return nil
	case len(info.Outbox) > 0:
		last := info.Outbox[len(info.Outbox)-1]
		ci, err := c.consumer(ctx, cc.Kind, consumers)
		if err != nil {
			return err
		}
		switch {
		case ci == nil || last.Seq > ci.Delivered.Stream:
			cc.Fate, cc.Detail = FatePending, fmt.Sprintf("in OUTBOX (seq %d), waiting for a worker", last.Seq)
		default:
			cc.Fate, cc.Detail = FateInFlight, fmt.Sprintf("OUTBOX seq %d delivered to a worker", last.Seq)
		}
		if n := len(cc.History); n > 0 && cc.History[n-1].Action == ops.AuditRetried {
			cc.Detail += "; re-driven by " + cc.History[n-1].By
		}
		return nil
	case info.Cause != nil && !info.Relayed:
		cc.Fate, cc.Detail = FateNotRelayed, "recorded in the log; the relay has not passed it yet"
		return nil
	}
	cc.Fate, cc.Detail = FateRelayed, "relayed; no longer in OUTBOX and no receipt (esjet reconcile checks it)"
	return nil
}

// consumer returns kind's worker consumer info, nil when there is none.
func (c *Console) consumer(ctx context.Context, kind string, cache map[string]*jetstream.ConsumerInfo) (*jetstream.ConsumerInfo, error) {
	if ci, ok := cache[kind]; ok {
		return ci, nil
	}
	cons, err := c.js.Consumer(ctx, c.names.Outbox, wire.WorkerConsumerName(kind))
	var ci *jetstream.ConsumerInfo
	switch {
	case errors.Is(err, jetstream.ErrConsumerNotFound):
	case err != nil:
		return nil, fmt.Errorf("worker consumer of %s: %w", kind, err)
	default:
		ci = cons.CachedInfo()
	}
	cache[kind] = ci
	return ci, nil
}

// doneCache keeps the fates of finished commands (done, outcome reported):
// they cannot change, and looking one up scans OUTBOX from its decision on,
// which a page polling an old aggregate would repeat every few seconds.
type doneCache struct {
	mu sync.Mutex
	m  map[string]Command
}

// maxDone bounds the cache; when full it starts again empty.
const maxDone = 20_000

func (d *doneCache) get(id string) (Command, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	c, ok := d.m[id]
	return c, ok
}

func (d *doneCache) put(id string, c Command) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.m == nil || len(d.m) >= maxDone {
		d.m = make(map[string]Command)
	}
	c.Payload, c.History = nil, nil // the timeline has the payload; a done command has no letters to show
	d.m[id] = c
}
