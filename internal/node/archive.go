package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/config"
	"github.com/esjet/esjet/internal/aggregate"
	"github.com/esjet/esjet/internal/archive"
	"github.com/esjet/esjet/internal/shred"
	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/wire"
)

// ArchiveStore is the namespace's archive store: the directory
// archive.dir when set, else the object store bucket <ns>_archive
// (created on first write when mode says so: the archive job's).
func ArchiveStore(cfg config.Config, js jetstream.JetStream, mode archive.OpenMode) archive.Store {
	if cfg.Archive.Dir != "" {
		return archive.Dir(cfg.Archive.Dir)
	}
	return archive.NewObjectStore(js, cfg.Namespace, cfg.Streams.Replicas, mode)
}

// applyArchive makes the node's history reads fall through to the
// archive, and gives each archived type's definition what a command to an
// archived aggregate does.
func applyArchive(cfg config.Config, js jetstream.JetStream, reg *aggregate.Registry, log *streams.Log) {
	log.SetArchive(archive.Reader(ArchiveStore(cfg, js, archive.ReadBucket), log))
	for typ, r := range cfg.Archive.Types {
		if def, err := reg.Get(typ); err == nil && r.OnCommand == config.ArchiveRefuse {
			def.SetArchived(aggregate.ArchivedRefuse)
		}
	}
}

// ArchiveRules are the configured rules, as the archiver takes them.
func ArchiveRules(cfg config.Config) map[string]archive.Rule {
	out := map[string]archive.Rule{}
	for typ, r := range cfg.Archive.Types {
		out[typ] = archive.Rule{ClosedBy: r.ClosedBy, After: r.AfterOf()}
	}
	return out
}

// OpenArchiver builds what `esjet archive run` needs without a node: the
// log, a repository of defs (for the state a tombstone carries, sealed as
// snapshots are) and the archiver. js must be the admin's (it purges
// EVENTS and may create the archive bucket). stop releases the keyring.
func OpenArchiver(ctx context.Context, cfg config.Config, js jetstream.JetStream, defs []*aggregate.Definition, logger *slog.Logger) (_ *archive.Archiver, stop func(), _ error) {
	reg, err := aggregate.NewRegistry(defs...)
	if err != nil {
		return nil, nil, err
	}
	if errs := unknownArchiveTypes(cfg, reg); len(errs) > 0 {
		// Their tombstones would carry no state: a node that defines the
		// type in Go could not load them.
		return nil, nil, errors.Join(errs...)
	}
	keys := &shred.Lazy{JS: js, Namespace: cfg.Namespace, Replicas: cfg.Streams.Replicas}
	lc := LogConfig(cfg)
	lc.GroupCommit = streams.GroupCommit{}
	raw, err := aggregate.RawUpcasts(cfg.Aggregates.Raw)
	if err != nil {
		return nil, nil, err
	}
	up, err := aggregate.NewUpcasters(reg, raw)
	if err != nil {
		return nil, nil, err
	}
	lc.Upcast = up.Upcast
	lc.Open = opening(keys, cfg)
	// The state is folded from opened events; the archive job's own log
	// reads messages as stored (they are archived sealed).
	stateLog, err := streams.Open(ctx, js, cfg.Namespace, lc, logger)
	if err != nil {
		return nil, nil, err
	}
	plain, err := streams.Open(ctx, js, cfg.Namespace, streams.Config{MaxMessageSize: lc.MaxMessageSize}, logger)
	if err != nil {
		return nil, nil, err
	}
	snaps, err := js.KeyValue(ctx, wire.NamesFor(cfg.Namespace).Snapshots)
	if err != nil {
		return nil, nil, fmt.Errorf("open snapshots bucket: %w", err)
	}
	rc := RepositoryConfig(cfg)
	rc.CacheSize = -1
	rc.SnapshotEvery = -1
	rc.Sealer, rc.Personal = &shred.Sealer{Keys: keys}, personalSpecs(cfg)
	repo := aggregate.NewRepository(stateLog, snaps, reg, rc, logger)
	state := func(ctx context.Context, typ, id string, at wire.Position) (json.RawMessage, int, int, error) {
		st, schema, outstanding, err := repo.ArchiveState(ctx, typ, id, at)
		switch {
		case errors.Is(err, aggregate.ErrUnknownType):
			return nil, 0, 0, nil // a raw type: no state
		case errors.Is(err, aggregate.ErrConflict):
			return nil, 0, 0, fmt.Errorf("%w: %w", archive.ErrMoved, err)
		}
		return st, schema, outstanding, err
	}
	a := archive.New(js, plain, ArchiveStore(cfg, js, archive.CreateBucket), state, archive.Config{
		Rules: ArchiveRules(cfg), ReceiptsMaxAge: cfg.Streams.ReceiptsMaxAge.Std(), DropSnapshot: repo.DropSnapshot,
	}, logger)
	return a, keys.Wait, nil
}

// unknownArchiveTypes names each archive rule whose type this build
// neither defines in Go nor lists under aggregates.raw (a typo, most
// likely: the error suggests the nearest type it knows).
func unknownArchiveTypes(cfg config.Config, reg *aggregate.Registry) []error {
	known := reg.Types()
	for typ := range cfg.Aggregates.Raw {
		known = append(known, typ)
	}
	slices.Sort(known)
	var errs []error
	for _, typ := range slices.Sorted(maps.Keys(cfg.Archive.Types)) {
		if _, err := reg.Get(typ); err == nil {
			continue
		}
		if _, raw := cfg.Aggregates.Raw[typ]; raw {
			continue
		}
		errs = append(errs, fmt.Errorf("archive.types.%s: this build has no Definition of %s and aggregates.raw does not list it (types here: %s)%s; archive a Go-defined type from a program that registers it (node.OpenArchiver), and list a raw type under aggregates.raw (even as {})",
			typ, typ, strings.Join(known, ", "), config.DidYouMean(typ, known)))
	}
	return errs
}

// startArchiving runs the periodic archive passes (archive.every) when
// the configuration archives any type: one node of the fleet at a time,
// by the pass record in the workers' bucket (archive.Schedule).
func (n *Node) startArchiving(ctx context.Context, defs []*aggregate.Definition, logger *slog.Logger) error {
	every := n.cfg.Archive.Every.Std()
	if !n.cfg.Archive.Enabled() {
		return nil
	}
	if reg, err := aggregate.NewRegistry(defs...); err == nil {
		for _, err := range unknownArchiveTypes(n.cfg, reg) {
			n.logger.Warn("an archive rule names a type this node does not know: archive passes fail until it is fixed", "error", err)
		}
	}
	if every <= 0 {
		return nil
	}
	js := n.broker.JetStream()
	kv, err := js.KeyValue(ctx, streams.NamesFor(n.cfg.Namespace).Workers)
	if err != nil {
		return fmt.Errorf("archive.every: open the workers' bucket: %w", err)
	}
	cfg := n.cfg
	pass := func(ctx context.Context, progress func(archive.Progress)) (archive.Progress, error) {
		a, stop, err := OpenArchiver(ctx, cfg, js, defs, logger)
		if err != nil {
			return archive.Progress{}, err
		}
		defer stop()
		return a.Run(ctx, progress)
	}
	n.archiving = archive.NewSchedule(kv, pass, archive.ScheduleConfig{Every: every, NodeID: newNodeID()}, logger)
	actx, stop := context.WithCancel(context.WithoutCancel(ctx))
	n.archivingStop, n.archivingDone = stop, make(chan error, 1)
	go func() { n.archivingDone <- n.watch(actx, "archive", n.archiving.Run(actx)) }()
	return nil
}

// stopArchiving cancels a running pass (it stops between two aggregates,
// or in one, where the next pass resumes) and waits for it.
func (n *Node) stopArchiving(ctx context.Context) error {
	if n.archivingStop == nil {
		return nil
	}
	n.archivingStop()
	var err error
	waited := make(chan struct{})
	go func() { err = <-n.archivingDone; close(waited) }()
	if werr := n.await(ctx, "the archive pass to stop", waited); werr != nil {
		return werr
	}
	return err
}

// archiveReport is /readyz's "archive": the periodic passes, fleet-wide.
func (n *Node) archiveReport(ctx context.Context) any {
	if n.archiving == nil {
		return nil
	}
	st, err := n.archiving.Status(ctx)
	if err != nil {
		return map[string]any{"every": st.Every, "error": err.Error()}
	}
	return st
}
