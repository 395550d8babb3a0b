package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"

	"github.com/esjet/esjet/config"
	"github.com/esjet/esjet/internal/api"
	"github.com/esjet/esjet/internal/backup"
	"github.com/esjet/esjet/internal/node"
	"github.com/esjet/esjet/internal/ops"
)

func newBackupCmd(g *globals) *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "backup [--out FILE]",
		Short: "Write an archive of the namespace: log, OUTBOX, DLQ, receipts, snapshots, views, schedules",
		Long: `Connect as the configuration says (an admin user: it reads every stream of
the namespace) and write the namespace's archive to FILE (default
<namespace>-<time>.esjet-backup.gz; - for stdout): the event log, OUTBOX with
its pending schedules, the dead letters and their audit trail, and the
buckets (snapshots, receipts, the projections' checkpoints and every view).

It runs against a live node or cluster. The objects are read one after the
other, the event log last and to its end, so everything in the archive
refers to a decision the archive holds; decisions acknowledged while the
backup ran are in it up to the moment the log was read. Progress goes to
stderr. The archive is gzip-compressed JSON lines (zcat | jq reads it).

  esjet restore FILE        recreates it (docs/operations.md)`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := g.load(cmd.Flags())
			if err != nil {
				return err
			}
			if out == "" {
				out = fmt.Sprintf("%s-%s.esjet-backup.gz", cfg.Namespace, time.Now().UTC().Format("20060102T150405Z"))
			}
			// Refused before anything is read: the archive there may be the
			// only copy of what a lost disk held.
			if out != "-" {
				if err := refuseExisting(out); err != nil {
					return err
				}
			}
			nc, js, err := g.connectJetStream(cmd.Context(), cfg, "esjet backup")
			if err != nil {
				return err
			}
			defer nc.Close()
			if err := ops.RequireNamespace(cmd.Context(), js, cfg.Namespace); err != nil {
				return err
			}
			var w io.Writer = g.stdout
			var f *os.File
			if out != "-" {
				if f, err = os.OpenFile(out+".partial", os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600); errors.Is(err, fs.ErrExist) {
					return fmt.Errorf("backup: %s.partial exists: another backup to %s is running, or one stopped before it finished; remove %s.partial, or give another --out", out, out, out)
				} else if err != nil {
					return fmt.Errorf("backup: %w", err)
				}
				defer os.Remove(f.Name()) // after the rename, nothing
				defer f.Close()
				w = f
			}
			h, err := backup.Backup(cmd.Context(), js, cfg.Namespace, w, backup.Options{EsjetVersion: version(), Progress: g.progress("backup")})
			if err != nil {
				return err
			}
			if f != nil {
				if err := f.Sync(); err != nil {
					return err
				}
				if err := f.Close(); err != nil {
					return err
				}
				if err := renameNoClobber(f.Name(), out); err != nil {
					return err
				}
				fmt.Fprintf(g.stdout, "backed up namespace %s to %s\n", cfg.Namespace, out)
				printObjects(g.stdout, h)
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&out, "out", "o", "", "archive file to write (- for stdout); it must not exist")
	return cmd
}

// refuseExisting refuses an archive path that exists. There is no --force:
// removing the old archive is one explicit command, and a flag that writes
// over an archive is one habit away from losing the last good copy.
func refuseExisting(out string) error {
	if _, err := os.Lstat(out); err == nil {
		return fmt.Errorf("backup: %s exists and a backup never writes over a file: give another --out, or remove %s first", out, out)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("backup: %w", err)
	}
	return nil
}

// renameNoClobber moves the finished archive from to out unless out
// appeared while the backup ran: a hard link fails on an existing name
// where a rename would replace it. Where links are not supported it checks
// and renames.
func renameNoClobber(from, out string) error {
	err := os.Link(from, out)
	switch {
	case err == nil:
		return os.Remove(from)
	case errors.Is(err, fs.ErrExist):
		return fmt.Errorf("backup: %s appeared while the backup ran and a backup never writes over a file: this archive was not kept; run it again with another --out", out)
	}
	if err := refuseExisting(out); err != nil {
		return err
	}
	return os.Rename(from, out)
}

func newRestoreCmd(g *globals) *cobra.Command {
	var as string
	var force, ignoreNodes bool
	cmd := &cobra.Command{
		Use:   "restore FILE [--as NAMESPACE] [--force]",
		Short: "Recreate a namespace from an esjet backup archive (as admin)",
		Long: `Connect as the configuration says (an admin user: it creates streams) and
recreate the archive's namespace, or --as another one (names and subjects
rewritten): every stream and bucket with the archive's settings (replicas from
streams.replicas: 3 on a cluster of three or more servers unless set), and
every message in order. The event log, OUTBOX and the dead letters keep their
sequences. Stop the nodes of the namespace first; start them after.

It refuses to write over a namespace that has any of the archive's objects,
naming them; --force deletes them first (what they hold is lost). It refuses
while a node serves the namespace (its micro service answers): stop the nodes
first; --ignore-running-nodes restores anyway, and the nodes must then be
restarted.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := g.load(cmd.Flags())
			if err != nil {
				return err
			}
			if as != "" {
				c := config.Default()
				c.Namespace = as
				if err := c.Validate(); err != nil {
					return fmt.Errorf("--as: %w", err)
				}
			}
			nc, js, err := g.connectJetStream(cmd.Context(), cfg, "esjet restore")
			if err != nil {
				return err
			}
			defer nc.Close()
			cfg = node.ResolveReplicas(cfg, nc, nil)
			file := args[0]
			open := func() (io.ReadCloser, error) { return os.Open(filepath.Clean(file)) }
			check := func(ctx context.Context, ns string) error { return refuseServed(ctx, nc, ns) }
			if ignoreNodes {
				check = nil
			}
			h, err := backup.Restore(cmd.Context(), js, open, backup.RestoreOptions{Namespace: as, Force: force, Replicas: cfg.Streams.Replicas,
				Check: check, Options: backup.Options{Progress: g.progress("restore")}})
			if err != nil {
				return err
			}
			fmt.Fprintf(g.stdout, "restored namespace %s from %s (taken %s)\n", cmpOr(as, h.Namespace), file, h.TakenAt.Format(time.RFC3339))
			for i := range h.Objects {
				h.Objects[i].Name = backup.TargetName(h, as, h.Objects[i].Name)
			}
			printObjects(g.stdout, h)
			return nil
		},
	}
	cmd.Flags().StringVar(&as, "as", "", "restore into this namespace instead of the archive's")
	cmd.Flags().BoolVar(&force, "force", false, "delete the namespace's existing streams and buckets first")
	cmd.Flags().BoolVar(&ignoreNodes, "ignore-running-nodes", false, "restore even though nodes serve the namespace (restart them after)")
	return cmd
}

// refuseServed refuses a restore into namespace ns while a node serves it:
// its relay, workers and projections hold consumers and positions on the
// streams the restore deletes and recreates, and it would go on reporting
// ready while none of them runs again until it is restarted.
func refuseServed(ctx context.Context, nc *nats.Conn, ns string) error {
	nodes, err := api.ServingNodes(ctx, nc, ns, time.Second)
	if err != nil {
		return fmt.Errorf("restore: ask whether a node serves namespace %s: %w (--ignore-running-nodes skips the question)", ns, err)
	}
	if len(nodes) == 0 {
		return nil
	}
	ids := make([]string, len(nodes))
	for i, n := range nodes {
		ids[i] = n.ID
	}
	return fmt.Errorf("restore: %d %s namespace %s on this server (micro service esjet, id %s): stop the nodes serving namespace %s first, restore, then start them (--ignore-running-nodes restores anyway; restart the nodes after it)",
		len(nodes), map[bool]string{true: "node serves", false: "nodes serve"}[len(nodes) == 1], ns, strings.Join(ids, ", "), ns)
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func printObjects(w io.Writer, h backup.Header) {
	for _, o := range h.Objects {
		fmt.Fprintf(w, "  %-32s %s\n", o.Name, messages(o.Messages))
	}
}

// progress reports an object's progress on stderr, at most once a second
// per object and when it is done.
func (g *globals) progress(verb string) func(object string, done, total uint64) {
	return func(object string, done, total uint64) {
		if done >= total {
			fmt.Fprintf(g.stderr, "%s: %s: %s\n", verb, object, messages(done))
			return
		}
		fmt.Fprintf(g.stderr, "%s: %s: %d of %s\n", verb, object, done, messages(total))
	}
}
