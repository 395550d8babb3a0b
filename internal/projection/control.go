package projection

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/esjet/esjet/internal/wire"
	"github.com/nats-io/nats.go/jetstream"
)

// Control is a projection's control record (key <name>.ctl in the control
// bucket): which generation serves queries, which is being built, whether
// it is paused.
type Control struct {
	// Active is the generation queries read (1: bucket <ns>_view_<name>;
	// see [Control.bucket]).
	Active int `json:"active"`
	// Building is a generation being built from the start beside Active
	// (0: none); it becomes Active when it has caught up.
	Building int `json:"building,omitempty"`
	// Previous is the generation Active replaced, kept running so that a
	// switch back serves a current view (0: none), until it expires
	// (Config.UnservedMaxAge after PreviousSince).
	Previous int `json:"previous,omitempty"`
	// PreviousSince is when Previous stopped serving (zero: in a record
	// written before it was kept; the first sweep starts the clock).
	PreviousSince time.Time `json:"previous_since,omitzero"`
	// Retired are generations neither served nor run whose buckets still
	// exist: each is deleted (or, by a node that may not delete streams,
	// emptied) once it has not served for Config.UnservedMaxAge, unless
	// a rebuild takes its bucket first.
	Retired []Retired `json:"retired,omitempty"`
	// Latest is the highest generation ever made (a rebuild makes Latest+1).
	Latest int  `json:"latest"`
	Paused bool `json:"paused,omitempty"`
	// Partitions, AggregateTypes and EventTypes are the definition's, as
	// the runner last saw them (for status).
	Partitions int `json:"partitions"`
	// Sink says the view is kept in the user's own store ([Sink]): esjet
	// holds no documents of it to answer queries with.
	Sink bool `json:"sink,omitempty"`
	// Requests counts the operators' requests ever made: an owner lists
	// them only when it moved.
	Requests int `json:"requests,omitempty"`
	// SlotsFrom is the first generation kept in a slot bucket
	// ([ViewBucket]); 0 in a record made before slots existed, whose
	// rebuilt generations have buckets <ns>_view_<name>_g<gen>. The first
	// rebuild sets it.
	SlotsFrom int `json:"slots_from,omitempty"`
}

// bucket is the bucket of generation gen: its slot ([ViewBucket]), or for
// a generation rebuilt before slots existed its own bucket
// <ns>_view_<name>_g<gen> (still read where it serves, until the next
// rebuild replaces it).
func (c Control) bucket(ns, name string, gen int) string {
	if gen > 1 && (c.SlotsFrom == 0 || gen < c.SlotsFrom) {
		return wire.LegacyViewBucket(ns, name, gen)
	}
	return ViewBucket(ns, name, gen)
}

// nextGeneration is the generation a rebuild makes: the first after every
// one made so far whose bucket neither the active nor the previous
// generation holds (at most [Slots]-1 numbers are passed over).
func (c Control) nextGeneration(ns, name string) int {
	g := max(c.Latest, c.Active, c.Previous) + 1
	busy := func(g int) bool {
		b := c.bucket(ns, name, g)
		return b == c.bucket(ns, name, c.Active) || c.Previous > 0 && b == c.bucket(ns, name, c.Previous)
	}
	for busy(g) {
		g++
	}
	return g
}

// Retired is a generation no longer served nor run, whose bucket waits to
// expire.
type Retired struct {
	Generation int    `json:"generation"` // 0: not known (a bucket left from before generations were tracked)
	Bucket     string `json:"bucket"`
	// Since is when it stopped serving (or when a sweep first found it).
	Since time.Time `json:"since"`
	// Emptied is when a node that may not delete streams purged it: its
	// empty bucket waits for a node that may (the admin role).
	Emptied time.Time `json:"emptied,omitzero"`
	// ClaimedBy is the node deleting it now (ClaimedAt: since when): no
	// other node deletes it, and no rebuild takes its bucket, meanwhile.
	ClaimedBy string    `json:"claimed_by,omitempty"`
	ClaimedAt time.Time `json:"claimed_at,omitzero"`
}

// retired is the index of bucket's entry in Retired (-1: none).
func (c Control) retired(bucket string) int {
	for i, r := range c.Retired {
		if r.Bucket == bucket {
			return i
		}
	}
	return -1
}

// holds says whether bucket belongs to a generation that serves, is built
// or is kept for a switch back.
func (c Control) holds(ns, name, bucket string) bool {
	for _, g := range c.generations() {
		if g > 0 && c.bucket(ns, name, g) == bucket {
			return true
		}
	}
	return false
}

// switched records that Active replaced the generation that served before
// it, now Previous (at now); the Previous it replaced, if any, is retired.
func (c *Control) switched(ns, name string, dropped int, droppedSince, now time.Time) {
	if dropped > 0 && dropped != c.Active && dropped != c.Previous && dropped != c.Building {
		b := c.bucket(ns, name, dropped)
		if c.retired(b) < 0 && !c.holds(ns, name, b) {
			c.Retired = append(c.Retired, Retired{Generation: dropped, Bucket: b, Since: cmp.Or(droppedSince, now)})
		}
	}
	c.PreviousSince = now
}

// generations are the generations that run.
func (c Control) generations() []int {
	gens := []int{c.Active}
	if c.Building > 0 {
		gens = append(gens, c.Building)
	}
	if c.Previous > 0 && c.Previous != c.Active && c.Previous != c.Building {
		gens = append(gens, c.Previous)
	}
	return gens
}

// Request is an operator's action on a projection, kept in the control
// bucket (<name>.req.<id>) until the owner of its partition has done it.
type Request struct {
	ID         string    `json:"id"`
	Action     string    `json:"action"` // retry, skip
	Generation int       `json:"generation"`
	Partition  int       `json:"partition"`
	Position   uint64    `json:"position,omitempty"`
	By         string    `json:"by"`
	Reason     string    `json:"reason,omitempty"`
	At         time.Time `json:"at"`
}

// Lease is a partition's ownership and heartbeat (<name>.g<gen>.p<part>.lease):
// the owner renews it while it runs; its revision is the fencing token.
type Lease struct {
	Owner     string    `json:"owner"`
	Heartbeat time.Time `json:"heartbeat"`
	// What the owner last saw: its checkpoint, the log's end, its rate.
	Position uint64  `json:"position"`
	LogEnd   uint64  `json:"log_end"`
	Rate     float64 `json:"rate"` // events per second, recent
	State    string  `json:"state"`
	Error    string  `json:"error,omitempty"`
	// StoppedAt is the failing event a single projection stopped at.
	StoppedAt uint64 `json:"stopped_at,omitempty"`
	Parked    int    `json:"parked"`
	Events    uint64 `json:"events"` // events handled by this owner
}

// Lease states.
const (
	StateRunning  = "running"
	StatePaused   = "paused"
	StateStopped  = "stopped" // single: at a failing event
	StateCaughtUp = "caught_up"
	// StateNewerBuild: the owner stopped before a message a newer build
	// wrote and handed the partition over; any node may take it at once.
	StateNewerBuild = "waiting_for_newer_build"
)

// Checkpoint is a partition's progress, stored in the view bucket with the
// documents it covers.
type Checkpoint struct {
	Position uint64    `json:"position"` // every event up to it is applied (or parked)
	Owner    string    `json:"owner"`
	Token    uint64    `json:"token"` // the writer's lease revision
	At       time.Time `json:"at"`
	Events   uint64    `json:"events"` // events handled in this generation
	// Parked is the position of the partition's first parked event (0:
	// none): the view holds every event up to Position except the parked
	// ones, so it stands, as a promise, just before this one.
	Parked uint64 `json:"parked,omitempty"`
}

// holds is the position up to which the partition holds every event:
// its checkpoint, or just before its first parked event.
func (c Checkpoint) holds() uint64 {
	if c.Parked > 0 && c.Parked <= c.Position {
		return c.Parked - 1
	}
	return c.Position
}

// controlStore reads and writes the control bucket.
type controlStore struct {
	kv jetstream.KeyValue
}

// control returns the projection's control record and its revision (0:
// none yet).
func (c controlStore) control(ctx context.Context, name string) (Control, uint64, error) {
	var ctl Control
	e, err := c.kv.Get(ctx, ctlKey(name))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return Control{Active: 1, Latest: 1}, 0, nil
	}
	if err != nil {
		return ctl, 0, fmt.Errorf("projection %s control: %w", name, err)
	}
	if err := json.Unmarshal(e.Value(), &ctl); err != nil {
		return ctl, 0, fmt.Errorf("projection %s control: %w", name, err)
	}
	return ctl, e.Revision(), nil
}

// update applies fn to the control record with compare-and-set, again on
// a concurrent change.
func (c controlStore) update(ctx context.Context, name string, fn func(*Control) error) (Control, error) {
	for range 20 {
		ctl, rev, err := c.control(ctx, name)
		if err != nil {
			return ctl, err
		}
		if err := fn(&ctl); err != nil {
			return ctl, err
		}
		b, _ := json.Marshal(ctl)
		if rev == 0 {
			_, err = c.kv.Create(ctx, ctlKey(name), b)
		} else {
			_, err = c.kv.Update(ctx, ctlKey(name), b, rev)
		}
		if err == nil {
			return ctl, nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) && !isWrongLast(err) {
			return ctl, fmt.Errorf("projection %s control: %w", name, err)
		}
	}
	return Control{}, fmt.Errorf("projection %s control: changed concurrently 20 times; try again", name)
}

func isWrongLast(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && (apiErr.ErrorCode == 10071 || apiErr.ErrorCode == 10164)
}

// lease returns a partition's lease and its revision (0: none).
func (c controlStore) lease(ctx context.Context, name string, gen, part int) (Lease, uint64, error) {
	var l Lease
	e, err := c.kv.Get(ctx, leaseKey(name, gen, part))
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return l, 0, nil
	}
	if err != nil {
		return l, 0, err
	}
	if err := json.Unmarshal(e.Value(), &l); err != nil {
		return l, 0, err
	}
	return l, e.Revision(), nil
}

// requests lists the pending requests of a projection.
func (c controlStore) requests(ctx context.Context, name string) ([]Request, error) {
	lister, err := c.kv.ListKeysFiltered(ctx, name+".req.*")
	if err != nil {
		return nil, err
	}
	var out []Request
	for k := range lister.Keys() {
		e, err := c.kv.Get(ctx, k)
		if err != nil {
			continue // done meanwhile
		}
		var r Request
		if json.Unmarshal(e.Value(), &r) == nil {
			out = append(out, r)
		}
	}
	return out, nil
}
