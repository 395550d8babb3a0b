package projection

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/esjet/esjet/internal/wire"
)

// Health of a projection.
const (
	Green  = "green"  // owned, heartbeating, not stopped
	Yellow = "yellow" // paused, or holding parked events
	Red    = "red"    // a partition without a live owner (none, or frozen), or stopped at a failing event
)

// Status is what `esjet projections status` shows.
type Status struct {
	Name       string  `json:"name"`
	Active     int     `json:"active"`
	Building   int     `json:"building,omitempty"`
	Previous   int     `json:"previous,omitempty"`
	Paused     bool    `json:"paused,omitempty"`
	Partitions int     `json:"partitions"`
	Position   uint64  `json:"position"` // the lowest checkpoint of the active generation
	LogEnd     uint64  `json:"log_end"`  // the log's last sequence
	Lag        uint64  `json:"lag"`      // messages of the log after Position
	LagSeconds float64 `json:"lag_seconds"`
	Rate       float64 `json:"rate"` // events per second, all partitions
	Parked     int     `json:"parked"`
	Health     string  `json:"health"`
	Reason     string  `json:"reason,omitempty"`
	// Build is the progress of a generation being built (nil: none).
	Build *Build       `json:"build,omitempty"`
	Parts []PartStatus `json:"parts"`
}

// Build is a rebuild's progress.
type Build struct {
	Generation int     `json:"generation"`
	Position   uint64  `json:"position"`
	Progress   float64 `json:"progress"` // 0..1, by sequence
	ETA        string  `json:"eta,omitempty"`
}

// PartStatus is one partition of one generation.
type PartStatus struct {
	Generation int       `json:"generation"`
	Partition  int       `json:"partition"`
	Owner      string    `json:"owner,omitempty"`
	Heartbeat  time.Time `json:"heartbeat,omitzero"`
	State      string    `json:"state"`
	Error      string    `json:"error,omitempty"`
	Position   uint64    `json:"position"`
	Rate       float64   `json:"rate"`
	Parked     int       `json:"parked"`
}

// Names lists the projections that have run in the namespace.
func (v *Views) Names(ctx context.Context) ([]string, error) {
	kv, err := v.js.KeyValue(ctx, wire.ProjectionsBucket(v.ns))
	if err != nil {
		return nil, nil // no projection has run
	}
	lister, err := kv.ListKeysFiltered(ctx, "*.ctl")
	if err != nil {
		return nil, err
	}
	var out []string
	for k := range lister.Keys() {
		out = append(out, strings.TrimSuffix(k, ".ctl"))
	}
	slices.Sort(out)
	return out, nil
}

// All returns the status of every projection (what `esjet projections ls`
// and the console show).
func (v *Views) All(ctx context.Context) ([]Status, error) {
	names, err := v.Names(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Status, 0, len(names))
	for _, n := range names {
		st, err := v.Status(ctx, n)
		if err != nil {
			return nil, err
		}
		out = append(out, st)
	}
	return out, nil
}

// Status reports one projection: position, lag, rate, owners, heartbeats,
// parked count and health. A partition whose owner stopped heartbeating
// for longer than the lease TTL is red even when the log is idle.
func (v *Views) Status(ctx context.Context, name string) (Status, error) {
	cs, ctl, err := v.control(ctx, name)
	if err != nil {
		return Status{}, err
	}
	st := Status{Name: name, Active: ctl.Active, Building: ctl.Building, Previous: ctl.Previous, Paused: ctl.Paused,
		Partitions: max(ctl.Partitions, 1), Health: Green}
	events, err := v.js.Stream(ctx, v.names.Events)
	if err != nil {
		return st, err
	}
	info, err := events.Info(ctx)
	if err != nil {
		return st, err
	}
	st.LogEnd = info.State.LastSeq
	var reasons []string
	first := true
	for _, gen := range ctl.generations() {
		var buildLow uint64
		var buildRate float64
		for part := range st.Partitions {
			ps := PartStatus{Generation: gen, Partition: part, State: "unowned"}
			if kv, err := v.js.KeyValue(ctx, ctl.bucket(v.ns, name, gen)); err == nil {
				cp, _ := readCheckpoint(ctx, kv, part)
				ps.Position = cp.Position
				if recs, err := listParked(ctx, kv, part); err == nil {
					ps.Parked = len(recs)
				}
			}
			l, rev, err := cs.lease(ctx, name, gen, part)
			if err != nil {
				return st, err
			}
			alive := rev > 0 && time.Since(l.Heartbeat) <= v.leaseTTL
			if rev > 0 {
				ps.Owner, ps.Heartbeat, ps.State, ps.Error, ps.Rate = l.Owner, l.Heartbeat, l.State, l.Error, l.Rate
				if !alive && l.State != StateNewerBuild {
					ps.State = "frozen"
				}
			}
			st.Parts = append(st.Parts, ps)
			if gen == ctl.Building {
				if part == 0 || ps.Position < buildLow {
					buildLow = ps.Position
				}
				buildRate += ps.Rate
				continue
			}
			if gen != ctl.Active {
				continue
			}
			if first || ps.Position < st.Position {
				st.Position, first = ps.Position, false
			}
			st.Rate += ps.Rate
			st.Parked += ps.Parked
			switch {
			case rev > 0 && l.State == StateNewerBuild:
				reasons = append(reasons, fmt.Sprintf("partition %d stopped before a message a newer build wrote, for a node of that build to take over (upgrade the nodes): %s", part, l.Error))
			case !alive && rev == 0:
				reasons = append(reasons, fmt.Sprintf("partition %d has no owner", part))
			case !alive:
				reasons = append(reasons, fmt.Sprintf("partition %d: owner %s silent since %s", part, l.Owner, l.Heartbeat.Format(time.RFC3339)))
			case l.State == StateStopped:
				reasons = append(reasons, fmt.Sprintf("partition %d stopped: %s", part, l.Error))
			}
		}
		if gen == ctl.Building {
			st.Build = buildProgress(gen, buildLow, buildRate, st.LogEnd)
		}
	}
	seq, _ := wire.SplitPosition(st.Position)
	if st.LogEnd > seq {
		st.Lag = st.LogEnd - seq
		if m, err := events.GetMsg(ctx, seq+1); err == nil {
			st.LagSeconds = time.Since(m.Time).Seconds()
		}
	}
	switch {
	case len(reasons) > 0:
		st.Health, st.Reason = Red, strings.Join(reasons, "; ")
	case st.Paused:
		st.Health, st.Reason = Yellow, "paused"
	case st.Parked > 0:
		st.Health, st.Reason = Yellow, fmt.Sprintf("%d parked event(s)", st.Parked)
	}
	return st, nil
}

func buildProgress(gen int, low uint64, rate float64, end uint64) *Build {
	b := &Build{Generation: gen, Position: low, Progress: 1}
	seq, _ := wire.SplitPosition(low)
	if end > 0 && seq < end {
		b.Progress = float64(seq) / float64(end)
		if rate > 0 {
			// Rate is events/s and lag is in messages: an estimate.
			b.ETA = (time.Duration(float64(end-seq)/rate*float64(time.Second)) + time.Second/2).Round(time.Second).String()
		}
	}
	return b
}

// String is the status as one line of JSON (for logs).
func (s Status) String() string {
	b, _ := json.Marshal(s)
	return string(b)
}
