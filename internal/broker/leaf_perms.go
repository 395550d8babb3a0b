package broker

import (
	"errors"
	"fmt"
	"slices"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"

	"github.com/esjet/esjet/config"
	"github.com/esjet/esjet/internal/wire"
)

// LeafUser is one user of the hub's leaf node listener: the site (or, in a
// fleet without edge.leaf_users and with a shared edge.auth, every site)
// that connects as it, and what it may do across the link.
//
// Leaf users live in the hub server's main users list, in the leaf account
// ([LeafAccount], apart from the hub's streams: [WithLeafAccount]),
// allowed only leaf node connections: nats-server applies no permissions to the users of a
// leafnodes authorization block (opts.go parseLeafUsers, auth.go
// isLeafNodeAuthorized, v2.15.2), but it does apply a main user's to the
// leaf connection that authenticates as it, seen from the hub: Publish is
// what the site may send into the hub, Subscribe what the hub sends to the
// site (leafnode.go swaps them for the remote's own view).
type LeafUser struct {
	Name string
	// Password is as configured: a bcrypt hash, or "" (a site in a
	// loopback fleet without credentials presents its id only).
	Password    string
	Sites       []string
	Permissions *server.Permissions
}

// localUser is who a client without credentials is at a hub that has leaf
// users but no client users (the loopback quickstart): everything, as
// before, on client connections only.
const localUser = "esjet-local"

// ErrLeafTokenAuth is returned for a hub whose clients authenticate with a
// token: the leaf users are users of the same server, which nats-server
// cannot combine with a token.
var ErrLeafTokenAuth = errors.New("broker: the hub's leaf users cannot be combined with nats.embedded.auth.token: use a user and password, or nats.embedded.users")

// OutcomeConsumer is the durable consumer on the hub's OUTCOMES from which
// site pulls the outcomes the hub recorded for it. The hub creates it (a
// site may not create consumers at the hub).
func OutcomeConsumer(site string) string { return "esjet_site_" + site }

// SourceDeliverPrefix is where a site's source consumers deliver what the
// hub sources from it: a prefix of the site's own, so that the hub can let
// each site deliver its own streams and no other site's (the default,
// $JS.S.<random>, is one space for every site).
func SourceDeliverPrefix(ns, site string) string { return "esjet-edge." + ns + ".src." + site }

// NodeInbox is the node's reply subject prefix (nats.CustomInboxPrefix):
// in an edge fleet it names the server (the site id, or the hub domain),
// so that the hub sends each site the replies to its own requests only.
func NodeInbox(cfg config.Config) string {
	switch cfg.Edge.Role {
	case config.EdgeSite:
		return NodeInboxPrefix(cfg.Namespace) + "." + cfg.Edge.Site
	case config.EdgeHub:
		return NodeInboxPrefix(cfg.Namespace) + "." + cfg.Edge.HubDomain
	}
	return NodeInboxPrefix(cfg.Namespace)
}

// LeafPermissions are what sites may do across the leaf link, from the
// hub's point of view, and nothing else:
//
//   - into the hub (Publish): look up and pull its own outcome consumer
//     (CONSUMER.INFO and CONSUMER.MSG.NEXT of OutcomeConsumer(site) on
//     <NS>_OUTCOMES, on [HubAPIPrefix]) and ack what it pulled; deliver
//     what the hub sources from it (its source consumers' messages,
//     heartbeats and flow control, under SourceDeliverPrefix); answer the
//     hub's requests (on the _R_.… reply subjects the server gives the
//     requests that reach the leaf account by an import).
//     Nothing of $JS.<hub>.API.> (no STREAM.DELETE, no DIRECT.GET of
//     the hub's log, no consumer create, no other site's consumer), no
//     other site's domain, and none of the namespace's subjects.
//     Permissions check a message's subject, not its reply subject, and
//     nats-server lets $JS.ACK.… and _R_.… from a leaf through unchecked:
//     the leaf account ([WithLeafAccount]) is what keeps a site's replies
//     and acks out of the hub's streams and consumers.
//   - to the site (Subscribe): the hub's requests into the site's own
//     JetStream that sourcing and the site monitor make (consumer create
//     and delete, and stream info, of the site's <NS>_EVENTS and
//     <NS>_OUTBOX), flow control replies to its source consumers, and
//     replies to the site node's own inbox. Not the rest of the site's API
//     (no stream delete, purge, update or direct get, no buckets), and no
//     other site's traffic. The hub stays trusted with the site: a
//     consumer create names its delivery subject, which can be any subject
//     at the site.
//
// With one site the permissions are that site's; with several (a shared
// edge.auth) the union, so sites that share a user can pull each other's
// outcomes.
func LeafPermissions(cfg config.Config, sites ...string) *server.Permissions {
	ns, hub := cfg.Namespace, cfg.Edge.HubDomain
	names := wire.NamesFor(ns)
	outcomes, events, outbox := names.Outcomes(), names.Events, names.Outbox
	// Replies to the hub's requests: they reach the site through the leaf
	// account's service exports (WithLeafAccount), so each carries a reply
	// subject the server made (_R_.<prefix>.<random>), which the server
	// carries back to the requester and nowhere else. (The site's server
	// enforces these permissions too, so they must allow it.)
	pub := []string{"_R_.>"}
	var sub []string
	for _, s := range sites {
		c := OutcomeConsumer(s)
		pub = append(pub,
			HubAPIPrefix(ns)+".CONSUMER.INFO."+outcomes+"."+c,
			HubAPIPrefix(ns)+".CONSUMER.MSG.NEXT."+outcomes+"."+c,
			"$JS.ACK."+outcomes+"."+c+".>",
			"$JS.ACK."+hub+".*."+outcomes+"."+c+".>",
			SourceDeliverPrefix(ns, s)+".>",
		)
		api := "$JS." + s + ".API."
		sub = append(sub,
			api+"CONSUMER.CREATE."+events, api+"CONSUMER.CREATE."+events+".>", api+"CONSUMER.DELETE."+events+".*", api+"STREAM.INFO."+events,
			api+"CONSUMER.CREATE."+outbox, api+"CONSUMER.CREATE."+outbox+".>", api+"CONSUMER.DELETE."+outbox+".*", api+"STREAM.INFO."+outbox,
			"$JS.FC."+events+".>", "$JS.FC."+outbox+".>", "$JS.FC."+s+".*."+events+".>", "$JS.FC."+s+".*."+outbox+".>",
			NodeInboxPrefix(ns)+"."+s+".>",
		)
	}
	dedup := func(l []string) []string { slices.Sort(l); return slices.Compact(l) }
	return &server.Permissions{
		Publish:   &server.SubjectPermission{Allow: dedup(pub)},
		Subscribe: &server.SubjectPermission{Allow: dedup(sub)},
	}
}

// LeafUsers are the users of the leaf listener of the hub cfg describes:
//   - with edge.leaf_users, each site's own user and password hash;
//   - without, and with a shared edge.auth, that one user for every site,
//     with the union of their permissions;
//   - without either (a loopback fleet), one user per site named by the
//     site id, without a password: a site presents its id, which names it
//     and does not authenticate it.
//
// It returns nil for any other node.
func LeafUsers(cfg config.Config) []LeafUser {
	e := cfg.Edge
	if e.Role != config.EdgeHub {
		return nil
	}
	var users []LeafUser
	switch {
	case len(e.LeafUsers) > 0:
		for _, u := range e.LeafUsers {
			users = append(users, LeafUser{Name: u.Name(), Password: u.Password, Sites: []string{u.Site}, Permissions: LeafPermissions(cfg, u.Site)})
		}
	case e.Auth.User != "":
		users = append(users, LeafUser{Name: e.Auth.User, Password: e.Auth.Password, Sites: slices.Clone(e.Sites), Permissions: LeafPermissions(cfg, e.Sites...)})
	default:
		for _, s := range e.Sites {
			users = append(users, LeafUser{Name: s, Sites: []string{s}, Permissions: LeafPermissions(cfg, s)})
		}
	}
	return users
}

var clientConnections = map[string]struct{}{
	jwt.ConnectionTypeStandard: {}, jwt.ConnectionTypeWebsocket: {}, jwt.ConnectionTypeMqtt: {},
	jwt.ConnectionTypeMqttWS: {}, jwt.ConnectionTypeInProcess: {},
}

// addLeafUsers gives a hub's server its leaf account and users
// ([WithLeafAccount]), and keeps every other user to client connections:
// the users of nats.embedded.users, the one user of nats.embedded.auth
// (moved into the users list, where nats-server wants it beside others),
// or, without either, a no-auth user that clients without credentials
// are, as before. With nats.embedded.users [addUsers] added the leaf
// account already; without, the hub's streams stay in the global account
// ($G, given JetStream here, as nats-server does only while it is the one
// account) and the leaf account is wired to it. Call it after [addUsers].
// It does nothing for any other node.
func addLeafUsers(cfg config.Config, opts *server.Options) error {
	if LeafUsers(cfg) == nil {
		return nil
	}
	if opts.Authorization != "" {
		return ErrLeafTokenAuth
	}
	for _, u := range opts.Users {
		if u.AllowedConnectionTypes == nil {
			u.AllowedConnectionTypes = clientConnections
		}
	}
	for _, u := range opts.Nkeys {
		if u.AllowedConnectionTypes == nil {
			u.AllowedConnectionTypes = clientConnections
		}
	}
	switch {
	case opts.Username != "":
		opts.Users = append(opts.Users, &server.User{Username: opts.Username, Password: opts.Password, AllowedConnectionTypes: clientConnections})
		opts.Username, opts.Password = "", ""
	case len(opts.Users) == 0 && len(opts.Nkeys) == 0:
		opts.Users = append(opts.Users, &server.User{Username: localUser, AllowedConnectionTypes: clientConnections})
		opts.NoAuthUser = localUser
	}
	if len(cfg.NATS.Embedded.Users) > 0 {
		return nil // addUsers placed them
	}
	accounts := []Account{{Name: globalAccount, JetStream: true}}
	for _, u := range opts.Users {
		accounts[0].Users = append(accounts[0].Users, RoleUser{Name: u.Username})
	}
	accounts, err := WithLeafAccount(accounts, cfg, true)
	if err != nil {
		return err
	}
	accounts[0].Users = nil // the client users above are opts' own
	// nats-server's config parser refuses to configure $G: parse it under
	// another name and rename it, which the server then merges into its
	// global account (server.go configureAccounts). Its exports and the
	// leaf account's are public (export approvals are kept by account
	// name): no account but these two and $SYS exists on this server.
	const stand = "ESJET_GLOBAL_ACCOUNT"
	for i := range accounts {
		if accounts[i].Name == globalAccount {
			accounts[i].Name = stand
		}
		for j := range accounts[i].Exports {
			accounts[i].Exports[j].To = nil
		}
		for j := range accounts[i].Imports {
			if accounts[i].Imports[j].From == globalAccount {
				accounts[i].Imports[j].From = stand
			}
		}
	}
	parsed := &server.Options{}
	if err := parsed.ProcessConfigString(ServerAccounts(accounts)); err != nil {
		return fmt.Errorf("edge leaf account: %w", err)
	}
	for _, a := range parsed.Accounts {
		if a.Name == stand {
			a.Name = globalAccount
		}
	}
	opts.Accounts = append(opts.Accounts, parsed.Accounts...)
	opts.Users = append(opts.Users, parsed.Users...)
	return nil
}
