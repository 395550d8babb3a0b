package projection

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/wire"
)

// Expiry of view generations no longer served (streams.unserved_views_max_age).
//
// A switch leaves the generation that served before it as Previous: it
// keeps following the log, so a switch back serves a current view. The
// Previous it replaced is retired: neither served nor run, its bucket kept
// until it expires or a rebuild takes the bucket over. A sweep, on every
// node that runs projections, expires what has not served for the
// configured age: a Previous is retired (no switch back to it any more;
// its owners stop at their next heartbeat), and a retired generation's
// bucket is deleted once no owner holds a lease of it. The served
// generation and one being built are never touched: both are read from
// the control record in the same compare-and-set that retires.
//
// Two nodes: every step is a compare-and-set of the control record, so one
// node retires; a retired bucket is deleted by the node that claimed it
// in the record (claimTTL), and a deleted bucket (not found) counts as
// deleted, so a second delete is harmless. A rebuild does not take a
// claimed bucket; a claim older than claimTTL is a node that stopped
// mid-delete, and anyone may take over.
//
// Roles: deleting a stream takes the admin role. A node whose user may not
// (the node role) purges the bucket instead, which the node role may for
// its views: the documents are gone, an empty bucket stays until a node
// that may delete it sweeps (or an admin removes it). It says so in its
// log once, and goes on.

// claimTTL is how long a node's claim to delete a retired bucket holds.
const claimTTL = time.Minute

// expirer sweeps one namespace's views. Not safe for concurrent use (one
// runner's loop calls it).
type expirer struct {
	js       jetstream.JetStream
	ns       string
	ctl      controlStore
	maxAge   time.Duration
	leaseTTL time.Duration
	nodeID   string
	logger   *slog.Logger
	now      func() time.Time
	// deleteStream deletes a stream (tests count the calls).
	deleteStream func(ctx context.Context, name string) error
	// noDelete: a delete was refused for want of the right: purge only,
	// and the log said so once.
	noDelete bool
}

func newExpirer(js jetstream.JetStream, ns string, ctl controlStore, cfg Config, logger *slog.Logger) *expirer {
	return &expirer{js: js, ns: ns, ctl: ctl, maxAge: cfg.UnservedMaxAge, leaseTTL: cfg.LeaseTTL, nodeID: cfg.NodeID,
		logger: logger, now: func() time.Time { return time.Now().UTC() }, deleteStream: js.DeleteStream}
}

// errUnchanged ends a compare-and-set that has nothing to write.
var errUnchanged = errors.New("unchanged")

// sweep expires what is due in every view of names. Errors are logged,
// not returned: a sweep is housekeeping, and the next one tries again.
func (x *expirer) sweep(ctx context.Context, names []string) {
	if x.maxAge <= 0 {
		return
	}
	for _, name := range names {
		if err := x.sweepView(ctx, name); err != nil && ctx.Err() == nil {
			x.logger.Warn("projection: expire unserved generations", "projection", name, "error", err)
		}
	}
}

func (x *expirer) sweepView(ctx context.Context, name string) error {
	ctl, rev, err := x.ctl.control(ctx, name)
	if err != nil || rev == 0 || ctl.Sink {
		return err
	}
	// Slot buckets no record names (a generation dropped before retired
	// ones were tracked): their clock starts now.
	var found []string
	if ctl.SlotsFrom > 0 {
		for _, b := range wire.ViewBuckets(x.ns, name) {
			if ctl.holds(x.ns, name, b) || ctl.retired(b) >= 0 {
				continue
			}
			if _, err := x.js.Stream(ctx, wire.KVStream(b)); err == nil {
				found = append(found, b)
			}
		}
	}
	now := x.now()
	ctl, err = x.ctl.update(ctx, name, func(c *Control) error {
		changed := false
		if c.Previous > 0 && c.PreviousSince.IsZero() {
			c.PreviousSince, changed = now, true
		}
		if c.Previous > 0 && now.Sub(c.PreviousSince) >= x.maxAge {
			b := c.bucket(x.ns, name, c.Previous)
			prev, since := c.Previous, c.PreviousSince
			c.Previous, c.PreviousSince = 0, time.Time{}
			if c.retired(b) < 0 && !c.holds(x.ns, name, b) {
				c.Retired = append(c.Retired, Retired{Generation: prev, Bucket: b, Since: since})
			}
			changed = true
		}
		for _, b := range found {
			if !c.holds(x.ns, name, b) && c.retired(b) < 0 {
				c.Retired = append(c.Retired, Retired{Bucket: b, Since: now})
				changed = true
			}
		}
		if !changed {
			return errUnchanged
		}
		return nil
	})
	if errors.Is(err, errUnchanged) {
		ctl, _, err = x.ctl.control(ctx, name)
	}
	if err != nil {
		return err
	}
	for _, r := range ctl.Retired {
		if now.Sub(r.Since) < x.maxAge || !r.Emptied.IsZero() && x.noDelete {
			continue
		}
		if live, err := x.leased(ctx, name, r.Generation, max(ctl.Partitions, 1)); err != nil || live {
			continue // its owners stop at their next heartbeat
		}
		if err := x.remove(ctx, name, r); err != nil {
			return err
		}
	}
	return nil
}

// leased says whether an owner still heartbeats a partition of gen.
func (x *expirer) leased(ctx context.Context, name string, gen, parts int) (bool, error) {
	if gen == 0 {
		return false, nil
	}
	for part := range parts {
		l, rev, err := x.ctl.lease(ctx, name, gen, part)
		if err != nil {
			return false, err
		}
		if rev > 0 && time.Since(l.Heartbeat) < x.leaseTTL {
			return true, nil
		}
	}
	return false, nil
}

// remove claims retired bucket r, deletes it (or empties it), and records
// what it did.
func (x *expirer) remove(ctx context.Context, name string, r Retired) error {
	now := x.now()
	_, err := x.ctl.update(ctx, name, func(c *Control) error {
		i := c.retired(r.Bucket)
		if i < 0 || c.holds(x.ns, name, r.Bucket) {
			return errUnchanged // taken by a rebuild, or done by another node
		}
		e := &c.Retired[i]
		if e.ClaimedBy != "" && e.ClaimedBy != x.nodeID && now.Sub(e.ClaimedAt) < claimTTL {
			return errUnchanged // another node deletes it now
		}
		e.ClaimedBy, e.ClaimedAt = x.nodeID, now
		return nil
	})
	if errors.Is(err, errUnchanged) {
		return nil
	}
	if err != nil {
		return err
	}
	stream := wire.KVStream(r.Bucket)
	deleted := false
	if !x.noDelete {
		dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := x.deleteStream(dctx, stream)
		cancel()
		switch {
		case err == nil || errors.Is(err, jetstream.ErrStreamNotFound):
			deleted = true
		case x.refused(err):
			x.noDelete = true
			x.logger.Warn("projection: a view generation no longer served has expired, but this node's NATS user may not delete streams (only the admin role may): its bucket is emptied instead and stays, empty, until a node that may delete it sweeps or an admin removes it (nats stream rm); said once",
				"projection", name, "generation", r.Generation, "stream", stream, "error", err)
		default:
			x.logger.Warn("projection: delete the bucket of an expired view generation; it is emptied instead", "projection", name,
				"generation", r.Generation, "stream", stream, "error", err)
		}
	}
	if !deleted && r.Emptied.IsZero() {
		st, err := x.js.Stream(ctx, stream)
		switch {
		case errors.Is(err, jetstream.ErrStreamNotFound):
			deleted = true
		case err != nil:
			return fmt.Errorf("empty %s: %w", stream, err)
		default:
			if err := st.Purge(ctx); err != nil {
				return fmt.Errorf("empty %s: %w", stream, err)
			}
		}
	}
	_, err = x.ctl.update(ctx, name, func(c *Control) error {
		i := c.retired(r.Bucket)
		if i < 0 || c.Retired[i].ClaimedBy != x.nodeID {
			return errUnchanged
		}
		if deleted {
			c.Retired = slices.Delete(c.Retired, i, i+1)
			return nil
		}
		e := &c.Retired[i]
		e.ClaimedBy, e.ClaimedAt = "", time.Time{}
		if e.Emptied.IsZero() {
			e.Emptied = now
		}
		return nil
	})
	if errors.Is(err, errUnchanged) {
		err = nil
	}
	if err == nil {
		x.logger.Info("projection: view generation no longer served expired", "projection", name, "generation", r.Generation,
			"stream", stream, "unserved_since", r.Since, "deleted", deleted)
	}
	return err
}

// refused says whether a delete failed for want of the right: the server
// drops a publish its user may not make (no reply: the request times out)
// and tells the connection, whose last error then names the subject.
func (x *expirer) refused(err error) bool {
	if errors.Is(err, nats.ErrPermissionViolation) {
		return true
	}
	last := x.js.Conn().LastError()
	return last != nil && errors.Is(last, nats.ErrPermissionViolation) && strings.Contains(last.Error(), "STREAM.DELETE")
}
