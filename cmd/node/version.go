package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"

	"github.com/esjet/esjet"
)

// buildVersion is set at link time: -ldflags "-X main.buildVersion=v0.1.0".
var buildVersion = ""

func version() string {
	if buildVersion != "" {
		return buildVersion
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}

// semver is the version the micro service reports: micro requires semver.
func semver() string {
	v := strings.TrimPrefix(version(), "v")
	if v == "dev" || v == "" {
		return esjet.Version
	}
	return v
}

func newVersionCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the esjet version and the NATS versions it embeds",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			fmt.Fprintf(g.stdout, "esjet %s\n  nats-server %s (embedded)\n  nats.go %s\n  %s %s/%s\n",
				version(), server.VERSION, nats.Version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
			return nil
		},
	}
}
