package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"

	"github.com/esjet/esjet/internal/consumer"
	"github.com/esjet/esjet/internal/node"
)

func newWorkersCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "workers",
		Short: "Operate the command workers: backlog, pause, resume (every node at once)",
		Long: `Each command kind has one durable consumer on OUTBOX shared by every node's
workers. A pause stops every node's workers of the kind from pulling: calls in
flight finish, the commands waiting stay in OUTBOX undelivered (no attempt is
counted, no lease taken), and a resume takes up where they stopped. The record
(in KV <ns>_workers) names who paused or resumed the kind, when and why.

ls shows, per kind: paused or not, the backlog (commands no worker has taken),
those in flight (running, waiting for their rate limit's token or for a retry),
the age of the oldest command not done, and the answering node's rate limit.

The CLI asks a node on esjet.<ns>.ops.<user>.workers.<ls|pause|resume>, where
the node records the user (an operator's permissions allow only its own).`,
		Example: `  esjet workers ls
  esjet workers pause charge_card --reason "provider incident INC-42"
  esjet workers resume charge_card`,
		Args: cobra.NoArgs,
	}
	var asJSON bool
	ls := &cobra.Command{
		Use: "ls", Aliases: []string{"list"}, Short: "Every kind: paused, backlog, in flight, oldest command, rate limit", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			data, err := g.workersCall(cmd, "ls", nil)
			if err != nil {
				return err
			}
			var sts []consumer.KindStatus
			if err := json.Unmarshal(data, &sts); err != nil {
				return err
			}
			if asJSON {
				return json.NewEncoder(g.stdout).Encode(sts)
			}
			printWorkers(g.stdout, sts)
			return nil
		},
	}
	ls.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.AddCommand(ls, g.workersAction("pause", "Stop every node's workers of a kind from pulling (calls in flight finish)"),
		g.workersAction("resume", "Let a paused kind's workers pull again, where they stopped"))
	return cmd
}

// workersAction is esjet workers pause|resume <kind>.
func (g *globals) workersAction(action, short string) *cobra.Command {
	var reason string
	cmd := &cobra.Command{
		Use: action + " <kind>", Short: short, Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			body, _ := json.Marshal(node.WorkersAction{Kind: args[0], Reason: reason})
			data, err := g.workersCall(cmd, action, body)
			if err != nil {
				return err
			}
			var rep node.WorkersActionReply
			if err := json.Unmarshal(data, &rep); err != nil {
				return err
			}
			st := rep.Status
			verb := map[string]string{"pause": "paused", "resume": "resumed"}[action]
			fmt.Fprintf(g.stdout, "%s %s by %s: every node's workers %s; backlog %d, in flight %d, oldest command %s\n",
				verb, args[0], rep.Record.By, map[bool]string{true: "pull nothing until a resume", false: "pull again"}[rep.Record.Paused],
				st.Backlog, st.InFlight, ageText(st.OldestAge))
			return nil
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why (kept in the pause record, shown by ls)")
	return cmd
}

// workersCall asks a node for a workers action as this user.
func (g *globals) workersCall(cmd *cobra.Command, action string, body []byte) ([]byte, error) {
	return g.opsCall(cmd, "workers."+action, body)
}

// opsCall asks a node for the operator action on
// esjet.<ns>.ops.<user>.<route> as this user.
func (g *globals) opsCall(cmd *cobra.Command, route string, body []byte) ([]byte, error) {
	c, err := g.dial(cmd)
	if err != nil {
		return nil, err
	}
	defer c.close()
	user, err := dlqActor(cmd.Context(), c.nc)
	if err != nil {
		return nil, err
	}
	if body == nil {
		body = []byte("{}")
	}
	return c.call(cmd.Context(), "ops", "ops."+user+"."+route, body, nats.Header{})
}

func ageText(seconds float64) string {
	if seconds <= 0 {
		return "-"
	}
	return (time.Duration(seconds * float64(time.Second))).Round(time.Second).String() + " old"
}

func printWorkers(w io.Writer, sts []consumer.KindStatus) {
	if len(sts) == 0 {
		fmt.Fprintln(w, "no command kind has workers yet")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KIND\tSTATE\tBACKLOG\tIN FLIGHT\tOLDEST\tRATE\tBY\tREASON")
	for _, st := range sts {
		state := "running"
		if st.Paused {
			state = "paused"
		}
		rate := "-"
		if st.Rate > 0 {
			rate = strconv.FormatFloat(st.Rate, 'g', -1, 64) + "/s burst " + strconv.Itoa(st.Burst)
		}
		by := st.By
		if by == "" {
			by = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\t%s\t%s\n", st.Kind, state, st.Backlog, st.InFlight, ageText(st.OldestAge), rate, by, st.Reason)
	}
	_ = tw.Flush()
}
