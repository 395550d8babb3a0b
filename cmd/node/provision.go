package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/esjet/esjet/config"
	"github.com/esjet/esjet/demo/trip"
	"github.com/esjet/esjet/internal/node"
	"github.com/esjet/esjet/internal/projection"
	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/wire"
)

func newProvisionCmd(g *globals) *cobra.Command {
	var dryRun bool
	var views []string
	cmd := &cobra.Command{
		Use:   "provision",
		Short: "Create or update the namespace's streams and buckets to the configuration (as admin)",
		Long: `Connect as the configuration says and bring every stream and KV bucket of
the namespace to the configuration: create what is missing, update a setting
JetStream can change in place, and print what it did to each (created,
updated with the fields, unchanged). A node does not do this itself: at start
it creates only what is missing and checks the rest, refusing to run on a
stream whose settings would lose history or lack what it needs, and warning
of harmless differences; esjet provision is the fix its message names. (An
embedded node without users is its own server's admin and applies its
configuration at start as this command would; it needs no provision step,
and this command reaches its server only while it runs.)

It needs a user that may update streams (the admin role of esjet
permissions; the node role may not). A setting JetStream cannot change in
place (storage, retention, deny delete/purge turned off, a mirror, sources
on a stream of esjet's) is refused and that stream left as it is.

The read models' buckets (the demo's views and each --view) are brought to
the configuration where they exist; the node creates them when a view runs.

  esjet provision --dry-run   print the plan, change nothing`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := g.load(cmd.Flags())
			if err != nil {
				return err
			}
			mode := streams.ApplyChanges
			if dryRun {
				mode = streams.PlanOnly
			}
			return g.provision(cmd.Context(), cfg, views, mode)
		},
	}
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print what would change and change nothing")
	cmd.Flags().StringSliceVar(&views, "view", nil, "a read model your node runs besides the demo's (its projection's name; repeat, or comma-separate)")
	return cmd
}

// provision connects and applies (or plans) the namespace's objects.
func (g *globals) provision(ctx context.Context, cfg config.Config, views []string, mode streams.ApplyMode) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	// The server answers a request the user may not make with an
	// asynchronous error, not a reply: end every request with it at once
	// rather than wait for each one's timeout.
	ctx, deny := context.WithCancelCause(ctx)
	defer deny(nil)
	onDenied := nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		if errors.Is(err, nats.ErrPermissionViolation) {
			deny(err)
		}
	})
	nc, js, err := g.connectJetStream(ctx, cfg, "esjet provision", onDenied)
	if err != nil {
		return err
	}
	defer nc.Close()
	cfg = node.ResolveReplicas(cfg, nc, nil)
	objs := node.Objects(cfg)
	models, absent, err := readModelObjects(ctx, js, cfg, views)
	if err != nil {
		return err
	}
	var staged []streams.Change
	if mode == streams.ApplyChanges {
		// a hub's staging streams first: the hub's streams source them
		if staged, err = node.ProvisionStaging(ctx, js, cfg); err != nil {
			return provisionError(err)
		}
	}
	changes, err := streams.Apply(ctx, js, append(objs, models...), mode, nil)
	changes = append(staged, changes...)
	printProvision(g.stdout, changes, absent, mode)
	if cause := context.Cause(ctx); errors.Is(cause, nats.ErrPermissionViolation) {
		err = cause
	}
	if err != nil {
		return provisionError(err)
	}
	return nil
}

// readModelObjects are the buckets of the read models the node runs (the
// demo's views and views) that exist; absent lists the ones that do not
// (the node creates a view's buckets when it runs it).
func readModelObjects(ctx context.Context, js jetstream.JetStream, cfg config.Config, views []string) (objs []streams.Object, absent []string, err error) {
	var names []string
	for _, d := range trip.Views() {
		if d.Sink == nil {
			names = append(names, d.Name)
		}
	}
	for _, v := range views {
		if err := projection.ValidateName(v); err != nil {
			return nil, nil, fmt.Errorf("--view: %w", err)
		}
		if !slices.Contains(names, v) {
			names = append(names, v)
		}
	}
	type bucket struct {
		name   string
		atomic bool
	}
	buckets := []bucket{{wire.ProjectionsBucket(cfg.Namespace), false}}
	for _, v := range names {
		for _, b := range wire.ViewBuckets(cfg.Namespace, v) {
			buckets = append(buckets, bucket{b, true})
		}
	}
	for _, b := range buckets {
		sc := projection.BucketStreamConfig(b.name, cfg.Streams.Replicas, b.atomic)
		_, err := js.Stream(ctx, sc.Name)
		switch {
		case errors.Is(err, jetstream.ErrStreamNotFound):
			absent = append(absent, b.name)
		case errors.Is(context.Cause(ctx), nats.ErrPermissionViolation):
			return nil, nil, provisionError(context.Cause(ctx))
		case err != nil:
			return nil, nil, fmt.Errorf("look up stream %s: %w", sc.Name, err)
		default:
			objs = append(objs, streams.Object{Name: b.name, Config: sc})
		}
	}
	return objs, absent, nil
}

// printProvision prints one line per object: what was (or would be) done.
func printProvision(w io.Writer, changes []streams.Change, absent []string, mode streams.ApplyMode) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, c := range changes {
		fmt.Fprintf(tw, "%s\t%s", c.Name, action(c.Action, mode))
		for i, f := range c.Fields {
			if i == 0 {
				fmt.Fprintf(tw, "\t%s\n", f)
			} else {
				fmt.Fprintf(tw, "\t\t%s\n", f)
			}
		}
		if len(c.Fields) == 0 {
			fmt.Fprintln(tw, "\t")
		}
	}
	for _, b := range absent {
		fmt.Fprintf(tw, "%s\tnot there yet\t(the node creates it when the view runs)\n", b)
	}
	_ = tw.Flush()
	if mode == streams.PlanOnly {
		fmt.Fprintln(w, "dry run: nothing was changed")
	}
}

func action(a string, mode streams.ApplyMode) string {
	if mode == streams.PlanOnly && a != "unchanged" {
		return "would " + a
	}
	return a
}

// provisionError says, when the server refused a request for lack of
// permissions, that provisioning is an admin's job.
func provisionError(err error) error {
	if errors.Is(err, nats.ErrPermissionViolation) {
		return fmt.Errorf("esjet provision needs the admin role (a user that may create and update streams; see esjet permissions): %w", err)
	}
	return err
}
