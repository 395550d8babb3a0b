package broker

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/esjet/esjet/config"
)

// The demo services' subjects and receiver bucket (package demo/services,
// which the broker does not import): a node running them in-process serves
// and writes these.
const (
	DemoSubjects = "demo.svc.>"
	DemoBucket   = "demo_services_receipts"
)

// NodeSpec is what the node role of cfg derives from: the namespace, the
// subjects of its nats workers (cfg.Workers as the node runs them), the
// demo services when it runs them in-process, and the views it runs (the
// names of its projections with the built-in store).
func NodeSpec(cfg config.Config, views ...string) RoleSpec {
	spec := RoleSpec{Namespace: cfg.Namespace, Views: slices.Clone(views)}
	seen := map[string]bool{}
	for _, w := range cfg.Workers {
		if w.Target == config.TargetNATS {
			seen[w.Subject] = true
		}
	}
	spec.Targets = slices.Sorted(maps.Keys(seen))
	spec.Targets = append(spec.Targets, EdgeSubjects(cfg)...)
	if cfg.Demo.Services {
		spec.Targets = append(spec.Targets, DemoSubjects)
		spec.Buckets = []string{DemoBucket}
	}
	return spec
}

// UserSpec is what the permissions of a configured user derive from; views
// are the node's (see [NodeSpec]).
func UserSpec(cfg config.Config, u config.User, views ...string) RoleSpec {
	if u.Role == config.RoleNode {
		return NodeSpec(cfg, views...)
	}
	spec := RoleSpec{Namespace: cfg.Namespace, Subject: u.Subject, Bucket: u.Bucket, User: u.Name, Views: slices.Clone(views)}
	if u.NKey != "" {
		spec.User = u.NKey // what the server authenticates an nkey user as
	}
	return spec
}

// addUsers gives the embedded server the users of nats.embedded.users, each
// with its role's permissions in its role's account ([Accounts]), and a node
// user known only to this process: a fresh nkey whose seed never leaves
// memory. It returns the option that connects as that node user, or nil
// when there are no users (the server then has nats.embedded.auth, if any,
// as its one user). views are the node's read models (see [NodeSpec]).
func addUsers(cfg config.Config, views []string, opts *server.Options) (nats.Option, error) {
	e := cfg.NATS.Embedded
	if len(e.Users) == 0 {
		return nil, nil
	}
	opts.Username, opts.Password, opts.Authorization = "", "", ""
	var users []RoleUser
	for _, u := range e.Users {
		if u.Role == RoleReceiver && cfg.Demo.Services && strings.HasPrefix(u.Subject, strings.TrimSuffix(DemoSubjects, ">")) {
			return nil, fmt.Errorf("nats.embedded.users %s: %w: subject %s is one the node's in-process demo services serve (demo.services: true): the command would run twice; turn them off or give the receiver another subject", u.Name, ErrRole, u.Subject)
		}
		spec := UserSpec(cfg, u, views...)
		p, err := RolePermissions(u.Role, spec)
		if err != nil {
			return nil, fmt.Errorf("nats.embedded.users %s: %w", u.Name, err)
		}
		name := u.Name
		if u.NKey != "" {
			name = u.NKey
		}
		users = append(users, RoleUser{Name: name, Role: u.Role, Permissions: p, Subject: u.Subject, Bucket: u.Bucket, Password: u.Password, NKey: u.NKey})
	}
	kp, err := nkeys.CreateUser()
	if err != nil {
		return nil, fmt.Errorf("node key: %w", err)
	}
	pub, err := kp.PublicKey()
	if err != nil {
		return nil, fmt.Errorf("node key: %w", err)
	}
	p, err := RolePermissions(RoleNode, NodeSpec(cfg, views...))
	if err != nil {
		return nil, err
	}
	users = append(users, RoleUser{Name: pub, Role: RoleNode, Permissions: p, NKey: pub})
	accounts, err := Accounts(cfg.Namespace, users)
	if err == nil {
		accounts, err = WithLeafAccount(accounts, cfg, true) // a hub's sites
	}
	if err != nil {
		return nil, fmt.Errorf("nats.embedded.users: %w", err)
	}
	// The same text `esjet permissions` prints, read by nats-server's own
	// parser: one description of the accounts, whichever server runs them.
	parsed := &server.Options{}
	if err := parsed.ProcessConfigString(ServerAccounts(accounts)); err != nil {
		return nil, fmt.Errorf("nats.embedded.users: accounts: %w", err)
	}
	opts.Accounts, opts.Users, opts.Nkeys = parsed.Accounts, parsed.Users, parsed.Nkeys
	return nats.Nkey(pub, kp.Sign), nil
}
