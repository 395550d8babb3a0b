package broker

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"

	"github.com/esjet/esjet/config"
)

// LeafUser is one user of the hub's leaf node listener: the site (or, in a
// fleet without edge.leaf_users and with a shared edge.auth, every site)
// that connects as it, and what it may do across the link.
//
// Leaf users live in the hub server's main users list (in the namespace
// account when the hub has users), allowed only leaf node connections: nats-server applies no permissions to the users of a
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
//     <NS>_OUTCOMES in the hub's domain) and ack what it pulled; deliver
//     what the hub sources from it (its source consumers' messages,
//     heartbeats and flow control, under SourceDeliverPrefix); answer the
//     hub's requests to its JetStream (replies to $JSC.R.* for the hub's
//     sourcing, and to the hub node's request inbox for the hub's site
//     monitor).
//     Nothing else of $JS.<hub>.API.> (no STREAM.DELETE, no DIRECT.GET of
//     the hub's log, no consumer create, no other site's consumer), no
//     other site's domain, and none of the namespace's subjects.
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
	NS := strings.ToUpper(ns)
	outcomes, events, outbox := NS+"_OUTCOMES", NS+"_EVENTS", NS+"_OUTBOX"
	// Replies to the hub's requests: its JetStream's own ($JSC.R.<token>)
	// and its node's request inbox (<inbox>.<nuid>.<token>), not the
	// node's pull subscriptions (<inbox>.<nuid>): a site cannot feed the
	// hub's workers.
	pub := []string{"$JSC.R.*", NodeInboxPrefix(ns) + "." + hub + ".*.*"}
	var sub []string
	for _, s := range sites {
		c := OutcomeConsumer(s)
		pub = append(pub,
			"$JS."+hub+".API.CONSUMER.INFO."+outcomes+"."+c,
			"$JS."+hub+".API.CONSUMER.MSG.NEXT."+outcomes+"."+c,
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

var (
	clientConnections = map[string]struct{}{
		jwt.ConnectionTypeStandard: {}, jwt.ConnectionTypeWebsocket: {}, jwt.ConnectionTypeMqtt: {},
		jwt.ConnectionTypeMqttWS: {}, jwt.ConnectionTypeInProcess: {},
	}
	leafConnections = map[string]struct{}{jwt.ConnectionTypeLeafnode: {}, jwt.ConnectionTypeLeafnodeWS: {}}
)

// addLeafUsers gives a hub's server its leaf users ([LeafUsers]), and
// keeps every other user to client connections: the users of
// nats.embedded.users, the one user of nats.embedded.auth (moved into the
// users list, where nats-server wants it beside others), or, without
// either, a no-auth user that clients without credentials are, as before.
// Call it after [addUsers]. It does nothing for any other node.
func addLeafUsers(cfg config.Config, opts *server.Options) error {
	leaf := LeafUsers(cfg)
	if leaf == nil {
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
	// With users, esjet's streams are in the namespace account, and so is
	// a site's leaf connection; without, everything is in the global one.
	var acc *server.Account
	if i := slices.IndexFunc(opts.Accounts, func(a *server.Account) bool { return a.Name == NamespaceAccount(cfg.Namespace) }); i >= 0 {
		acc = opts.Accounts[i]
	}
	for _, l := range leaf {
		if slices.ContainsFunc(opts.Users, func(u *server.User) bool { return u.Username == l.Name }) {
			return fmt.Errorf("edge leaf user %q is also a user of nats.embedded: give the site another user name", l.Name)
		}
		opts.Users = append(opts.Users, &server.User{Username: l.Name, Password: l.Password, Permissions: l.Permissions, AllowedConnectionTypes: leafConnections, Account: acc})
	}
	return nil
}

// WithLeafUsers adds the hub's leaf users ([LeafUsers]) to accounts, a
// nats-server accounts block ([ServerAccounts]): in the namespace account,
// the account of esjet's streams, which a site's leaf connection must be
// bound to. Each is allowed only leaf node connections, with its
// permissions seen from the hub (publish: what the site may send in;
// subscribe: what the hub sends it), and its password read from the
// environment variable [PasswordVar] names (a loopback fleet's site id has
// none). The embedded hub adds them itself; the text says what it runs,
// and is what a standalone hub's config needs (a leafnodes authorization
// block would apply no permissions). accounts unchanged when cfg is not a
// hub or has no namespace account.
func WithLeafUsers(accounts string, cfg config.Config) string {
	users := LeafUsers(cfg)
	head := "  " + strconv.Quote(NamespaceAccount(cfg.Namespace)) + ": {\n"
	i := strings.Index(accounts, head)
	if len(users) == 0 || i < 0 {
		return accounts
	}
	j := strings.Index(accounts[i:], "    users: [\n")
	if j < 0 {
		return accounts
	}
	at := i + j + len("    users: [\n")
	var b strings.Builder
	for _, u := range users {
		fmt.Fprintf(&b, "      # leaf node of site %s\n      {\n        user: %q\n", strings.Join(u.Sites, ", "), u.Name)
		if u.Password != "" {
			fmt.Fprintf(&b, "        password: $%s\n", PasswordVar(u.Name))
		}
		b.WriteString("        allowed_connection_types: [\"LEAFNODE\", \"LEAFNODE_WS\"]\n        permissions: {\n")
		writeSubjectPerm(&b, "publish", u.Permissions.Publish)
		writeSubjectPerm(&b, "subscribe", u.Permissions.Subscribe)
		b.WriteString("        }\n      }\n")
	}
	return accounts[:at] + b.String() + accounts[at:]
}
