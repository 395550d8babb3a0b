package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"

	"github.com/esjet/esjet/internal/api"
	"github.com/esjet/esjet/internal/projection"
)

func newProjectionsCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "projections",
		Aliases: []string{"views"},
		Short:   "Operate read models: status, pause, rebuild, parked events",
		Long: `A projection follows the event log in global order and keeps a view
(KV bucket <ns>_view_<name>) that GET /v1/views/<name>/<key> reads. The
nodes that run it share its partitions, one owner each, by a lease.

Health: green when every partition has a live owner; yellow when paused or
holding parked events; red when a partition has no owner, its owner stopped
heartbeating (frozen) or it is stopped at a failing event.

Reads ask the node on esjet.<ns>.views; actions on
esjet.<ns>.ops.<user>.projections.<action>, where the node records the user.`,
		Example: `  esjet projections ls
  esjet projections status traveler_spend
  esjet projections rebuild trips_by_status      # v+1 built beside v, switched in when caught up
  esjet projections switch trips_by_status 1      # back to the previous generation
  esjet projections parked traveler_spend
  esjet projections retry traveler_spend 420003
  esjet projections skip traveler_spend 420003 --reason "bad import, fixed by hand"`,
		Args: cobra.NoArgs,
	}
	var asJSON bool
	ls := &cobra.Command{
		Use: "ls", Aliases: []string{"list"}, Short: "Every projection: health, position, lag, rate, parked", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			sts, err := g.projectionStatuses(cmd)
			if err != nil {
				return err
			}
			if asJSON {
				return json.NewEncoder(g.stdout).Encode(sts)
			}
			printProjections(g.stdout, sts)
			return nil
		},
	}
	ls.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	status := &cobra.Command{
		Use: "status <name>", Short: "One projection: partitions, owners, heartbeats, rebuild progress", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			sts, err := g.projectionStatuses(cmd)
			if err != nil {
				return err
			}
			for _, st := range sts {
				if st.Name == args[0] {
					if asJSON {
						return json.NewEncoder(g.stdout).Encode(st)
					}
					printProjection(g.stdout, st)
					return nil
				}
			}
			return fmt.Errorf("404 unknown_view: no projection %q has run (esjet projections ls lists them)", args[0])
		},
	}
	status.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	parked := &cobra.Command{
		Use: "parked <name>", Short: "The parked events of a projection, oldest first", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.dial(cmd)
			if err != nil {
				return err
			}
			defer c.close()
			data, err := c.call(cmd.Context(), "views", "views."+args[0]+".parked", nil, nil)
			if err != nil {
				return err
			}
			var ps []projection.Parked
			if err := json.Unmarshal(data, &ps); err != nil {
				return err
			}
			printParked(g.stdout, ps)
			return nil
		},
	}
	cmd.AddCommand(ls, status, parked)
	for _, a := range []struct{ use, short string }{
		{"pause <name>", "Stop reading the log (owners keep their leases and heartbeat)"},
		{"resume <name>", "Go on after a pause"},
		{"rebuild <name>", "Build a new generation from the start beside the serving one; switch when caught up"},
		{"reset <name>", "Empty the serving generation in place and start over (queries see it refill)"},
		{"switch <name> <generation>", "Serve another generation (the previous one, after a rebuild, until streams.unserved_views_max_age)"},
		{"retry <name> [position]", "Apply a parked event (and its aggregate's later ones), or resume a stopped projection"},
		{"skip <name> <position>", "Pass over a parked or stopped-at event, leaving a record (--reason)"},
	} {
		cmd.AddCommand(g.projectionAction(a.use, a.short))
	}
	return cmd
}

func (g *globals) projectionStatuses(cmd *cobra.Command) ([]projection.Status, error) {
	c, err := g.dial(cmd)
	if err != nil {
		return nil, err
	}
	defer c.close()
	data, err := c.call(cmd.Context(), "views", "views", nil, nil)
	if err != nil {
		return nil, err
	}
	var sts []projection.Status
	return sts, json.Unmarshal(data, &sts)
}

// projectionAction is one of the operators' actions, asked of the node.
func (g *globals) projectionAction(use, short string) *cobra.Command {
	action := strings.Fields(use)[0]
	var reason string
	cmd := &cobra.Command{
		Use: use, Short: short, Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			body := api.ViewAction{Name: args[0], Reason: reason}
			if len(args) == 2 {
				n, err := strconv.ParseUint(args[1], 10, 64)
				if err != nil {
					return fmt.Errorf("%s %s: %q is not a number", action, args[0], args[1])
				}
				if action == "switch" {
					body.Generation = int(n)
				} else {
					body.Position = n
				}
			}
			c, err := g.dial(cmd)
			if err != nil {
				return err
			}
			defer c.close()
			user, err := dlqActor(cmd.Context(), c.nc)
			if err != nil {
				return err
			}
			b, _ := json.Marshal(body)
			data, err := c.call(cmd.Context(), "ops", "ops."+user+".projections."+action, b, nats.Header{})
			if err != nil {
				return err
			}
			var rep api.ViewActionReply
			if err := json.Unmarshal(data, &rep); err != nil {
				return err
			}
			switch {
			case rep.Request != nil:
				fmt.Fprintf(g.stdout, "%s of %s at position %d asked by %s; the partition's owner does it at its next heartbeat\n", action, args[0], body.Position, rep.By)
			case action == "rebuild":
				fmt.Fprintf(g.stdout, "rebuilding %s as generation %d beside the serving one; esjet projections status %s shows its progress\n", args[0], rep.Generation, args[0])
			default:
				fmt.Fprintf(g.stdout, "%s: %s done by %s\n", args[0], action, rep.By)
			}
			return nil
		},
	}
	if action == "skip" {
		cmd.Flags().StringVar(&reason, "reason", "", "why the event is skipped (kept in the skip record; required)")
	}
	return cmd
}

func printProjections(w io.Writer, sts []projection.Status) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tHEALTH\tPOSITION\tLAG\tLAG (S)\tRATE (EV/S)\tPARKED\tGENERATION\tREASON")
	for _, st := range sts {
		gen := strconv.Itoa(st.Active)
		if st.Build != nil {
			gen += fmt.Sprintf(" (building %d: %.0f%%)", st.Build.Generation, st.Build.Progress*100)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%.1f\t%.0f\t%d\t%s\t%s\n", st.Name, st.Health, st.Position, st.Lag, st.LagSeconds, st.Rate, st.Parked, gen, st.Reason)
	}
	_ = tw.Flush()
}

func printProjection(w io.Writer, st projection.Status) {
	fmt.Fprintf(w, "projection %s: %s", st.Name, st.Health)
	if st.Reason != "" {
		fmt.Fprintf(w, " (%s)", st.Reason)
	}
	fmt.Fprintf(w, "\nposition %d, log end seq %d, lag %d message(s), %.1fs; %.0f events/s; %d parked; generation %d",
		st.Position, st.LogEnd, st.Lag, st.LagSeconds, st.Rate, st.Parked, st.Active)
	if st.Previous > 0 {
		fmt.Fprintf(w, " (previous %d)", st.Previous)
	}
	fmt.Fprintln(w)
	if b := st.Build; b != nil {
		fmt.Fprintf(w, "building generation %d: %.1f%% (position %d), ETA %s\n", b.Generation, b.Progress*100, b.Position, b.ETA)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "GEN\tPART\tSTATE\tOWNER\tHEARTBEAT\tPOSITION\tRATE\tPARKED\tERROR")
	for _, p := range st.Parts {
		hb := "-"
		if !p.Heartbeat.IsZero() {
			hb = time.Since(p.Heartbeat).Round(100*time.Millisecond).String() + " ago"
		}
		fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%s\t%d\t%.0f\t%d\t%s\n", p.Generation, p.Partition, p.State, p.Owner, hb, p.Position, p.Rate, p.Parked, p.Error)
	}
	_ = tw.Flush()
}

func printParked(w io.Writer, ps []projection.Parked) {
	if len(ps) == 0 {
		fmt.Fprintln(w, "no parked events")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "POSITION\tAGGREGATE\tEVENT\tPARTITION\tATTEMPTS\tERROR")
	for _, p := range ps {
		e := p.Error
		if p.Behind {
			e = "(behind an earlier parked event of its aggregate)"
		}
		fmt.Fprintf(tw, "%d\t%s/%s\t%s\t%d\t%d\t%s\n", p.Event.Position, p.Event.AggregateType, p.Event.AggregateID, p.Event.Type, p.Partition, p.Attempts, e)
	}
	_ = tw.Flush()
}
