package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/esjet/esjet/internal/ops"
	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/wire"
)

// listCap is how many entries of each drift list the text output shows.
const listCap = 20

// repairReport is `esjet reconcile --repair --json`.
type repairReport struct {
	Before      ops.Report `json:"before"`
	Repaired    int        `json:"repaired"`
	RepairError string     `json:"repair_error,omitempty"`
	After       ops.Report `json:"after"`
}

// reconcileFlags are the flags of esjet reconcile.
type reconcileFlags struct {
	repair, asJSON, noProgress, full bool
	stuckAfter                       time.Duration
	checkpointFile                   string
}

const reconcileLong = `Read every command recorded in the log, every message in OUTBOX (and the
pending schedules of delayed commands), the receipts and the DLQ, and report
per command kind: issued, in outbox, scheduled, in flight, done, failed,
dead, discarded (by esjet dlq discard), not yet relayed, expired (aged out
of OUTBOX), and the drift:

  orphans       relayed (at or below the relay's ack floor) but neither in
                OUTBOX nor done nor dead
  duplicates    one command id stored more than once in OUTBOX (harmless:
                receipts fold them; reported, never repaired)
  stuck         in flight, with its newest OUTBOX copy older than --stuck-after
  late effects  done after its aggregate was told it failed (an effect the
                saga has already compensated for: look at it by hand)

Exit status: 0 when there is no drift, 1 otherwise (or on error).

Each run ends by saving a checkpoint (object store <ns>_reconcile): how far
it read, the counts of the commands settled for good, and the commands
still open. The next run reads only what was stored since, plus the open
commands, and reports the same figures; anything that touches a settled
command (a second copy, a late outcome) makes it start over as a full run.
--full reads everything and saves a new checkpoint. A user who may not
manage that object store (the operator role creates nothing in JetStream)
keeps the checkpoint in a file of its own instead: --checkpoint-file, by
default esjet/reconcile-<ns>.json in the user's cache directory.

--repair re-publishes each orphan to OUTBOX from its decision, with its
original command id as Nats-Msg-Id, then reconciles again and reports (and
exits by) the state after the repair. With --json it prints
{"before", "repaired", "after"} instead of one report.`

func newReconcileCmd(g *globals) *cobra.Command {
	var f reconcileFlags
	cmd := &cobra.Command{
		Use:   "reconcile",
		Short: "Check that OUTBOX holds exactly the commands the log recorded; --repair re-publishes orphans",
		Long:  reconcileLong,
		Example: `  esjet reconcile
  esjet reconcile --json --no-progress | jq .totals
  esjet reconcile --repair`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return runReconcile(cmd, g, f) },
	}
	fs := cmd.Flags()
	fs.BoolVar(&f.repair, "repair", false, "re-publish orphans to OUTBOX with their original ids, then reconcile again")
	fs.BoolVar(&f.asJSON, "json", false, "print JSON instead of tables")
	fs.StringVar(&f.checkpointFile, "checkpoint-file", "", "keep the checkpoint in this file instead of the object store <ns>_reconcile (default for a user who may not write that store: esjet/reconcile-<ns>.json in the user cache directory)")
	fs.BoolVar(&f.full, "full", false, "read the whole log, OUTBOX, receipts and DLQ instead of starting from the last run's checkpoint")
	fs.DurationVar(&f.stuckAfter, "stuck-after", 15*time.Minute, "report a command in flight this long without an outcome as stuck")
	fs.BoolVar(&f.noProgress, "no-progress", false, "no progress bar (it is also off with --json or when stderr is not a terminal)")
	return cmd
}

// runReconcile reconciles once, and with --repair repairs and reconciles
// again; the exit status follows the last report's drift.
func runReconcile(cmd *cobra.Command, g *globals, f reconcileFlags) error {
	if f.stuckAfter <= 0 {
		return fmt.Errorf("--stuck-after %s: must be greater than 0, e.g. 15m", f.stuckAfter)
	}
	cfg, js, closeConn, err := g.outboxConnect(cmd)
	if err != nil {
		return err
	}
	defer closeConn()
	ctx := cmd.Context()
	rcfg := ops.ReconcileConfig{StuckAfter: f.stuckAfter}
	if f.full {
		rcfg.Checkpoint = ops.CheckpointFull
	}
	rcfg.CheckpointFile = f.checkpointFile
	if rcfg.CheckpointFile == "" && !streams.ConsumersAllowed(ctx, js, wire.ObjStream(wire.ReconcileBucket(cfg.Namespace))) {
		dir, err := os.UserCacheDir()
		if err != nil {
			dir = os.TempDir()
		}
		rcfg.CheckpointFile = filepath.Join(dir, "esjet", "reconcile-"+cfg.Namespace+".json")
	}
	rc := ops.NewReconciler(js, cfg.Namespace, rcfg, newLogger(cfg, g.stderr))
	showBar := !f.noProgress && !f.asJSON && isTerminal(g.stderr)
	run := func(what string) (ops.Report, error) {
		progress, finish := newProgressBar(g.stderr, what, showBar)
		rep, err := rc.Run(ctx, progress)
		finish()
		return rep, err
	}

	rep, err := run("reconcile")
	if err != nil {
		return err
	}
	if !f.repair {
		if f.asJSON {
			if err := writeIndentedJSON(g.stdout, rep); err != nil {
				return err
			}
		} else {
			printReconcile(g.stdout, rep)
		}
		return driftExit(rep)
	}

	n, repairErr := rc.Repair(ctx, rep)
	if repairErr != nil && !errors.Is(repairErr, ops.ErrRepairDeduplicated) {
		return fmt.Errorf("repaired %d orphan(s), then: %w", n, repairErr)
	}
	after, err := run("re-check")
	if err != nil {
		return fmt.Errorf("repaired %d orphan(s), then: %w", n, err)
	}
	if f.asJSON {
		out := repairReport{Before: rep, Repaired: n, After: after}
		if repairErr != nil {
			out.RepairError = repairErr.Error()
		}
		if err := writeIndentedJSON(g.stdout, out); err != nil {
			return err
		}
		return driftExit(after)
	}
	printRepair(g.stdout, rep, n, repairErr, after)
	return driftExit(after)
}

// printRepair is the text output of esjet reconcile --repair.
func printRepair(w io.Writer, before ops.Report, repaired int, repairErr error, after ops.Report) {
	fmt.Fprintf(w, "before repair: drift %d (%d orphan(s), %d duplicate(s), %d stuck, %d late effect(s))\n",
		before.Drift(), before.Totals.Orphans, before.Totals.Duplicates, before.Totals.Stuck, before.Totals.LateEffects)
	fmt.Fprintf(w, "repaired %d orphan(s): re-published to OUTBOX with their original ids\n", repaired)
	if repairErr != nil {
		fmt.Fprintf(w, "not repaired yet: %v\n", repairErr)
	}
	fmt.Fprintln(w, "\nafter repair:")
	printReconcile(w, after)
}

// driftExit is exit status 1 (the report already said why) when there is
// drift.
func driftExit(rep ops.Report) error {
	if rep.Drift() > 0 {
		return &exitError{code: 1}
	}
	return nil
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// newProgressBar returns a progress callback drawing a bar on w, and a
// finish func that removes it. When show is false both do nothing.
func newProgressBar(w io.Writer, what string, show bool) (func(done, total uint64), func()) {
	if !show {
		return nil, func() {}
	}
	bar := progressbar.NewOptions64(-1,
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription(what),
		progressbar.OptionShowCount(),
		progressbar.OptionShowIts(),
		progressbar.OptionSetItsString("msgs"),
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionClearOnFinish(),
	)
	progress := func(done, total uint64) {
		if int64(total) != bar.GetMax64() {
			bar.ChangeMax64(int64(total))
		}
		_ = bar.Set64(int64(done))
	}
	return progress, func() { _ = bar.Finish() }
}

func printReconcile(w io.Writer, r ops.Report) {
	relay := fmt.Sprintf("relay ack floor %d of %d", r.RelayAckFloor, r.EventsLastSeq)
	if !r.RelayConsumer {
		relay = "the relay never ran"
	}
	fmt.Fprintf(w, "namespace %s: %d command(s) issued, log read to seq %d, %s\n", r.Namespace, r.Totals.Issued, r.EventsLastSeq, relay)
	if c := r.Checkpoint; c.Incremental {
		fmt.Fprintf(w, "from the checkpoint at log seq %d: read %d new message(s), %d command(s) still open\n",
			c.From.Events, r.Scanned.Events+r.Scanned.Outbox+r.Scanned.DLQ+r.Scanned.Receipts, c.Open)
	} else {
		fmt.Fprintf(w, "full run (%s): read %d message(s), %d command(s) still open\n",
			c.FullBecause, r.Scanned.Events+r.Scanned.Outbox+r.Scanned.DLQ+r.Scanned.Receipts, c.Open)
	}
	if r.Undecodable > 0 {
		fmt.Fprintf(w, "%d message(s) in the log are not esjet decisions (skipped, as the relay skips them)\n", r.Undecodable)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KIND\tISSUED\tIN OUTBOX\tSCHEDULED\tIN FLIGHT\tDONE\tFAILED\tDEAD\tDISCARDED\tNOT RELAYED\tEXPIRED\tORPHANS\tDUPLICATES\tSTUCK\tLATE")
	row := func(name string, c ops.Counts) {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\n", name, c.Issued, c.InOutbox, c.Scheduled, c.InFlight,
			c.Completed, c.Failed, c.Dead, c.Discarded, c.NotYetRelayed, c.Expired, c.Orphans, c.Duplicates, c.Stuck, c.LateEffects)
	}
	for _, k := range r.KindNames() {
		row(k, r.Kinds[k])
	}
	row("TOTAL", r.Totals)
	_ = tw.Flush()
	fmt.Fprintln(w)
	if r.Drift() == 0 {
		fmt.Fprintln(w, "no drift: OUTBOX holds every relayed command exactly once")
		return
	}
	fmt.Fprintf(w, "drift %d: %d orphan(s), %d duplicate(s), %d stuck (in flight over %s), %d late effect(s)\n",
		r.Drift(), r.Totals.Orphans, r.Totals.Duplicates, r.Totals.Stuck, r.StuckAfter, r.Totals.LateEffects)
	if len(r.Orphans) > 0 {
		fmt.Fprintln(w, "\norphans (relayed, not in OUTBOX; `esjet reconcile --repair` re-publishes them):")
		printList(w, len(r.Orphans), "  COMMAND ID\tKIND\tDECISION SEQ", func(i int) string {
			o := r.Orphans[i]
			return fmt.Sprintf("  %s\t%s\t%d", o.ID, o.Kind, o.DecisionSeq)
		})
	}
	if len(r.Duplicates) > 0 {
		fmt.Fprintln(w, "\nduplicates (stored more than once in OUTBOX; receipts fold them):")
		printList(w, len(r.Duplicates), "  COMMAND ID\tKIND\tCOPIES", func(i int) string {
			d := r.Duplicates[i]
			return fmt.Sprintf("  %s\t%s\t%d", d.ID, d.Kind, d.Count)
		})
	}
	if len(r.Stuck) > 0 {
		fmt.Fprintf(w, "\nstuck (in flight for more than %s; see `esjet outbox <command-id>`):\n", r.StuckAfter)
		printList(w, len(r.Stuck), "  COMMAND ID\tKIND\tOUTBOX SEQ\tSINCE", func(i int) string {
			s := r.Stuck[i]
			return fmt.Sprintf("  %s\t%s\t%d\t%s", s.ID, s.Kind, s.Seq, s.Since.Format(time.RFC3339))
		})
	}
	if len(r.LateEffects) > 0 {
		fmt.Fprintln(w, "\nlate effects (done after the aggregate was told <kind>_failed: it will not take them into account;"+
			" undo the effect or tell the aggregate by hand; see `esjet outbox <command-id>`):")
		printList(w, len(r.LateEffects), "  COMMAND ID\tKIND", func(i int) string {
			l := r.LateEffects[i]
			return fmt.Sprintf("  %s\t%s", l.ID, l.Kind)
		})
	}
	if len(r.OutcomesRefused) > 0 {
		fmt.Fprintln(w, "\noutcomes refused (the aggregate refused the reported outcome and still awaits the command;"+
			" fix its outcome handler, then settle it with the aggregate by hand; see `esjet outbox <command-id>`):")
		printList(w, len(r.OutcomesRefused), "  COMMAND ID\tKIND\tREASON", func(i int) string {
			o := r.OutcomesRefused[i]
			return fmt.Sprintf("  %s\t%s\toutcome refused: %s", o.ID, o.Kind, o.Reason)
		})
	}
}

// printList prints the first listCap of n lines under header, then how
// many more there are.
func printList(w io.Writer, n int, header string, line func(int) string) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, header)
	for i := range min(n, listCap) {
		fmt.Fprintln(tw, line(i))
	}
	_ = tw.Flush()
	if n > listCap {
		fmt.Fprintf(w, "  … and %d more (--json lists them all)\n", n-listCap)
	}
}
