package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/esjet/esjet/demo/trip"
	"github.com/esjet/esjet/internal/aggregate"
	"github.com/esjet/esjet/internal/archive"
	"github.com/esjet/esjet/internal/node"
	"github.com/esjet/esjet/internal/ops"
	"github.com/esjet/esjet/internal/wire"
)

const archiveLong = `Move closed aggregates out of the event log (docs/archiving.md).

The configuration's archive.types says, per aggregate type, which event
types close an aggregate and how long after its last decision it is
archived. esjet archive run looks at every aggregate of those types; one
that is closed, old enough, and whose commands are all relayed and settled
(receipts, no open dead letter, no outcome awaited) is copied into an
archive object (the object store <ns>_archive, or archive.dir), read back
and verified, then replaced in the log by a tombstone carrying its state,
and the messages before the tombstone are purged. A decision appended
meanwhile makes that aggregate's archive stop cleanly (it is left as it
was). Killed at any point, the next run finishes what was left.

It needs a user that may purge EVENTS (the admin role), and an EVENTS
created with archiving configured (JetStream cannot allow purges on an
existing stream).

esjet archive status prints the rules, the log's size and the archive's.`

func newArchiveCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "archive",
		Short: "Move closed aggregates out of the event log to the archive (as admin)",
		Long:  archiveLong,
		Args:  cobra.NoArgs,
	}
	var limit int
	var asJSON, noProgress bool
	run := &cobra.Command{
		Use:   "run",
		Short: "Archive every closed, settled aggregate of the configured types",
		Example: `  esjet archive run
  esjet archive run --limit 1000 --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return g.archiveRun(cmd, limit, asJSON, noProgress) },
	}
	run.Flags().IntVar(&limit, "limit", 0, "stop after archiving this many aggregates (0: all)")
	run.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON")
	run.Flags().BoolVar(&noProgress, "no-progress", false, "print no progress line")
	status := &cobra.Command{
		Use:   "status",
		Short: "The archive rules, the event log's size and the archive's",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, args []string) error { return g.archiveStatus(cmd) },
	}
	cmd.AddCommand(run, status)
	return cmd
}

func (g *globals) archiveConnect(cmd *cobra.Command) (context.Context, *nats.Conn, jetstream.JetStream, func(), error) {
	ctx, deny := context.WithCancelCause(cmd.Context())
	onDenied := nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		if errors.Is(err, nats.ErrPermissionViolation) {
			deny(err)
		}
	})
	cfg, err := g.load(cmd.Flags())
	if err != nil {
		deny(nil)
		return nil, nil, nil, nil, err
	}
	nc, js, err := g.connectJetStream(ctx, cfg, "esjet archive", onDenied)
	if err != nil {
		deny(nil)
		return nil, nil, nil, nil, err
	}
	return ctx, nc, js, func() { nc.Close(); deny(nil) }, nil
}

func (g *globals) archiveRun(cmd *cobra.Command, limit int, asJSON, noProgress bool) error {
	cfg, err := g.load(cmd.Flags())
	if err != nil {
		return err
	}
	if !cfg.Archive.Enabled() {
		return errors.New("nothing to archive: the configuration has no archive.types (docs/archiving.md)")
	}
	ctx, nc, js, done, err := g.archiveConnect(cmd)
	if err != nil {
		return err
	}
	defer done()
	cfg = node.ResolveReplicas(cfg, nc, nil)
	a, stop, err := node.OpenArchiver(ctx, cfg, js, []*aggregate.Definition{trip.Definition()}, nil)
	if err != nil {
		return err
	}
	defer stop()
	a.SetLimit(limit)
	start := time.Now()
	last := time.Time{}
	p, err := a.Run(ctx, func(p archive.Progress) {
		if noProgress || asJSON || time.Since(last) < time.Second {
			return
		}
		last = time.Now()
		fmt.Fprintf(g.stderr, "archive: %d/%d looked at, %d archived\n", p.Seen, p.Total, p.Archived)
	})
	if cause := context.Cause(ctx); errors.Is(cause, nats.ErrPermissionViolation) {
		err = fmt.Errorf("%w (esjet archive purges EVENTS: run it as a user of the admin role)", cause)
	}
	if asJSON {
		b, _ := json.MarshalIndent(p, "", "  ")
		fmt.Fprintln(g.stdout, string(b))
	} else {
		fmt.Fprintf(g.stdout, "archived %d aggregate(s) (%d decisions, %d bytes) in %s; %d looked at of %d\n",
			p.Archived, p.Decisions, p.Bytes, time.Since(start).Round(time.Millisecond), p.Seen, p.Total)
		fmt.Fprintf(g.stdout, "left: %d open or too recent, %d not settled, %d moved while archiving; %d archived before (%d of them purged now)\n",
			p.Open, p.Unsettled, p.Aborted, p.Already+p.Finished, p.Finished)
	}
	return err
}

func (g *globals) archiveStatus(cmd *cobra.Command) error {
	cfg, err := g.load(cmd.Flags())
	if err != nil {
		return err
	}
	ctx, _, js, done, err := g.archiveConnect(cmd)
	if err != nil {
		return err
	}
	defer done()
	if err := ops.RequireNamespace(ctx, js, cfg.Namespace); err != nil {
		return err
	}
	names := wire.NamesFor(cfg.Namespace)
	st, err := js.Stream(ctx, names.Events)
	if err != nil {
		return err
	}
	info := st.CachedInfo()
	tw := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "event log\t%s\t%s\t%d bytes\tpurges %s\n", names.Events, messages(info.State.Msgs), info.State.Bytes,
		map[bool]string{true: "denied (archiving cannot run)", false: "allowed (admin only)"}[info.Config.DenyPurge])
	if cfg.Archive.Dir != "" {
		fmt.Fprintf(tw, "archive\tdir:%s\t\t\t\n", cfg.Archive.Dir)
	} else if os, err := js.ObjectStore(ctx, wire.ArchiveBucket(cfg.Namespace)); err == nil {
		s, err := os.Status(ctx)
		if err != nil {
			return err
		}
		n := 0
		if objs, err := os.List(ctx); err == nil {
			n = len(objs)
		}
		fmt.Fprintf(tw, "archive\tobject:%s\t%d objects\t%d bytes\t\n", s.Bucket(), n, s.Size())
	} else {
		fmt.Fprintf(tw, "archive\tobject:%s\tnot created yet\t\t\n", wire.ArchiveBucket(cfg.Namespace))
	}
	for typ, r := range cfg.Archive.Types {
		on := r.OnCommand
		if on == "" {
			on = "restore"
		}
		fmt.Fprintf(tw, "rule\t%s\tclosed by %v\tafter %s\ton command: %s\n", typ, r.ClosedBy, r.AfterOf(), on)
	}
	every := "never (archive.every: 0)"
	if e := cfg.Archive.Every.Std(); e > 0 {
		every = "every " + e.String()
	}
	if kv, err := js.KeyValue(ctx, names.Workers); err == nil {
		switch rec, rev, err := archive.ReadPass(ctx, kv); {
		case err != nil:
			return err
		case rev == 0:
			fmt.Fprintf(tw, "passes	%s	none yet		\n", every)
		case rec.Owner != "":
			fmt.Fprintf(tw, "passes	%s	running on %s since %s	heartbeat %s\n", every, rec.Owner, rec.Started.Format(time.RFC3339), rec.Heartbeat.Format(time.RFC3339))
		case rec.Last != nil:
			fmt.Fprintf(tw, "passes	%s	last by %s, ended %s	archived %d, %d looked at\n", every, rec.By, rec.Ended.Format(time.RFC3339), rec.Last.Archived, rec.Last.Seen)
		}
	}
	return tw.Flush()
}
