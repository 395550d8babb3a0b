package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/esjet/esjet/internal/ops"
	"github.com/esjet/esjet/internal/wire"
)

// errorColumn is how much of a dead letter's error `dlq ls` shows.
const errorColumn = 60

func newDLQCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "dlq",
		Short: "List, show, retry or discard dead letters (commands the workers gave up on)",
		Long: `A dead letter is a command a worker gave up on: a terminal error, or its
attempts exhausted. It waits in the DLQ stream (<ns>.dlq.<kind>) with its
error, attempts, worker and time until an operator retries it (re-driven
into OUTBOX with the same command id, so receivers still dedupe) or
discards it (with a reason). The node runs either action (the CLI asks it
on esjet.<ns>.ops.<user>.dlq.<action>) and writes an audit record
(<ns>.dlq.audit.<kind>) naming the user, which settles the entry. The DLQ
denies delete and purge: settled entries stay, and ls no longer lists them.

An entry is named by its command id (<type>:<id>:<version>:<index>; the
newest entry of that command) or by its DLQ sequence number.`,
		Example: `  esjet dlq ls --kind book_hotel --older-than 1h
  esjet dlq show trip:t1:2:0
  esjet dlq retry trip:t1:2:0
  esjet dlq retry --kind book_hotel --error timeout --yes
  esjet dlq discard 42 --reason "hotel closed; refunded by hand"`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newDLQListCmd(g), newDLQShowCmd(g), newDLQRetryCmd(g), newDLQDiscardCmd(g))
	return cmd
}

// dlqOpen connects and opens the namespace's DLQ. The caller calls closeConn.
func (g *globals) dlqOpen(cmd *cobra.Command) (*ops.DLQ, string, func(), error) {
	d, _, ns, closeConn, err := g.dlqOpenActions(cmd, false)
	return d, ns, closeConn, err
}

// dlqOpenActions is dlqOpen with the node's DLQ actions (when actions).
func (g *globals) dlqOpenActions(cmd *cobra.Command, actions bool) (*ops.DLQ, *dlqActions, string, func(), error) {
	cfg, js, closeConn, err := g.outboxConnect(cmd)
	if err != nil {
		return nil, nil, "", nil, err
	}
	var a *dlqActions
	if actions {
		if a, err = dlqActionsFor(cmd, js.Conn(), cfg.Namespace); err != nil {
			closeConn()
			return nil, nil, "", nil, err
		}
	}
	return ops.OpenDLQ(js, cfg.Namespace).WithSettledMaxAge(cfg.Streams.DLQSettledMaxAge.Std()), a, cfg.Namespace, closeConn, nil
}

func newDLQListCmd(g *globals) *cobra.Command {
	var (
		f      ops.Filter
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List dead letters, oldest first",
		Example: `  esjet dlq ls
  esjet dlq ls --kind pay --error declined --newer-than 10m --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if f.OlderThan < 0 || f.NewerThan < 0 {
				return fmt.Errorf("--older-than %s, --newer-than %s: ages must not be negative", f.OlderThan, f.NewerThan)
			}
			d, ns, closeConn, err := g.dlqOpen(cmd)
			if err != nil {
				return err
			}
			defer closeConn()
			list, err := d.List(cmd.Context(), f)
			if err != nil {
				return err
			}
			if asJSON {
				return writeIndentedJSON(g.stdout, list)
			}
			printDeadLetters(g.stdout, ns, list, f, time.Now())
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.Kind, "kind", "", "only this command kind")
	fl.StringVar(&f.ErrorContains, "error", "", "only entries whose error contains this text (ignoring case)")
	fl.DurationVar(&f.OlderThan, "older-than", 0, "only entries dead at least this long, e.g. 1h")
	fl.DurationVar(&f.NewerThan, "newer-than", 0, "only entries dead at most this long, e.g. 10m")
	fl.BoolVar(&asJSON, "json", false, "print JSON instead of a table")
	return cmd
}

func newDLQShowCmd(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "show <command-id|seq>",
		Short: "Show one dead letter: its command, error, headers, payload and audit history",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			d, _, closeConn, err := g.dlqOpen(cmd)
			if err != nil {
				return err
			}
			defer closeConn()
			det, err := d.Show(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if asJSON {
				return writeIndentedJSON(g.stdout, det)
			}
			printDeadLetter(g.stdout, det, time.Now())
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON instead of text")
	return cmd
}

func newDLQRetryCmd(g *globals) *cobra.Command {
	var (
		kind, errText                  string
		yes, afterFailed, pastReceipts bool
	)
	cmd := &cobra.Command{
		Use:   "retry <command-id|seq> | --kind K [--error TEXT] [--yes] [--after-failed] [--past-receipts]",
		Short: "Re-drive dead letters into OUTBOX (same command id, new message id)",
		Long: `Re-drive a dead letter into OUTBOX on <ns>.outbox.<kind>, with the same
headers and payload (so the same command id: receivers still dedupe) and a
new Nats-Msg-Id (<command id>:redrive:<dlq seq>). A receipt that says the
command failed is cleared so the worker runs it again. Then the audit record
is written, which settles the entry. The node does all of it, asked on
esjet.<ns>.ops.<user>.dlq.retry (with roles, an operator may publish only
under its own user, so the record names who asked).

A dead letter whose aggregate was already told <kind>_failed is refused:
the aggregate may have compensated (released the money, cancelled the
trip), and an effect that succeeds now would be one it no longer expects.
Check the aggregate first; --after-failed re-drives it anyway.

With streams.receipts_max_age set, a dead letter of a command issued longer
ago than that, with no receipt, is refused: had another copy of it been
done, its receipt may have expired, and the re-drive would run it again.
Check the effect with the target first; --past-receipts re-drives it anyway.

With --kind, every dead letter of that kind (and, with --error, whose error
contains the text) is retried, after a confirmation on stdin unless --yes.`,
		Example: `  esjet dlq retry trip:t1:2:0
  esjet dlq retry 42
  esjet dlq retry --kind book_hotel --error "HTTP 503" --yes`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			switch {
			case len(args) == 1 && (kind != "" || errText != ""):
				return errors.New("give either a command id or seq, or --kind (with --error), not both")
			case len(args) == 0 && kind == "":
				return errors.New("retry what? give a command id or DLQ seq, or --kind K to retry every dead letter of kind K")
			}
			d, act, ns, closeConn, err := g.dlqOpenActions(cmd, true)
			if err != nil {
				return err
			}
			defer closeConn()
			ctx := cmd.Context()
			retry := func(dl ops.DeadLetter) (ops.ActionReply, error) {
				return act.do(ctx, ops.ActionRetry, ops.ActionRequest{Seq: dl.Seq, CommandID: dl.ID, AfterFailed: afterFailed, PastReceipts: pastReceipts})
			}
			if len(args) == 1 {
				dl, err := d.Get(ctx, args[0])
				if err != nil {
					return err
				}
				rep, err := retry(dl)
				if err != nil {
					return err
				}
				printRetried(g.stdout, ns, dl, rep)
				return nil
			}

			list, err := d.List(ctx, ops.Filter{Kind: kind, ErrorContains: errText})
			if err != nil {
				return err
			}
			what := "of kind " + kind
			if errText != "" {
				what += fmt.Sprintf(" with an error containing %q", errText)
			}
			if len(list) == 0 {
				fmt.Fprintf(g.stdout, "no dead letters %s: nothing retried\n", what)
				return nil
			}
			if !yes {
				ok, err := confirm(cmd.InOrStdin(), g.stderr, fmt.Sprintf("Retry %d dead letters %s? [y/N] ", len(list), what))
				if err != nil {
					return err
				}
				if !ok {
					return fmt.Errorf("not confirmed: nothing retried (%d dead letters %s are still in the DLQ)", len(list), what)
				}
			}
			var errs []error
			retried := 0
			for _, dl := range list {
				rep, err := retry(dl)
				if err != nil {
					fmt.Fprintf(g.stdout, "not retried: seq %d, %s: %v\n", dl.Seq, dl.ID, err)
					errs = append(errs, err)
					continue
				}
				retried++
				printRetried(g.stdout, ns, dl, rep)
			}
			fmt.Fprintf(g.stdout, "retried %d of %d dead letters %s\n", retried, len(list), what)
			if len(errs) > 0 {
				return fmt.Errorf("%d of %d dead letters not retried (listed above); run the command again to retry them", len(errs), len(list))
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&kind, "kind", "", "retry every dead letter of this command kind")
	fl.StringVar(&errText, "error", "", "with --kind: only those whose error contains this text (ignoring case)")
	fl.BoolVarP(&yes, "yes", "y", false, "do not ask for confirmation (required when stdin is not a terminal)")
	fl.BoolVar(&afterFailed, "after-failed", false, "re-drive even when the aggregate was already told <kind>_failed (it may have compensated)")
	fl.BoolVar(&pastReceipts, "past-receipts", false, "re-drive a command issued longer ago than the receipts are kept, with no receipt (check it did not run)")
	return cmd
}

func newDLQDiscardCmd(g *globals) *cobra.Command {
	var reason string
	cmd := &cobra.Command{
		Use:   "discard <command-id|seq> --reason TEXT",
		Short: "Settle a dead letter for good without running it, recording why",
		Long: `Settle a dead letter without running it again. The node (asked on
esjet.<ns>.ops.<user>.dlq.discard) keeps the reason, the operator, the time
and the entry's error and attempts in an audit record on
<ns>.dlq.audit.<kind>, which settles the entry (it stays in the DLQ stream,
which denies deletes; dlq ls no longer lists it); esjet reconcile counts the
command as discarded.`,
		Example: `  esjet dlq discard trip:t1:2:0 --reason "hotel closed; refunded by hand"`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if strings.TrimSpace(reason) == "" {
				return errors.New(`--reason is required: say why the command is dropped, e.g. --reason "refunded by hand"`)
			}
			d, act, _, closeConn, err := g.dlqOpenActions(cmd, true)
			if err != nil {
				return err
			}
			defer closeConn()
			ctx := cmd.Context()
			dl, err := d.Get(ctx, args[0])
			if err != nil {
				return err
			}
			rep, err := act.do(ctx, ops.ActionDiscard, ops.ActionRequest{Seq: dl.Seq, CommandID: dl.ID, Reason: reason})
			if err != nil {
				return err
			}
			fmt.Fprintf(g.stdout, "discarded seq %d: command %s (%s), dead after %d attempt(s): %s\n  reason: %s (audit recorded, by %s)\n",
				dl.Seq, dl.ID, dl.Kind, dl.Attempts, dl.Error, strings.TrimSpace(reason), rep.By)
			return nil
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why the command is dropped (required; kept in the audit record)")
	return cmd
}

// confirm asks question on w and reads the answer from in. Only y or yes
// confirms. A stdin that is not a terminal is refused: scripts say --yes.
func confirm(in io.Reader, w io.Writer, question string) (bool, error) {
	if f, ok := in.(*os.File); ok && !term.IsTerminal(int(f.Fd())) {
		return false, errors.New("stdin is not a terminal, so nobody can confirm: pass --yes to retry without asking")
	}
	fmt.Fprint(w, question)
	line, err := bufio.NewReader(in).ReadString('\n')
	if err != nil && line == "" {
		fmt.Fprintln(w)
		return false, errors.New("no answer on stdin: nothing retried (pass --yes to retry without asking)")
	}
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return true, nil
	}
	return false, nil
}

func printRetried(w io.Writer, ns string, dl ops.DeadLetter, rep ops.ActionReply) {
	fmt.Fprintf(w, "retried seq %d: command %s re-driven to %s as msg id %s (audit recorded, by %s)\n",
		dl.Seq, dl.ID, wire.BandSubject(ns, dl.Kind, wire.PriorityLow), rep.MsgID, rep.By)
}

func printDeadLetters(w io.Writer, ns string, list []ops.DeadLetter, f ops.Filter, now time.Time) {
	if len(list) == 0 {
		if f == (ops.Filter{}) {
			fmt.Fprintf(w, "no dead letters in namespace %s\n", ns)
		} else {
			fmt.Fprintf(w, "no dead letters in namespace %s match\n", ns)
		}
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SEQ\tCOMMAND ID\tKIND\tATTEMPTS\tERROR\tDEAD AT\tAGE")
	for _, dl := range list {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%s\t%s\t%s\n", dl.Seq, dl.ID, dl.Kind, dl.Attempts, truncate(dl.Error, errorColumn),
			dl.DeadAt.Format(time.RFC3339), roundAge(max(now.Sub(dl.DeadAt), 0)))
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "\n%d dead letter(s)\n", len(list))
}

func printDeadLetter(w io.Writer, d ops.DeadLetterDetail, now time.Time) {
	if d.Settled != nil {
		printSettled(w, d)
		return
	}
	fmt.Fprintf(w, "dead letter seq %d: command %s (%s)\n\n", d.Seq, d.ID, d.Kind)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "error\t%s\n", d.Error)
	fmt.Fprintf(tw, "attempts\t%d\n", d.Attempts)
	fmt.Fprintf(tw, "worker\t%s\n", d.Worker)
	fmt.Fprintf(tw, "dead at\t%s (%s ago)\n", d.DeadAt.Format(time.RFC3339Nano), roundAge(max(now.Sub(d.DeadAt), 0)))
	if d.AggregateType != "" {
		fmt.Fprintf(tw, "aggregate\t%s/%s version %d\n", d.AggregateType, d.AggregateID, d.AggregateVersion)
	}
	if d.DecisionID != "" {
		fmt.Fprintf(tw, "decision\t%s (log seq %d)\n", d.DecisionID, d.DecisionSeq)
	}
	if d.OutboxSeq > 0 {
		fmt.Fprintf(tw, "outbox seq\t%d\n", d.OutboxSeq)
	}
	if d.CorrelationID != "" {
		fmt.Fprintf(tw, "correlation\t%s\n", d.CorrelationID)
	}
	if len(d.OtherSeqs) > 0 {
		fmt.Fprintf(tw, "also dead\tseq %s\n", joinUints(d.OtherSeqs))
	}
	_ = tw.Flush()
	label := "payload"
	if d.PayloadNotJSON {
		label = "payload (not JSON, shown as a string)"
	}
	fmt.Fprintf(w, "\n%s:\n", label)
	_ = printJSON(w, d.Payload)
	if len(d.History) == 0 {
		fmt.Fprintln(w, "\nhistory: none (never retried or discarded before)")
		return
	}
	printAuditTrail(w, d.History)
}

// printSettled shows a dead letter that a retry or discard took out of the
// DLQ: the letter while its settled copy stays, else what its audit trail
// kept, and the trail.
func printSettled(w io.Writer, d ops.DeadLetterDetail) {
	a := d.Settled
	fmt.Fprintf(w, "dead letter seq %d: command %s (%s) is settled, no longer a dead letter: %s by %s at %s\n\n",
		d.Seq, d.ID, d.Kind, a.Action, a.By, a.At.Format(time.RFC3339))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "error\t%s\n", d.Error)
	fmt.Fprintf(tw, "attempts\t%d\n", d.Attempts)
	if p := string(d.Payload); p != "" && p != "null" {
		// Its whole copy, until streams.dlq_settled_max_age.
		fmt.Fprintf(tw, "payload\t%s\n", p)
	}
	switch a.Action {
	case ops.AuditDiscarded:
		fmt.Fprintf(tw, "reason\t%s\n", a.Reason)
	case ops.AuditRetried:
		fmt.Fprintf(tw, "re-driven as\tOUTBOX seq %d, msg id %s (esjet outbox %s shows where it is now)\n", a.NewOutboxSeq, a.NewOutboxMsgID, d.ID)
	}
	_ = tw.Flush()
	printAuditTrail(w, d.History)
}

func printAuditTrail(w io.Writer, history []ops.AuditRecord) {
	fmt.Fprintln(w, "\nhistory:")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  AT\tACTION\tBY\tDLQ SEQ\tERROR\tDETAIL")
	for _, a := range history {
		detail := a.Reason
		if a.Action == ops.AuditRetried {
			detail = "msg id " + a.NewOutboxMsgID
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%d\t%s\t%s\n", a.At.Format(time.RFC3339), a.Action, a.By, a.DLQSeq, truncate(a.Error, errorColumn), detail)
	}
	_ = tw.Flush()
}

// truncate cuts s to n runes, marking the cut.
func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

func joinUints(v []uint64) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = fmt.Sprint(n)
	}
	return strings.Join(s, ", ")
}
