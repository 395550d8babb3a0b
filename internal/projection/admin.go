package projection

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/esjet/esjet/internal/wire"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
)

// The operators' actions (esjet projections …). They write the control
// bucket; the owners of the partitions act on them at their next
// heartbeat.

// Pause stops a projection's partitions from reading (they keep their
// leases and heartbeat); Resume lets them go on.
func (v *Views) Pause(ctx context.Context, name string) error  { return v.setPaused(ctx, name, true) }
func (v *Views) Resume(ctx context.Context, name string) error { return v.setPaused(ctx, name, false) }

func (v *Views) setPaused(ctx context.Context, name string, paused bool) error {
	cs, _, err := v.control(ctx, name)
	if err != nil {
		return err
	}
	_, err = cs.update(ctx, name, func(c *Control) error { c.Paused = paused; return nil })
	return err
}

// Rebuild starts building a new generation of the view from the start of
// the log, beside the active one (which keeps serving queries); the
// runners switch queries to it once it has caught up. It returns the new
// generation. Its bucket is the slot neither the active nor the previous
// generation holds: emptied first (it may hold a generation dropped by an
// earlier switch; an owner of that one still running is fenced, as by
// [Views.Reset]), then named in the control record.
func (v *Views) Rebuild(ctx context.Context, name string) (int, error) {
	cs, _, err := v.control(ctx, name)
	if err != nil {
		return 0, err
	}
	ctl, err := cs.update(ctx, name, func(c *Control) error {
		if c.Building > 0 {
			return fmt.Errorf("%w: generation %d of %s is being built already (esjet projections status %s)", ErrInvalid, c.Building, name, name)
		}
		if c.SlotsFrom == 0 {
			c.SlotsFrom = max(c.Latest, c.Active, c.Previous) + 1
		}
		gen := c.nextGeneration(v.ns, name)
		bucket := c.bucket(v.ns, name, gen)
		if i := c.retired(bucket); i >= 0 {
			// An expired generation's bucket: taken over, unless a node
			// is deleting it right now.
			if r := c.Retired[i]; r.ClaimedBy != "" && time.Since(r.ClaimedAt) < claimTTL {
				return fmt.Errorf("%w: bucket %s of expired generation %d of %s is being deleted by %s; try again in a minute", ErrInvalid, bucket, r.Generation, name, r.ClaimedBy)
			}
			c.Retired = slices.Delete(c.Retired, i, i+1)
		}
		if err := v.empty(ctx, bucket); err != nil {
			return fmt.Errorf("rebuild %s: empty bucket %s for generation %d: %w", name, bucket, gen, err)
		}
		c.Latest, c.Building = gen, gen
		return nil
	})
	return ctl.Building, err
}

// empty purges bucket's stream, if it exists.
func (v *Views) empty(ctx context.Context, bucket string) error {
	st, err := v.js.Stream(ctx, wire.KVStream(bucket))
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	return st.Purge(ctx)
}

// Switch makes generation gen (the active or the previous one) serve
// queries: a switch back after a rebuild.
func (v *Views) Switch(ctx context.Context, name string, gen int) error {
	cs, _, err := v.control(ctx, name)
	if err != nil {
		return err
	}
	_, err = cs.update(ctx, name, func(c *Control) error {
		switch gen {
		case c.Active:
			return nil
		case c.Previous:
			c.Active, c.Previous = c.Previous, c.Active
			c.switched(v.ns, name, 0, time.Time{}, time.Now().UTC())
			return nil
		}
		return fmt.Errorf("%w: %s has no generation %d to switch to (active %d, previous %d)", ErrInvalid, name, gen, c.Active, c.Previous)
	})
	return err
}

// Reset empties the active generation in place (documents, checkpoints,
// parked events): its owners are fenced and start over from the first
// event. Queries see the view refill; [Views.Rebuild] builds beside it
// instead.
func (v *Views) Reset(ctx context.Context, name string) error {
	_, ctl, err := v.control(ctx, name)
	if err != nil {
		return err
	}
	st, err := v.js.Stream(ctx, wire.KVStream(ctl.bucket(v.ns, name, ctl.Active)))
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return fmt.Errorf("%w: %s keeps its view in its own store: reset the position there", ErrInvalid, name)
	}
	if err != nil {
		return err
	}
	return st.Purge(ctx)
}

// Parked lists the parked events of the active generation, in position
// order.
func (v *Views) Parked(ctx context.Context, name string) ([]Parked, error) {
	kv, err := v.activeBucket(ctx, name)
	if kv == nil || err != nil {
		return nil, err
	}
	return listParked(ctx, kv, -1)
}

// activeBucket is the bucket of view name's active generation; nil (and no
// error) when there is none to open: nothing is parked or skipped there.
func (v *Views) activeBucket(ctx context.Context, name string) (jetstream.KeyValue, error) {
	_, ctl, err := v.control(ctx, name)
	if err != nil {
		return nil, err
	}
	kv, err := v.js.KeyValue(ctx, ctl.bucket(v.ns, name, ctl.Active))
	if err != nil {
		return nil, nil
	}
	return kv, nil
}

// Retry asks the owner to apply again the parked event at position (and
// the later parked events of its aggregate), or, for a stopped single
// projection, the event it stopped at (position 0: whichever).
func (v *Views) Retry(ctx context.Context, name string, position uint64, by string) (Request, error) {
	return v.request(ctx, name, "retry", position, by, "")
}

// Skip asks the owner to pass over the parked (or stopped-at) event at
// position, leaving a record naming by and reason, then to retry the
// aggregate's later parked events.
func (v *Views) Skip(ctx context.Context, name string, position uint64, by, reason string) (Request, error) {
	if strings.TrimSpace(reason) == "" {
		return Request{}, invalid("skip of %s at position %d: say why (--reason): it is kept in the skip record", name, position)
	}
	return v.request(ctx, name, "skip", position, by, reason)
}

func (v *Views) request(ctx context.Context, name, action string, position uint64, by, reason string) (Request, error) {
	cs, ctl, err := v.control(ctx, name)
	if err != nil {
		return Request{}, err
	}
	req := Request{ID: nuid.Next(), Action: action, Generation: ctl.Active, Position: position, By: by, Reason: reason, At: time.Now().UTC()}
	parked, err := v.Parked(ctx, name)
	if err != nil {
		return req, err
	}
	found := false
	for _, p := range parked {
		if p.Event.Position == position {
			req.Partition, found = p.Partition, true
		}
	}
	if !found {
		// A single projection stopped at an event: its lease says where.
		l, _, err := cs.lease(ctx, name, ctl.Active, 0)
		if err != nil {
			return req, err
		}
		if l.State != StateStopped {
			return req, invalid("%s holds no parked event at position %d and is not stopped (esjet projections parked %s lists them)", name, position, name)
		}
	}
	b, _ := json.Marshal(req)
	if _, err := cs.kv.Put(ctx, requestKey(name, req.ID), b); err != nil {
		return req, err
	}
	_, err = cs.update(ctx, name, func(c *Control) error { c.Requests++; return nil })
	return req, err
}

// Done says whether the owner has done request req.
func (v *Views) Done(ctx context.Context, name string, req Request) (bool, error) {
	cs, _, err := v.control(ctx, name)
	if err != nil {
		return false, err
	}
	_, err = cs.kv.Get(ctx, requestKey(name, req.ID))
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return true, nil
	}
	return false, err
}

// Skips lists the skip records of the active generation.
func (v *Views) Skips(ctx context.Context, name string) ([]Skipped, error) {
	kv, err := v.activeBucket(ctx, name)
	if kv == nil || err != nil {
		return nil, err
	}
	lister, err := kv.ListKeysFiltered(ctx, skippedKey+"*")
	if err != nil {
		return nil, err
	}
	var out []Skipped
	for k := range lister.Keys() {
		if e, err := kv.Get(ctx, k); err == nil {
			var s Skipped
			if json.Unmarshal(e.Value(), &s) == nil {
				out = append(out, s)
			}
		}
	}
	return out, nil
}
