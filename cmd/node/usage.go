package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/esjet/esjet/config"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// explainArgs makes every runnable subcommand's argument error show the
// command's usage line: cobra alone says "accepts 2 arg(s), received 1" and
// leaves the user to guess which two.
func explainArgs(c *cobra.Command) {
	for _, sub := range c.Commands() {
		explainArgs(sub)
	}
	if c.Parent() == nil || c.Args == nil || !c.Runnable() {
		return
	}
	check := c.Args
	c.Args = func(cmd *cobra.Command, args []string) error {
		if err := check(cmd, args); err != nil {
			return fmt.Errorf("%w\nusage: %s (%s --help says more)", err, cmd.UseLine(), cmd.CommandPath())
		}
		return nil
	}
}

// flagError is every command's answer to a flag it does not know: the
// nearest flag it does know when one is close ("--dta-dir": did you mean
// --data-dir?), and where the list is.
func flagError(cmd *cobra.Command, err error) error {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "unknown flag: --"); ok {
		if near := nearestFlag(cmd, name); near != "" {
			msg += "; did you mean --" + near + "?"
		}
	}
	return fmt.Errorf("%s (%s --help lists the flags)", msg, cmd.CommandPath())
}

// nearestFlag is the flag of cmd (its own and those it inherits) closest to
// name, if any is within a third of its length (at least 2 edits).
func nearestFlag(cmd *cobra.Command, name string) string {
	best, bestDist := "", max(2, len(name)/3)+1
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if d := config.EditDistance(name, f.Name); d < bestDist {
			best, bestDist = f.Name, d
		}
	})
	return best
}

// listenFlags are the flags that set a listen address.
var listenFlags = map[string]string{"nats.embedded.listen": "--listen", "http.listen": "--http"}

// withRemedy adds to an error what the user can do about it, where the
// error alone does not say: an address another process already listens on
// names the flag, the variable and the config key that move this node's.
func withRemedy(err error) error {
	var le *config.ListenError
	if !errors.As(err, &le) || !le.InUse() {
		return err
	}
	ways := config.EnvName(le.Setting) + "=HOST:PORT or " + le.Setting + " in the config file"
	if flag := listenFlags[le.Setting]; flag != "" {
		ways = flag + " HOST:PORT, " + ways
	}
	return fmt.Errorf("%w\nanother process already listens on %s (another esjet node or nats-server?): stop it, or give this node another address with %s",
		err, le.Addr, ways)
}
