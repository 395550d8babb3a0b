package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"

	"github.com/esjet/esjet/config"
	"github.com/esjet/esjet/internal/node"
)

// errSitesNeedAttention makes `esjet sites` exit 1 when a site is stalled
// or its store was recreated.
var errSitesNeedAttention = errors.New("a site needs attention (see its note)")

func newSitesCmd(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "sites",
		Short: "At the hub of an edge fleet: each site's link, lag and state",
		Long: `Ask the hub node the configuration describes (edge.role hub, reached like
esjet streams) how each site's events arrive: whether its link is up, the last
decision it recorded, the last one the hub holds, the lag between them, when
the hub last made progress, and a state:

  ok           connected, nothing to catch up
  catching_up  connected, the lag shrinking
  unreachable  link down: the site records on and the hub catches up later
  stalled      connected with lag and no progress for edge.stall_after; the hub
               restarts its source every 20s (docs/edge.md: if it stays
               stalled, restart the hub)
  recreated    the site's event log is not the one the hub sourced: its store
               was lost (docs/edge.md: re-provisioning a lost site)

It exits 1 when a site is stalled or recreated.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := g.load(cmd.Flags())
			if err != nil {
				return err
			}
			return g.showSites(cmd.Context(), cfg, asJSON)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON instead of a table")
	return cmd
}

func (g *globals) showSites(ctx context.Context, cfg config.Config, asJSON bool) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	nc, err := g.connect(ctx, cfg, "esjet sites")
	if err != nil {
		return err
	}
	defer nc.Close()
	msg, err := nc.RequestWithContext(ctx, node.SitesSubject(cfg.Namespace), nil)
	if errors.Is(err, nats.ErrNoResponders) {
		// The address is the likelier mistake once the namespace is right:
		// say which server was asked, and how to reach another.
		return fmt.Errorf("no hub of namespace %s answers %s at %s: run this against the hub node (edge.role hub): reach its server with --url (or --listen, its embedded server's address), and give its config file (--config fleet.yaml) or its namespace (--namespace)",
			cfg.Namespace, node.SitesSubject(cfg.Namespace), nc.ConnectedUrlRedacted())
	}
	if err != nil {
		return fmt.Errorf("ask the hub for its sites: %w", err)
	}
	var sites []node.SiteStatus
	if err := json.Unmarshal(msg.Data, &sites); err != nil {
		return fmt.Errorf("the hub's answer: %w", err)
	}
	if asJSON {
		enc := json.NewEncoder(g.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(sites); err != nil {
			return err
		}
	} else {
		printSites(g.stdout, sites)
	}
	for _, s := range sites {
		if s.State == node.SiteStalled || s.State == node.SiteRecreated {
			return errSitesNeedAttention
		}
	}
	return nil
}

func printSites(w io.Writer, sites []node.SiteStatus) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SITE\tSTATE\tLINK\tSITE SEQ\tHUB SEQ\tLAG\tLAST PROGRESS\tRESTARTS")
	for _, s := range sites {
		link := "down"
		if s.Connected {
			link = "up"
		}
		since := "-"
		if !s.LastProgress.IsZero() {
			since = time.Since(s.LastProgress).Round(time.Second).String() + " ago"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%s\t%d\n", s.Site, s.State, link, s.SiteLastSeq, s.HubSeq, s.Lag, since, s.Restarts)
	}
	_ = tw.Flush()
	for _, s := range sites {
		if s.Note != "" {
			fmt.Fprintf(w, "%s: %s\n", s.Site, s.Note)
		}
	}
}
