package projection

import (
	"context"
	"fmt"
	"time"

	"github.com/esjet/esjet/config"
	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/wire"
)

// Retention says, for each view bucket's stream (KV_…) the control
// records name, which generation it holds and how long it is kept: the
// served one and one being built as long as they are; the previous one
// and the retired ones maxAge (streams.unserved_views_max_age) after they
// stopped serving, or until a rebuild takes their bucket when maxAge is 0.
// `esjet streams` and the console show it in place of what the bucket's
// stream configuration alone says ([streams.RetentionOf]).
func (v *Views) Retention(ctx context.Context, maxAge time.Duration) (map[string]streams.Retention, error) {
	names, err := v.Names(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]streams.Retention{}
	for _, name := range names {
		_, ctl, err := v.control(ctx, name)
		if err != nil {
			return nil, err
		}
		if ctl.Sink {
			continue
		}
		for stream, r := range ctl.retention(v.ns, name, maxAge) {
			out[stream] = r
		}
	}
	return out, nil
}

// retention is what [Views.Retention] says of one view's buckets.
func (c Control) retention(ns, name string, maxAge time.Duration) map[string]streams.Retention {
	out := map[string]streams.Retention{}
	set := func(gen int, r streams.Retention) {
		if gen > 0 {
			out[wire.KVStream(c.bucket(ns, name, gen))] = r
		}
	}
	set(c.Previous, streams.Retention{Kept: unservedFor(maxAge, c.PreviousSince),
		Why: fmt.Sprintf("view %s, generation %d: served before generation %d, kept following the log for a switch back (esjet projections switch) for streams.unserved_views_max_age", name, c.Previous, c.Active)})
	set(c.Building, streams.Retention{Kept: "while built, then served",
		Why: fmt.Sprintf("view %s, generation %d: being rebuilt from EVENTS", name, c.Building)})
	set(c.Active, streams.Retention{Kept: "while it serves",
		Why: fmt.Sprintf("view %s, generation %d: serves the view's queries; rebuildable from EVENTS", name, c.Active)})
	for _, r := range c.Retired {
		what := fmt.Sprintf("view %s, generation %d", name, r.Generation)
		if r.Generation == 0 {
			what = fmt.Sprintf("view %s, a generation dropped earlier", name)
		}
		ret := streams.Retention{Kept: unservedFor(maxAge, r.Since), Why: what + ": no longer served nor run, deleted streams.unserved_views_max_age after it stopped serving"}
		if !r.Emptied.IsZero() {
			ret.Kept = "emptied, until an admin deletes it"
			ret.Why = what + ": expired " + r.Emptied.UTC().Format(time.RFC3339) + " and emptied by a node that may not delete streams; a node with the admin role deletes the empty bucket"
		}
		out[wire.KVStream(r.Bucket)] = ret
	}
	return out
}

// unservedFor says how long a generation that stopped serving at since is
// kept.
func unservedFor(maxAge time.Duration, since time.Time) string {
	age := config.Duration(maxAge).String()
	switch {
	case maxAge <= 0:
		return "until a rebuild reuses it"
	case since.IsZero():
		return age + " from the next sweep"
	}
	return "until " + since.Add(maxAge).UTC().Format("2006-01-02T15:04Z") + " (" + age + " unserved)"
}
