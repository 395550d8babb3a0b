package streams

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
)

// Ensure is what a node does at start with the namespace's streams and
// buckets: it creates each missing object with its whole configuration in
// one CREATE (the node's role may create its streams, never update them)
// and checks each existing one against its configuration ([Check]):
//   - a lossy or needed difference ([DiffLossy], [DiffNeeded]) is a
//     [*StreamConfigError] naming the stream, the setting, have → want and
//     esjet provision as the fix; the stream is not touched;
//   - a benign one is logged as a warning and reported as "differs".
//
// The one exception is a hub's sources (an object whose configuration has
// sources, [HubObjects]): adding and dropping sites is the hub's job, so it
// updates them, after the same checks. Errors of single objects are joined.
// logger may be nil.
func Ensure(ctx context.Context, js jetstream.JetStream, objs []Object, logger *slog.Logger) ([]Change, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	logger = logger.With("component", "streams")
	var changes []Change
	var errs []error
	for _, o := range objs {
		ch, err := ensureStream(ctx, js, o)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		changes = append(changes, ch)
		switch ch.Action {
		case "created", "updated":
			logger.Info("provisioned", "stream", ch.Name, "action", ch.Action, "fields", ch.Fields)
		case "differs":
			logger.Warn("stream differs from the configuration in ways that lose nothing; run `esjet provision` as an admin user to apply it",
				"stream", ch.Name, "fields", ch.Fields)
		}
	}
	return changes, errors.Join(errs...)
}

func ensureStream(ctx context.Context, js jetstream.JetStream, o Object) (Change, error) {
	want := o.Config
	st, created, err := openOrCreate(ctx, js, want, true)
	if err != nil {
		return Change{}, err
	}
	if created {
		return Change{Name: o.Name, Action: "created"}, nil
	}
	have := st.CachedInfo().Config
	var sources *Diff
	diffs := diffStream(have, want)
	if len(want.Sources) > 0 {
		for i, d := range diffs {
			if d.Field == "sources" && d.Kind == DiffNeeded {
				sources = &d
				diffs = append(diffs[:i:i], diffs[i+1:]...)
				break
			}
		}
	}
	benign, err := check(want.Name, diffs)
	if err != nil {
		return Change{}, err
	}
	if sources != nil {
		upd := have
		upd.Sources = want.Sources
		if _, err := js.UpdateStream(ctx, upd); err != nil {
			return Change{}, fmt.Errorf("update hub stream %s (%s): %w", want.Name, sources, err)
		}
		return Change{Name: o.Name, Action: "updated", Fields: append([]string{sources.String()}, fields(benign)...)}, nil
	}
	if o.dlq != nil {
		if err := o.dlq.pending(ctx, st); err != nil {
			return Change{}, err
		}
	}
	if len(benign) > 0 {
		return Change{Name: o.Name, Action: "differs", Fields: fields(benign)}, nil
	}
	return Change{Name: o.Name, Action: "unchanged"}, nil
}

// Check compares an existing stream with the configuration esjet wants for
// it, as a node does at start: the lossy and needed differences are a
// [*StreamConfigError]; the benign ones are returned for a warning.
func Check(have, want jetstream.StreamConfig) (benign []Diff, err error) {
	return check(want.Name, diffStream(have, want))
}

func check(stream string, diffs []Diff) ([]Diff, error) {
	refuse, warn := refusals(diffs)
	if len(refuse) > 0 {
		return nil, &StreamConfigError{Stream: stream, Diffs: refuse}
	}
	return warn, nil
}

// String lists the fields of a change for a log line or a CLI.
func (c Change) String() string {
	if len(c.Fields) == 0 {
		return c.Name + ": " + c.Action
	}
	return c.Name + ": " + c.Action + " (" + strings.Join(c.Fields, "; ") + ")"
}
