package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/esjet/esjet/config"
	"github.com/esjet/esjet/internal/archive"
	"github.com/esjet/esjet/internal/node"
	"github.com/esjet/esjet/internal/ops"
	"github.com/esjet/esjet/internal/wire"
)

// outboxReport is `esjet outbox --json`.
type outboxReport struct {
	Namespace string          `json:"namespace"`
	Lag       ops.Lag         `json:"lag"`
	Kinds     []ops.KindStats `json:"kinds"`
}

func newOutboxCmd(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "outbox [command-id]",
		Short: "Print the relay's lag and what each kind of command is doing, or one command",
		Long: `Without an argument: the relay's lag (decisions in the log whose commands
are not yet in OUTBOX, and how old the oldest is), then per command kind:
pending (not yet taken by a worker), in flight (taken, not acknowledged),
done and failed (receipts), dead (in the DLQ) and scheduled (delayed, not
yet due). WORKERS says whether any worker serves the kind now: pull
requests waiting, busy (a delivery or ack in the last minute), or NONE
PULLING; a kind with pending commands that nobody pulls gets a WARNING
(its commands wait, without error, until a node serves it).

With a command id (<type>:<id>:<version>:<index>): the decision that issued
it, its copies in OUTBOX (or its pending schedule), its receipt and its
dead letters.`,
		Example: `  esjet outbox
  esjet outbox trip:t1:2:0
  esjet outbox --json`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, js, closeConn, err := g.outboxConnect(cmd)
			if err != nil {
				return err
			}
			defer closeConn()
			ctx := cmd.Context()
			in := ops.Inspect(js, cfg.Namespace).WithArchive(node.ArchiveStore(cfg, js, archive.ReadBucket))
			if len(args) == 1 {
				info, err := in.Command(ctx, args[0])
				if err != nil {
					return err
				}
				if asJSON {
					return writeIndentedJSON(g.stdout, info)
				}
				printCommand(g.stdout, info)
				return nil
			}
			lag, err := in.Lag(ctx)
			if err != nil {
				return err
			}
			kinds, err := in.Kinds(ctx)
			if err != nil {
				return err
			}
			if asJSON {
				return writeIndentedJSON(g.stdout, outboxReport{Namespace: cfg.Namespace, Lag: lag, Kinds: kinds})
			}
			printOutbox(g.stdout, cfg.Namespace, lag, kinds, time.Now())
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON instead of tables")
	return cmd
}

// outboxConnect loads the configuration and connects to the node's NATS the
// way the other inspection commands do, and refuses a namespace the server
// holds none of (a typo). The caller calls closeConn.
func (g *globals) outboxConnect(cmd *cobra.Command) (config.Config, jetstream.JetStream, func(), error) {
	cfg, err := g.load(cmd.Flags())
	if err != nil {
		return cfg, nil, nil, err
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), 30*time.Second)
	defer cancel()
	nc, err := g.connect(ctx, cfg, "esjet "+cmd.Name())
	if err != nil {
		return cfg, nil, nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return cfg, nil, nil, err
	}
	if err := ops.RequireNamespace(ctx, js, cfg.Namespace); err != nil {
		nc.Close()
		return cfg, nil, nil, err
	}
	return cfg, js, nc.Close, nil
}

func writeIndentedJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func printOutbox(w io.Writer, ns string, lag ops.Lag, kinds []ops.KindStats, now time.Time) {
	fmt.Fprintf(w, "namespace %s\n\n", ns)
	switch {
	case !lag.RelayConsumer && lag.Unrelayed > 0:
		fmt.Fprintf(w, "relay: never ran; %d decision(s) not relayed, oldest seq %d from %s ago (is a node running?)\n",
			lag.Unrelayed, lag.OldestSeq, roundAge(lag.OldestAge))
	case !lag.RelayConsumer:
		fmt.Fprintln(w, "relay: never ran; the log is empty")
	case lag.Unrelayed == 0:
		fmt.Fprintf(w, "relay: up to date (every decision up to seq %d relayed)\n", lag.AckFloor)
	default:
		fmt.Fprintf(w, "relay: %d decision(s) not yet relayed (%d pending, %d unacknowledged); oldest seq %d, %s old\n",
			lag.Unrelayed, lag.Pending, lag.AckPending, lag.OldestSeq, roundAge(lag.OldestAge))
	}
	if len(kinds) == 0 {
		fmt.Fprintln(w, "\nno commands in OUTBOX yet")
		return
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KIND\tPENDING\tIN FLIGHT\tDONE\tFAILED\tDEAD\tSCHEDULED\tMESSAGES\tWORKERS")
	var stalled []ops.KindStats
	for _, k := range kinds {
		if k.Stalled {
			stalled = append(stalled, k)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\n", k.Kind, k.Pending, k.InFlight, k.Done, k.Failed, k.Dead, k.Scheduled, k.Messages,
			workersColumn(k, now))
	}
	_ = tw.Flush()
	for _, k := range kinds {
		if k.OutcomesRefused > 0 {
			fmt.Fprintf(w, "\nWARNING: %d %s command(s) ran but their aggregate refused the outcome and still awaits them; `esjet reconcile` lists them with the reason.\n",
				k.OutcomesRefused, k.Kind)
		}
	}
	for _, k := range stalled {
		fmt.Fprintf(w, "\nWARNING: %d %s command(s) pending and no worker is pulling them: they wait, without error, until a node serves %s.\n"+
			"  Give the kind a handler or a route (workers: in the config) on a running node.\n", k.Pending, k.Kind, k.Kind)
	}
}

// workersColumn says whether anyone serves kind k: how many pull requests
// its workers have waiting, or that they are all busy, or that nobody
// pulls (since when).
func workersColumn(k ops.KindStats, now time.Time) string {
	since := "never pulled"
	if !k.LastActive.IsZero() {
		since = fmt.Sprintf("last active %s ago", roundAge(max(now.Sub(k.LastActive), 0)))
	}
	switch {
	case k.Consumer == "" && k.Stalled:
		return "NONE (no worker ever ran)"
	case k.Consumer == "":
		return "-"
	case k.Waiting > 0:
		return fmt.Sprintf("%d waiting", k.Waiting)
	case k.Pulling:
		return "busy, " + since
	case k.Stalled:
		return "NONE PULLING, " + since
	default:
		return "none pulling, " + since
	}
}

func printCommand(w io.Writer, c ops.CommandInfo) {
	kind := c.Kind
	if kind == "" {
		kind = "kind unknown"
	}
	fmt.Fprintf(w, "command %s (%s)\n\n", c.ID, kind)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	if c.Cause != nil {
		cs := c.Cause
		fmt.Fprintf(tw, "cause\tdecision %s: %s/%s version %d, seq %d, %s\n", cs.DecisionID, cs.AggregateType, cs.AggregateID, cs.Version, cs.Seq, cs.Time.Format(time.RFC3339Nano))
		fmt.Fprintf(tw, "events\t%s\n", strings.Join(cs.EventTypes, ", "))
		if !cs.DeliverAfter.IsZero() {
			fmt.Fprintf(tw, "deliver after\t%s\n", cs.DeliverAfter.Format(time.RFC3339))
		}
		fmt.Fprintf(tw, "relayed\t%v\n", c.Relayed)
	} else {
		fmt.Fprintln(tw, "cause\tnot in the log (published to OUTBOX by another producer?)")
	}
	relayCopies := 0
	for _, cp := range c.Outbox {
		if !wire.IsRedrive(c.ID, cp.MsgID) {
			relayCopies++
		}
	}
	switch {
	case len(c.Outbox) == 0 && c.Schedule == nil:
		fmt.Fprintln(tw, "outbox\tnot in OUTBOX")
	case relayCopies > 1:
		fmt.Fprintf(tw, "outbox\t%d copies from the relay (a duplicate: receipts fold it)\n", relayCopies)
	}
	for _, cp := range c.Outbox {
		note := ""
		if wire.IsRedrive(c.ID, cp.MsgID) {
			note = " (re-driven from the DLQ)"
		}
		fmt.Fprintf(tw, "outbox\tseq %d, %s, msg id %s%s\n", cp.Seq, cp.Time.Format(time.RFC3339Nano), cp.MsgID, note)
	}
	if c.Schedule != nil {
		fmt.Fprintf(tw, "schedule\tpending: seq %d on %s, stored %s\n", c.Schedule.Seq, c.Schedule.Subject, c.Schedule.Time.Format(time.RFC3339Nano))
	}
	if r := c.Receipt; r != nil {
		line := fmt.Sprintf("%s after %d attempt(s), %s", r.Outcome, r.Attempts, r.At.Format(time.RFC3339Nano))
		if r.LastError != "" {
			line += ": " + r.LastError
		}
		fmt.Fprintf(tw, "receipt\t%s\n", line)
		if r.OutcomeRefused != "" {
			fmt.Fprintf(tw, "reported\toutcome refused: %s (the aggregate still awaits the command)\n", r.OutcomeRefused)
		}
	} else {
		fmt.Fprintln(tw, "receipt\tnone")
	}
	for _, d := range c.Dead {
		fmt.Fprintf(tw, "dead\tseq %d, %s: %s (%d attempt(s), worker %s)\n", d.Seq, d.Time.Format(time.RFC3339Nano), d.Error, d.Attempts, d.Worker)
	}
	for _, o := range c.Reported {
		fmt.Fprintf(tw, "reported\t%s to the aggregate: decision %s, log seq %d, %s\n", o.Outcome, o.DecisionID, o.Seq, o.Time.Format(time.RFC3339Nano))
	}
	_ = tw.Flush()
	if c.LateEffect {
		fmt.Fprintf(w, "\nWARNING: late effect: the command completed after its aggregate was told it failed; the aggregate will not take the effect into account. Undo it, or settle it with the aggregate by hand.\n")
	}
}

func roundAge(d time.Duration) time.Duration {
	switch {
	case d >= time.Minute:
		return d.Round(time.Second)
	case d >= time.Second:
		return d.Round(100 * time.Millisecond)
	default:
		return d.Round(time.Millisecond)
	}
}
