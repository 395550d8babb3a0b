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

// version is the one version `esjet version` prints and the micro service
// reports (so it is semver, without the leading "v"): the link-time
// version, else the module version from the build info (a release or a
// pseudo-version), else the library version marked devel with the VCS
// revision and ".modified" for a dirty tree ("0.1.0-devel+3ffcbd2a1b2c.modified"),
// else "0.1.0-devel".
func version() string {
	bi, _ := debug.ReadBuildInfo()
	return versionFrom(buildVersion, bi)
}

func versionFrom(linked string, bi *debug.BuildInfo) string {
	if linked != "" {
		return strings.TrimPrefix(linked, "v")
	}
	if bi == nil {
		return esjet.Version + "-devel"
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return strings.TrimPrefix(v, "v")
	}
	var rev string
	var modified bool
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if rev == "" {
		return esjet.Version + "-devel"
	}
	v := esjet.Version + "-devel+" + rev[:min(12, len(rev))]
	if modified {
		v += ".modified"
	}
	return v
}

func newVersionCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the esjet version (the one the node's micro service reports) and the NATS versions it embeds",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			fmt.Fprintf(g.stdout, "esjet %s\n  nats-server %s (embedded)\n  nats.go %s\n  %s %s/%s\n",
				version(), server.VERSION, nats.Version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
			return nil
		},
	}
}

// semver is [version] under its older name (the bench command uses it).
func semver() string { return version() }
