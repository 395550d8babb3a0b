package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/esjet/esjet/config"
	"github.com/esjet/esjet/internal/ops"
	"github.com/esjet/esjet/internal/projection"
	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/wire"
)

// streamReport is one stream (or KV bucket) of the namespace.
type streamReport struct {
	Name      string           `json:"name"`
	Role      string           `json:"role"`
	Exists    bool             `json:"exists"`
	Messages  uint64           `json:"messages"`
	Bytes     uint64           `json:"bytes"`
	FirstSeq  uint64           `json:"first_seq"`
	LastSeq   uint64           `json:"last_seq"`
	Replicas  int              `json:"replicas"`
	Consumers []consumerReport `json:"consumers"`
	// Retention is how long it keeps what it holds, and why.
	Retention streams.Retention `json:"retention,omitzero"`
}

// consumerReport is one consumer's lag: messages not yet delivered
// (pending) and delivered but not acknowledged (ack_pending).
type consumerReport struct {
	Name        string `json:"name"`
	Pending     uint64 `json:"pending"`
	AckPending  int    `json:"ack_pending"`
	Redelivered int    `json:"redelivered"`
	Waiting     int    `json:"waiting"`
}

func newStreamsCmd(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "streams",
		Short: "Print the namespace's streams, how long each keeps what, message counts and consumer lag",
		Long: `Connect to the node the configuration describes (the embedded node's
listener, or the external cluster) and print the namespace's streams and KV
buckets: how long each keeps what it holds (KEPT; with why in --json), messages,
bytes, sequences, and for each consumer how many messages it has not yet
received (pending) or not yet acknowledged (ack pending).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := g.load(cmd.Flags())
			if err != nil {
				return err
			}
			return g.showStreams(cmd.Context(), cfg, asJSON)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON instead of a table")
	return cmd
}

// showStreams connects and prints the namespace's streams, as a table or JSON.
func (g *globals) showStreams(ctx context.Context, cfg config.Config, asJSON bool) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	nc, js, err := g.connectJetStream(ctx, cfg, "esjet streams")
	if err != nil {
		return err
	}
	defer nc.Close()
	if err := ops.RequireNamespace(ctx, js, cfg.Namespace); err != nil {
		return err
	}
	// What the views' control records say of their buckets (which
	// generation each holds, until when); none where no projection ran,
	// or for a user who may not watch them (the operator role: a watch is
	// a consumer) — the buckets' own configuration says the rest.
	var views map[string]streams.Retention
	if streams.ConsumersAllowed(ctx, js, wire.KVStream(wire.ProjectionsBucket(cfg.Namespace))) {
		if views, err = projection.NewViews(js, cfg.Namespace, 0).Retention(ctx, cfg.Streams.UnservedViewsMaxAge.Std()); err != nil {
			views = nil
		}
	}
	reports, err := collectStreams(ctx, js, streams.NamesFor(cfg.Namespace), views)
	if err != nil {
		return err
	}
	if asJSON {
		enc := json.NewEncoder(g.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(reports)
	}
	printStreams(g.stdout, cfg.Namespace, reports)
	return nil
}

func collectStreams(ctx context.Context, js jetstream.JetStream, names streams.Names, views map[string]streams.Retention) ([]streamReport, error) {
	targets := []struct{ name, role string }{
		{names.Events, "event log"},
		{names.Outbox, "outbox"},
		{names.DLQ, "dead letters"},
		{wire.KVStream(names.Snapshots), "snapshots (KV)"},
		{wire.KVStream(names.Receipts), "receipts (KV)"},
		{wire.KVStream(names.Workers), "workers' control (KV)"},
	}
	// Read models, reconcile's checkpoint, the data keys and the archive
	// exist once something made them: listed when they do.
	extra, err := namespaceExtras(ctx, js, names.Namespace)
	if err != nil {
		return nil, err
	}
	targets = append(targets, extra...)
	var out []streamReport
	for _, t := range targets {
		r := streamReport{Name: t.name, Role: t.role, Consumers: []consumerReport{}}
		st, err := js.Stream(ctx, t.name)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			out = append(out, r)
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("stream %s: %w", t.name, err)
		}
		info := st.CachedInfo()
		r.Exists = true
		r.Messages, r.Bytes = info.State.Msgs, info.State.Bytes
		r.FirstSeq, r.LastSeq = info.State.FirstSeq, info.State.LastSeq
		r.Replicas = info.Config.Replicas
		r.Retention = streams.RetentionOf(names.Namespace, info.Config)
		if v, ok := views[t.name]; ok {
			r.Retention = v
		}
		lister := st.ListConsumers(ctx)
		for ci := range lister.Info() {
			r.Consumers = append(r.Consumers, consumerReport{
				Name: ci.Name, Pending: ci.NumPending, AckPending: ci.NumAckPending,
				Redelivered: ci.NumRedelivered, Waiting: ci.NumWaiting,
			})
		}
		if err := lister.Err(); err != nil {
			return nil, fmt.Errorf("consumers of %s: %w", t.name, err)
		}
		out = append(out, r)
	}
	return out, nil
}

func printStreams(w io.Writer, ns string, reports []streamReport) {
	fmt.Fprintf(w, "namespace %s\n\n", ns)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "STREAM\tROLE\tKEPT\tMESSAGES\tBYTES\tFIRST\tLAST\tR\tCONSUMERS")
	for _, r := range reports {
		if !r.Exists {
			fmt.Fprintf(tw, "%s\t%s\t\t(missing: start the node once to provision it)\t\t\t\t\t\n", r.Name, r.Role)
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%d\t%d\t%d\t%d\n", r.Name, r.Role, r.Retention.Kept, r.Messages, humanBytes(r.Bytes), r.FirstSeq, r.LastSeq, r.Replicas, len(r.Consumers))
	}
	_ = tw.Flush()
	var any bool
	for _, r := range reports {
		for _, c := range r.Consumers {
			if !any {
				fmt.Fprintln(w)
				tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
				fmt.Fprintln(tw, "STREAM\tCONSUMER\tPENDING\tACK PENDING\tREDELIVERED\tWAITING PULLS")
				any = true
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\n", r.Name, c.Name, c.Pending, c.AckPending, c.Redelivered, c.Waiting)
		}
	}
	if any {
		_ = tw.Flush()
	} else {
		fmt.Fprintln(w, "\nno consumers yet")
	}
}

func humanBytes(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%dB", n)
	}
	div, exp := uint64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f%ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// namespaceExtras are the namespace's streams made on demand: the read
// models' buckets (KV_<ns>_view_*), their control bucket, reconcile's
// checkpoint, the data keys and the archive, in name order.
func namespaceExtras(ctx context.Context, js jetstream.JetStream, ns string) ([]struct{ name, role string }, error) {
	var out []struct{ name, role string }
	lister := js.StreamNames(ctx)
	for name := range lister.Name() {
		switch {
		case strings.HasPrefix(name, wire.KVStream(wire.ViewBucketPrefix(ns))):
			out = append(out, struct{ name, role string }{name, "read model (KV)"})
		case name == wire.KVStream(wire.ProjectionsBucket(ns)):
			out = append(out, struct{ name, role string }{name, "projection leases (KV)"})
		case name == wire.ObjStream(wire.ReconcileBucket(ns)):
			out = append(out, struct{ name, role string }{name, "reconcile checkpoint"})
		case name == wire.KVStream(wire.KeysBucket(ns)):
			out = append(out, struct{ name, role string }{name, "data keys (KV)"})
		case name == wire.ObjStream(wire.ArchiveBucket(ns)):
			out = append(out, struct{ name, role string }{name, "archive"})
		}
	}
	if err := lister.Err(); err != nil {
		return nil, fmt.Errorf("stream names: %w", err)
	}
	slices.SortFunc(out, func(a, b struct{ name, role string }) int { return strings.Compare(a.name, b.name) })
	return out, nil
}
