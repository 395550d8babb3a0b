package projection

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/streams"
)

// Parked is an event a partitioned projection set aside: its handler
// failed after its retries (Error, Attempts), or an earlier event of its
// aggregate is parked (Behind). It is stored in the view bucket with the
// checkpoint that passed it, so it is never lost nor applied twice.
type Parked struct {
	Event     Event     `json:"event"`
	Subject   string    `json:"subject"`
	Partition int       `json:"partition"`
	Error     string    `json:"error,omitempty"`
	Attempts  int       `json:"attempts,omitempty"`
	Behind    bool      `json:"behind,omitempty"` // parked behind an earlier event of its aggregate
	At        time.Time `json:"at"`
	// Reread says Event.Data was left out: the decision holds personal
	// data (sealed in the log), which the view bucket must not keep in
	// plaintext past a forget; a retry reads the event from the log again,
	// erased by then if its subject was forgotten.
	Reread bool `json:"reread,omitempty"`
}

// Skipped is the record an operator's skip leaves. Its Event has no data
// (the log keeps it): a skip record outlives a forget of the person the
// data may name, and a view's own store (a Sink) keeps it in the
// projections' control bucket, which no forget resets.
type Skipped struct {
	Event  Event     `json:"event"`
	By     string    `json:"by"`
	Reason string    `json:"reason"`
	At     time.Time `json:"at"`
	Error  string    `json:"error,omitempty"`
}

// park sets e aside in the batch (herr nil: behind an earlier one);
// personal: its decision holds sealed personal data, which the record
// leaves out (see [Parked].Reread).
func (p *partition) park(e Event, subject string, herr error, attempts int, personal bool) error {
	if personal {
		e.Data = nil
	}
	rec := Parked{Event: e, Subject: subject, Partition: p.part, Attempts: attempts, Behind: herr == nil, At: time.Now().UTC(), Reread: personal}
	if herr != nil {
		rec.Error = herr.Error()
		p.logger.Error("projection parked an event", "position", e.Position, "event_type", e.Type,
			"aggregate_type", e.AggregateType, "aggregate_id", e.AggregateID, "attempts", attempts, "error", herr)
	}
	b, _ := json.Marshal(rec)
	if err := p.tx.write(parkKey(p.part, e.Position), b, false); err != nil {
		return err
	}
	p.pendParked[subject]++
	p.pendParkedAt = append(p.pendParkedAt, e.Position)
	return nil
}

// listParked reads the parked events of a view bucket's partition (all
// partitions when part < 0), in position order.
func listParked(ctx context.Context, kv jetstream.KeyValue, part int) ([]Parked, error) {
	filter := parkedKey + ">"
	if part >= 0 {
		filter = parkedKey + strconv.Itoa(part) + ".*"
	}
	lister, err := kv.ListKeysFiltered(ctx, filter)
	if err != nil {
		return nil, err
	}
	var out []Parked
	for k := range lister.Keys() {
		e, err := kv.Get(ctx, k)
		if err != nil {
			continue // deleted meanwhile
		}
		var rec Parked
		if err := json.Unmarshal(e.Value(), &rec); err != nil {
			return nil, fmt.Errorf("parked record %s: %w", k, err)
		}
		out = append(out, rec)
	}
	slices.SortFunc(out, func(a, b Parked) int { return cmp.Compare(a.Event.Position, b.Event.Position) })
	return out, nil
}

func (p *partition) loadParked(ctx context.Context) error {
	if !p.def.parking() {
		return nil
	}
	kv, err := p.r.js.KeyValue(ctx, p.bucket)
	if err != nil {
		return err
	}
	recs, err := listParked(ctx, kv, p.part)
	if err != nil {
		return err
	}
	clear(p.parked)
	clear(p.parkedAt)
	for _, r := range recs {
		p.parked[r.Subject]++
		p.parkedAt[r.Event.Position] = true
	}
	return nil
}

// tick is the partition's periodic work: heartbeat, control record,
// operators' requests. restart asks for the consumer to start again after
// the stored position.
func (p *partition) tick(ctx context.Context) (restart bool, err error) {
	ctl, _, err := p.r.ctl.control(ctx, p.def.Name)
	if err != nil {
		return false, err
	}
	p.replay = ctl.Building == p.gen
	p.paused = ctl.Paused
	if !slices.Contains(ctl.generations(), p.gen) {
		return false, fmt.Errorf("%w: generation %d of %s no longer runs", ErrFenced, p.gen, p.def.Name)
	}
	state, errText := StateRunning, ""
	switch {
	case p.stopped != nil:
		state, errText = StateStopped, p.stopped.Error()
	case p.paused:
		state = StatePaused
		if err := p.flush(ctx, false); err != nil {
			return false, err
		}
	}
	if err := p.heartbeat(ctx, state, errText); err != nil {
		return false, err
	}
	if err := p.resetUnder(ctx); err != nil {
		return false, err
	}
	if ctl.Requests == p.requestsSeen {
		return false, nil
	}
	reqs, err := p.r.ctl.requests(ctx, p.def.Name)
	if err != nil {
		return false, err
	}
	seen := ctl.Requests
	defer func() {
		if err == nil {
			p.requestsSeen = seen
		}
	}()
	var done []string
	for _, req := range reqs {
		if req.Generation != p.gen || req.Partition != p.part {
			continue
		}
		if err := p.flush(ctx, false); err != nil {
			return false, err
		}
		if err := p.handle(ctx, req); err != nil {
			p.logger.Warn("projection request failed", "action", req.Action, "position", req.Position, "error", err)
			return true, err
		}
		done = append(done, req.ID)
		p.logger.Info("projection request done", "action", req.Action, "position", req.Position, "by", req.By)
		restart = true
	}
	if restart {
		state, errText = StateRunning, ""
		if p.stopped != nil {
			state, errText = StateStopped, p.stopped.Error()
		}
		if err := p.heartbeat(ctx, state, errText); err != nil {
			return false, err
		}
	}
	// Done only now: a query waiting on the projection sees the request
	// pending until the heartbeat says what it changed.
	for _, id := range done {
		_ = p.r.ctl.kv.Delete(ctx, requestKey(p.def.Name, id))
	}
	return restart, nil
}

// handle does an operator's retry or skip.
func (p *partition) handle(ctx context.Context, req Request) error {
	if !p.def.parking() {
		return p.handleSingle(ctx, req)
	}
	kv, err := p.r.js.KeyValue(ctx, p.bucket)
	if err != nil {
		return err
	}
	recs, err := listParked(ctx, kv, p.part)
	if err != nil {
		return err
	}
	var first *Parked
	for i := range recs {
		if recs[i].Event.Position == req.Position {
			first = &recs[i]
		}
	}
	if first == nil {
		return nil // done before (a repeated request)
	}
	// The aggregate's parked events, in order, from its first.
	var chain []Parked
	for _, r := range recs {
		if r.Subject == first.Subject {
			chain = append(chain, r)
		}
	}
	if req.Action == "skip" {
		if chain[0].Event.Position != req.Position {
			return fmt.Errorf("%w: position %d is not the first parked event of %s (%d is): skip that one first", ErrInvalid, req.Position, first.Subject, chain[0].Event.Position)
		}
		skipped := chain[0].Event
		skipped.Data = nil
		b, _ := json.Marshal(Skipped{Event: skipped, By: req.By, Reason: req.Reason, At: time.Now().UTC(), Error: chain[0].Error})
		if err := p.tx.write(skipKey(req.Position), b, false); err != nil {
			return err
		}
		if err := p.tx.write(parkKey(p.part, req.Position), nil, true); err != nil {
			return err
		}
		p.parked[first.Subject]--
		delete(p.parkedAt, req.Position)
		chain = chain[1:]
	}
	// Apply the rest in order; the first that fails again stays parked
	// with every later one.
	for i, r := range chain {
		ev := Event{LogEvent: r.Event.LogEvent, Replay: p.replay}
		if r.Reread {
			if ev.LogEvent, err = p.reread(ctx, r.Event.Position); err != nil {
				return err
			}
		}
		attempts, herr := p.apply(ctx, ev)
		if herr != nil {
			r.Error, r.Attempts, r.Behind, r.At = herr.Error(), attempts, false, time.Now().UTC()
			b, _ := json.Marshal(r)
			if err := p.tx.write(parkKey(p.part, r.Event.Position), b, false); err != nil {
				return err
			}
			_ = i
			break
		}
		if err := p.tx.write(parkKey(p.part, r.Event.Position), nil, true); err != nil {
			return err
		}
		p.parked[first.Subject]--
		delete(p.parkedAt, r.Event.Position)
		p.events++
	}
	if p.parked[first.Subject] <= 0 {
		delete(p.parked, first.Subject)
	}
	return p.flush(ctx, true)
}

// reread reads the event at position pos from the log again (opened with
// the keys as they are now).
func (p *partition) reread(ctx context.Context, pos uint64) (streams.LogEvent, error) {
	evs, _, err := p.r.log.ReadAfter(ctx, pos-1, 1)
	if err != nil {
		return streams.LogEvent{}, fmt.Errorf("read parked event %d again: %w", pos, err)
	}
	if len(evs) == 0 || evs[0].Position != pos {
		return streams.LogEvent{}, fmt.Errorf("read parked event %d again: not in the log", pos)
	}
	return evs[0], nil
}

// handleSingle resumes a stopped single projection: retry starts again at
// the failing event, skip leaves a record and moves past it.
func (p *partition) handleSingle(ctx context.Context, req Request) error {
	if p.stopped == nil || (req.Position != 0 && req.Position != p.stopped.Position) {
		return nil // not stopped there (any more)
	}
	if req.Action == "skip" {
		pos := p.stopped.Position
		evs, _, err := p.r.log.ReadAfter(ctx, pos-1, 1)
		if err != nil {
			return err
		}
		rec := Skipped{By: req.By, Reason: req.Reason, At: time.Now().UTC(), Error: p.stopped.Err.Error()}
		if len(evs) == 1 {
			rec.Event = Event{LogEvent: evs[0]}
			rec.Event.Data = nil
		}
		b, _ := json.Marshal(rec)
		if p.def.Sink != nil {
			// The record first: a crash before the position moves leaves
			// the request, done again.
			if _, err := p.r.ctl.kv.Put(ctx, p.def.Name+".g"+strconv.Itoa(p.gen)+".skipped."+strconv.FormatUint(pos, 10), b); err != nil {
				return err
			}
		} else if err := p.tx.write(skipKey(pos), b, false); err != nil {
			return err
		}
		p.pos = pos
		if err := p.flush(ctx, true); err != nil {
			return err
		}
	}
	p.stopped = nil
	return nil
}

// isInternal says whether a view bucket key is esjet's own.
func isInternal(key string) bool { return strings.HasPrefix(key, internalPrefix) }
