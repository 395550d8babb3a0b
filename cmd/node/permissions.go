package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/esjet/esjet/config"
	"github.com/esjet/esjet/demo/trip"
	"github.com/esjet/esjet/internal/broker"
	"github.com/esjet/esjet/internal/projection"
)

type permissionsFlags struct {
	views   []string
	role    string
	subject string
	bucket  string
	format  string
}

func newPermissionsCmd(g *globals) *cobra.Command {
	f := &permissionsFlags{}
	cmd := &cobra.Command{
		Use:   "permissions",
		Short: "Print the NATS permissions of each role of a namespace (server config or user JWT)",
		Long: `Print the least-privilege NATS permissions of the roles that use a namespace,
derived from the config (namespace, workers' target subjects, demo services)
and the read models the node runs (the demo's views, and --view):

  node      runs the API, relay, workers and read models: the only role that
            may publish to <ns>.evt.>, <ns>.outbox.>, <ns>.schedule.>, <ns>.dlq.>,
            the <ns>_snapshots/<ns>_receipts buckets and the views' buckets
            (<ns>_projections, <ns>_view_<name> and its -b, -c), or serve the
            API's queue group; creates missing streams, never updates them
  client    calls the command and query API (esjet.<ns>.>, views included)
  receiver  serves one target subject and replies (one per nats worker
            subject, or --subject), from an account of its own
  operator  reads streams, consumers, state, history and views; asks the node
            to retry or discard dead letters, or to act on a projection, on its
            own esjet.<ns>.ops.<user>.> only
  admin     everything, including esjet provision and deleting streams

Only node and admin share an account (ESJET_<NS>) with the streams; clients
(ESJET_<NS>_CLIENTS), operators (ESJET_<NS>_OPS) and each receiver reach the
node through service imports, and every user receives replies on its own
_INBOX_<user> prefix (nats --inbox-prefix).

At an edge hub (edge.role hub) it also prints each site's leaf user: allowed
only leaf node connections, with what the site may do across the link
(docs/edge.md).

--format server prints a nats-server accounts block (the roles' accounts, their
imports and users): each password is
read from the environment variable named beside it (set it to a bcrypt hash,
nats server passwd). --format json prints the permissions to put in each
user's JWT (nsc edit user, or an auth callout).`,
		Example: `  esjet permissions --namespace trips > auth.conf
  esjet permissions --namespace trips --role client --format json
  esjet permissions --role receiver --subject billing.charge --bucket billing_keys
  esjet permissions --namespace shop --view orders_by_status --view revenue`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := g.load(cmd.Flags())
			if err != nil {
				return err
			}
			return printPermissions(g, cfg, f)
		},
	}
	fl := cmd.Flags()
	fl.StringSliceVar(&f.views, "view", nil, "a read model your node runs besides the demo's (its projection's name; repeat, or comma-separate)")
	fl.StringVar(&f.role, "role", "", "print only this role: "+strings.Join(broker.Roles, ", "))
	fl.StringVar(&f.subject, "subject", "", "the receiver's one subject (default: one receiver per nats worker subject)")
	fl.StringVar(&f.bucket, "bucket", "", "the receiver's idempotency KV bucket, if it keeps one")
	fl.StringVar(&f.format, "format", "server", `"server" (nats-server config) or "json" (user JWT permissions)`)
	return cmd
}

// nodeSpec is what the node role derives from the config: the subjects its
// workers request (with the trip's routes, as esjet run adds them), the
// demo services it may run in-process, and the views it runs: the trip's
// (esjet run runs them) and views.
func nodeSpec(cfg config.Config, views []string) (broker.RoleSpec, error) {
	cfg.Workers = tripRoutes(cfg)
	names := []string{}
	for _, d := range trip.Views() {
		if d.Sink == nil {
			names = append(names, d.Name)
		}
	}
	for _, v := range views {
		if err := projection.ValidateName(v); err != nil {
			return broker.RoleSpec{}, fmt.Errorf("--view: %w", err)
		}
		if !slices.Contains(names, v) {
			names = append(names, v)
		}
	}
	return broker.NodeSpec(cfg, names...), nil
}

// workerSubjects are the distinct subjects of the nats workers `esjet run`
// starts, sorted.
func workerSubjects(cfg config.Config) []string {
	seen := map[string]bool{}
	for _, w := range tripRoutes(cfg) {
		if w.Target == config.TargetNATS {
			seen[w.Subject] = true
		}
	}
	return slices.Sorted(maps.Keys(seen))
}

// roleUsers are the users to print: one per role, receivers one per subject.
func roleUsers(cfg config.Config, f *permissionsFlags) ([]broker.RoleUser, error) {
	roles := broker.Roles
	if f.role != "" {
		if !slices.Contains(broker.Roles, f.role) {
			return nil, fmt.Errorf("--role %q: %w: use %s", f.role, broker.ErrRole, strings.Join(broker.Roles, ", "))
		}
		roles = []string{f.role}
	}
	var users []broker.RoleUser
	add := func(name, role string, spec broker.RoleSpec) error {
		spec.User = name
		p, err := broker.RolePermissions(role, spec)
		if err != nil {
			return err
		}
		users = append(users, broker.RoleUser{Name: name, Role: role, Permissions: p, Subject: spec.Subject, Bucket: spec.Bucket})
		return nil
	}
	nspec, err := nodeSpec(cfg, f.views)
	if err != nil {
		return nil, err
	}
	for _, role := range roles {
		spec := nspec
		name := cfg.Namespace + "-" + role
		if role != broker.RoleReceiver {
			if err := add(name, role, spec); err != nil {
				return nil, err
			}
			continue
		}
		spec = broker.RoleSpec{Namespace: cfg.Namespace, Subject: f.subject, Bucket: f.bucket}
		if f.subject != "" {
			if err := add(name, role, spec); err != nil {
				return nil, err
			}
			continue
		}
		for _, s := range workerSubjects(cfg) {
			spec.Subject = s
			if err := add(name+"-"+strings.ReplaceAll(s, ".", "-"), role, spec); err != nil {
				return nil, err
			}
		}
	}
	return users, nil
}

type permissionsJSON struct {
	Namespace string          `json:"namespace"`
	Accounts  []accountJSON   `json:"accounts"`
	Users     []userPermsJSON `json:"users"`
	// LeafUsers are a hub's sites on its leaf listener (edge.role hub).
	LeafUsers []leafPermsJSON `json:"leaf_users,omitempty"`
}

type leafPermsJSON struct {
	User        string                `json:"user"`
	Sites       []string              `json:"sites"`
	Permissions broker.JWTPermissions `json:"permissions"`
}

// accountJSON is what an account's JWT needs (nsc add account, nsc add
// export/import, nsc edit account --js-enable).
type accountJSON struct {
	Name      string          `json:"name"`
	JetStream bool            `json:"jetstream"`
	Exports   []broker.Export `json:"exports,omitempty"`
	Imports   []broker.Import `json:"imports,omitempty"`
}

type userPermsJSON struct {
	User        string                `json:"user"`
	Role        string                `json:"role"`
	Account     string                `json:"account"`
	Permissions broker.JWTPermissions `json:"permissions"`
}

func printPermissions(g *globals, cfg config.Config, f *permissionsFlags) error {
	if f.format != "server" && f.format != "json" {
		return fmt.Errorf(`--format %q: use "server" or "json"`, f.format)
	}
	users, err := roleUsers(cfg, f)
	if err != nil {
		return err
	}
	accounts, err := broker.Accounts(cfg.Namespace, users)
	if err == nil && f.role == "" {
		// A hub's leaf users, in the leaf account (broker.WithLeafAccount).
		accounts, err = broker.WithLeafAccount(accounts, cfg, false)
	}
	if err != nil {
		return err
	}
	if f.format == "json" {
		out := permissionsJSON{Namespace: cfg.Namespace}
		for _, a := range accounts {
			out.Accounts = append(out.Accounts, accountJSON{Name: a.Name, JetStream: a.JetStream, Exports: a.Exports, Imports: a.Imports})
			for _, u := range a.Users {
				if a.Name == broker.LeafAccount(cfg.Namespace) {
					continue // in leaf_users
				}
				out.Users = append(out.Users, userPermsJSON{User: u.Name, Role: u.Role, Account: a.Name, Permissions: broker.ToJWT(u.Permissions)})
			}
		}
		if f.role == "" {
			for _, u := range broker.LeafUsers(cfg) {
				out.LeafUsers = append(out.LeafUsers, leafPermsJSON{User: u.Name, Sites: u.Sites, Permissions: broker.ToJWT(u.Permissions)})
			}
		}
		enc := json.NewEncoder(g.stdout)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		return enc.Encode(out)
	}
	fmt.Fprintf(g.stdout, "# esjet accounts and roles for namespace %s (esjet %s permissions). Only node and admin\n", cfg.Namespace, version())
	fmt.Fprintf(g.stdout, "# share %s with the streams; clients and operators reach the node's API\n", broker.NamespaceAccount(cfg.Namespace))
	fmt.Fprintf(g.stdout, "# from %s and %s, each receiver serves from an account of its own.\n", broker.ClientsAccount(cfg.Namespace), broker.OperatorsAccount(cfg.Namespace))
	fmt.Fprintf(g.stdout, "# Before the server starts, set each password variable to a bcrypt hash (nats server passwd):\n")
	for _, u := range users {
		fmt.Fprintf(g.stdout, "#   %s  (user %s, role %s)\n", broker.PasswordVar(u.Name), u.Name, u.Role)
	}
	text := broker.ServerAccounts(accounts)
	if leaf := broker.LeafUsers(cfg); len(leaf) > 0 && f.role == "" {
		fmt.Fprintf(g.stdout, "# and the hub's leaf users, one per site, in %s, an account without JetStream (seen from the hub,\n", broker.LeafAccount(cfg.Namespace))
		fmt.Fprintf(g.stdout, "# publish is what a site may send in, subscribe what it is sent; the embedded hub runs them):\n")
		for _, u := range leaf {
			if u.Password != "" {
				fmt.Fprintf(g.stdout, "#   %s  (leaf user %s, site %s)\n", broker.PasswordVar(u.Name), u.Name, strings.Join(u.Sites, ", "))
			}
		}
	}
	_, err = fmt.Fprint(g.stdout, text)
	return err
}
