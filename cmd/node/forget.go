package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/esjet/esjet/internal/node"
)

func newForgetCmd(g *globals) *cobra.Command {
	var asJSON, rotate bool
	cmd := &cobra.Command{
		Use:   "forget <data subject>",
		Short: "Forget a person: destroy the data keys of their personal data (crypto-shredding)",
		Long: `Personal fields of events, commands and snapshots are stored sealed under
data keys of their data subject (docs/personal-data.md). forget asks a node to
destroy the subject's keys: it records a tombstone (who, when, which key
versions: the audit, kept in the keys bucket) and erases each key on disk. From
then on every read shows the subject's personal fields as null, listed in the
data's "esjet:erased" member; other fields and the history stay. It cannot be
undone. A value written for the subject later is sealed under a new key.

--rotate makes a new key version instead: new values are sealed under it, old
ones stay readable with theirs until the subject is forgotten.

The CLI asks a node on esjet.<ns>.ops.<user>.personal.<forget|rotate>, where the
node records the user. The reply and the node's log name the subject by its
ref (a keyed digest), never by the id you gave.`,
		Example: `  esjet forget ann
  esjet forget --rotate ann`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			action := "forget"
			if rotate {
				action = "rotate"
			}
			body, _ := json.Marshal(node.PersonalAction{Subject: args[0]})
			data, err := g.opsCall(cmd, "personal."+action, body)
			if err != nil {
				return err
			}
			var rep node.PersonalReply
			if err := json.Unmarshal(data, &rep); err != nil {
				return err
			}
			if asJSON {
				return json.NewEncoder(g.stdout).Encode(rep)
			}
			if rotate {
				fmt.Fprintf(g.stdout, "rotated subject %s: new values are sealed under key version %d\n", rep.Ref, rep.Version)
				return nil
			}
			t := rep.Tombstone
			keys := fmt.Sprintf("key versions 1-%d", t.Through)
			if t.Through <= 1 {
				keys = fmt.Sprintf("key version %d", t.Through)
			}
			fmt.Fprintf(g.stdout, "forgot subject %s: %s destroyed (%d erased on disk now) by %s at %s; its personal fields read as erased\n",
				rep.Ref, keys, t.Erased, t.By, t.At.Format(time.RFC3339))
			if len(rep.ViewsReset) > 0 {
				fmt.Fprintf(g.stdout, "views reset, refilling from the log: %s\n", strings.Join(rep.ViewsReset, ", "))
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().BoolVar(&rotate, "rotate", false, "make a new key version instead of forgetting")
	return cmd
}
