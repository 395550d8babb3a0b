package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/esjet/esjet/config"
)

// globals are the flags every subcommand shares: where the config comes from
// and the overrides for its most common fields.
type globals struct {
	environ []string
	stdout  io.Writer
	stderr  io.Writer

	configPath string
	namespace  string
	dataDir    string
	listen     string
	sync       string
	url        []string
	httpListen string
	logLevel   string
	logFormat  string

	runsNode bool // the command runs a node (else it reaches one: config.ValidateTool)

	denied denial // a request NATS refused the command's connections (denied.go)
}

func newRootCmd(environ []string, stdout, stderr io.Writer) *cobra.Command {
	root, _ := newRoot(environ, stdout, stderr)
	return root
}

// newRoot is newRootCmd with the state its commands share.
func newRoot(environ []string, stdout, stderr io.Writer) (*cobra.Command, *globals) {
	g := &globals{environ: environ, stdout: stdout, stderr: stderr}
	root := &cobra.Command{
		Use:   "esjet",
		Short: "Event sourcing on NATS JetStream: event log, transactional outbox, durable workers",
		Long: `esjet runs an event-sourced node on NATS JetStream.

With no subcommand it runs the node (esjet run): an embedded nats-server with
JetStream, the namespace's streams, ready to append and read decisions.

Configuration: defaults < config file (--config, $ESJET_CONFIG or
config/esjet.yaml) < ESJET_* environment variables < flags.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          unknownSubcommand,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runNode(cmd, g)
		},
	}
	root.SuggestionsMinimumDistance = 2
	root.SetOut(stdout)
	root.SetErr(stderr)
	f := root.PersistentFlags()
	f.StringVarP(&g.configPath, "config", "c", "", "config file (default $ESJET_CONFIG, else config/esjet.yaml if present)")
	f.StringVar(&g.namespace, "namespace", "", "namespace (bounded context), e.g. trips")
	f.StringVar(&g.dataDir, "data-dir", "", "embedded JetStream store directory")
	f.StringVar(&g.listen, "listen", "", `embedded NATS client listener host:port, or "none"`)
	f.StringVar(&g.sync, "sync", "", `embedded fsync mode: "always" or "interval"`)
	f.StringSliceVar(&g.url, "url", nil, "external NATS URLs (comma-separated); sets nats.mode=external")
	f.StringVar(&g.httpListen, "http", "", `HTTP listener host:port, or "none"`)
	f.StringVar(&g.logLevel, "log-level", "", "debug, info, warn or error")
	f.StringVar(&g.logFormat, "log-format", "", "text or json")

	root.AddCommand(newRunCmd(g), newVersionCmd(g), newStreamsCmd(g), newSendCmd(g), newStateCmd(g), newEventsCmd(g), newOutboxCmd(g), newReconcileCmd(g), newDLQCmd(g), newSitesCmd(g))
	root.AddCommand(newDemoServicesCmd(g))
	root.AddCommand(newBenchCmd(g))
	root.AddCommand(newProjectionsCmd(g))
	root.AddCommand(newWorkersCmd(g))
	root.AddCommand(newForgetCmd(g))
	root.AddCommand(newServerCmd(g), newPermissionsCmd(g), newHTTPTokenCmd(g))
	root.AddCommand(newProvisionCmd(g), newArchiveCmd(g))
	root.AddCommand(newBackupCmd(g), newRestoreCmd(g))
	explainArgs(root)
	refuseUnknownSubcommands(root)
	root.SetFlagErrorFunc(flagError)
	return root, g
}

// unknownSubcommand refuses an argument to the root command, which runs the
// node and takes none: it is a mistyped subcommand, and the error suggests
// the nearest ones (cobra only suggests when the root has no Args of its own).
func unknownSubcommand(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
	if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
		msg += "; did you mean " + strings.Join(s, " or ") + "?"
	}
	return errors.New(msg + " (esjet --help lists the commands)")
}

// load reads the configuration with the flags that were set applied last,
// then validates it, reporting every problem at once.
func (g *globals) load(flags *pflag.FlagSet) (config.Config, error) {
	cfg, err := config.Load(g.configPath, g.environ)
	if err != nil && !isValidationOnly(err) {
		return cfg, configError(err)
	}
	set := func(name string, apply func()) {
		if flags.Changed(name) {
			apply()
		}
	}
	set("namespace", func() { cfg.Namespace = g.namespace })
	set("data-dir", func() { cfg.NATS.Embedded.DataDir = g.dataDir })
	set("listen", func() { cfg.NATS.Embedded.Listen = g.listen })
	set("sync", func() { cfg.NATS.Embedded.Sync = g.sync })
	set("url", func() { cfg.NATS.Mode = config.ModeExternal; cfg.NATS.External.URLs = g.url })
	set("http", func() { cfg.HTTP.Listen = g.httpListen })
	set("log-level", func() { cfg.Log.Level = g.logLevel })
	set("log-format", func() { cfg.Log.Format = g.logFormat })
	validate := cfg.ValidateTool
	if g.runsNode {
		validate = cfg.Validate
	}
	if err := validate(); err != nil {
		return cfg, configError(err)
	}
	return cfg, nil
}

// isValidationOnly reports whether every joined error is a field problem, so
// flags may still fix it before the final Validate.
func isValidationOnly(err error) bool {
	var errs []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	} else {
		errs = []error{err}
	}
	for _, e := range errs {
		if _, ok := e.(*config.FieldError); !ok {
			return false
		}
	}
	return true
}

func configError(err error) error {
	lines := strings.Split(err.Error(), "\n")
	return fmt.Errorf("invalid configuration (%d problem(s)):\n  %s", len(lines), strings.Join(lines, "\n  "))
}

func newLogger(cfg config.Config, w io.Writer) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(cfg.Log.Level))
	opts := &slog.HandlerOptions{Level: level}
	if cfg.Log.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// refuseUnknownSubcommands makes every command that only groups others (dlq,
// projections) refuse a word that is none of them, with exit code 1 and the
// nearest subcommand, instead of printing its help and exiting 0: cobra
// checks the args of runnable commands only.
func refuseUnknownSubcommands(c *cobra.Command) {
	for _, sub := range c.Commands() {
		refuseUnknownSubcommands(sub)
	}
	if c.Runnable() || !c.HasSubCommands() || c.Parent() == nil {
		return
	}
	c.Args = func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			return nil
		}
		msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
		if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
			msg += "; did you mean " + s[0] + "?"
		}
		return fmt.Errorf("%s (%s --help lists them)", msg, cmd.CommandPath())
	}
	c.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
}
