package projection

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/esjet/esjet/internal/streams"
)

// errNewerBuild: the partition reached a message a newer build wrote (an
// envelope or event schema version this build does not know,
// [streams.TooNew]). It has stored everything before it and hands the
// partition over rather than retry on the spot: a node of the newer build
// reads on.
var errNewerBuild = errors.New("projection: stopped before a message a newer build wrote")

// stopAtNewer turns err, from a message the partition could not read, into
// errNewerBuild when a newer build wrote that message, after storing the
// batch before it (the view then stands just before the message). Any
// other error is returned as it is: the partition restarts from its
// checkpoint.
func (p *partition) stopAtNewer(ctx context.Context, err error) error {
	var tn streams.TooNew
	if !errors.As(err, &tn) || !tn.TooNew() {
		return err
	}
	if ferr := p.flushBatch(ctx); ferr != nil {
		return ferr
	}
	return fmt.Errorf("%w: %w", errNewerBuild, err)
}

// standDownFor is how long a runner leaves a partition alone after it
// stood down before a message a newer build wrote: long enough for a node
// of that build (which claims free partitions every heartbeat) to take it
// first; a fleet of the older build alone looks again after it, stops at
// the same place, and nothing is skipped.
func (r *Runner) standDownFor() time.Duration { return max(2*r.cfg.LeaseTTL, 10*r.cfg.Heartbeat) }

// away is a partition this runner stood down from.
type away struct {
	until time.Time
	pos   uint64 // where it stopped: logged once per place
}

// standDown hands partition p (lease key) over after it stopped before a
// message a newer build wrote: its lease says so, in a state any node may
// take at once ([StateNewerBuild]), and this runner stays away from it for
// standDownFor. It logs once per place it stops at, not each time it comes
// back to it.
func (r *Runner) standDown(ctx context.Context, key string, p *partition, cause error) {
	r.mu.Lock()
	prev, seen := r.away[key]
	r.away[key] = away{until: time.Now().Add(r.standDownFor()), pos: p.committed}
	r.mu.Unlock()
	if !seen || prev.pos != p.committed {
		p.logger.Warn("projection partition stands down before a message a newer build wrote, so a node of that build takes it over (upgrade this node)",
			"position", p.committed, "for", r.standDownFor(), "error", cause)
	}
	l := Lease{Owner: r.nodeID, Heartbeat: time.Now().UTC(), Position: p.committed, LogEnd: p.logEnd, State: StateNewerBuild,
		Error: strings.TrimPrefix(cause.Error(), errNewerBuild.Error()+": "), Parked: p.parkedCount(), Events: p.events}
	b, _ := json.Marshal(l)
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	if _, err := r.ctl.kv.Update(dctx, key, b, p.leaseRev); err != nil {
		// Taken over meanwhile (or the bucket is unreachable: the lease
		// then lapses after its TTL).
		p.logger.Debug("projection partition: lease not marked as stood down", "error", err)
	}
}

// keepsAway reports whether this runner stood down from the partition
// under key a moment ago.
func (r *Runner) keepsAway(key string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	a, ok := r.away[key]
	return ok && time.Now().Before(a.until)
}
