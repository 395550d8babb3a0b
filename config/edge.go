package config

import (
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Values of [Edge.Role].
const (
	EdgeNone = ""     // a node on its own (or a client of one cluster)
	EdgeSite = "site" // an edge site: a leaf node of the hub, with its own streams
	EdgeHub  = "hub"  // the hub: aggregates the sites' events, runs the hub kinds
)

// Edge configures a fleet of edge sites and their hub (docs/edge.md).
// One file can serve the whole fleet: the hub and every site share sites,
// owners, hub_kinds and hub_domain; each process sets its role (and a site
// its site id, e.g. with ESJET_EDGE_ROLE and ESJET_EDGE_SITE).
type Edge struct {
	// Role is "" (no edge: default), "site" or "hub". Both need nats.mode
	// "embedded".
	Role string `yaml:"role"`
	// Site is this site's id (role site): it becomes the embedded server's
	// name and its JetStream domain, so it must be unique in the fleet and
	// never change (the hub finds the site's streams by it). 1-32
	// characters of a-z, 0-9, '_' and '-'.
	Site string `yaml:"site"`
	// HubDomain is the hub's JetStream domain. Default "hub".
	HubDomain string `yaml:"hub_domain"`
	// HubURLs are the hub's leaf node URLs (role site), e.g.
	// nats-leaf://hub.example:7422 (schemes nats-leaf, nats, tls, ws, wss).
	HubURLs []string `yaml:"hub_urls"`
	// LeafListen is the hub's leaf node listener (role hub), host:port. A
	// host beyond loopback needs Auth and TLS. Default "127.0.0.1:7422".
	LeafListen string `yaml:"leaf_listen"`
	// CredentialsFile is a NATS .creds file a site presents to the hub.
	CredentialsFile string `yaml:"credentials_file"`
	// Auth is the user and password a site presents on the leaf link (its
	// own, when the hub lists it in LeafUsers). At the hub without
	// LeafUsers it is the one user every site shares (kept for older
	// fleets: the sites then share one set of permissions, see LeafUsers).
	// Empty: a site presents its site id, without a password, and the hub
	// takes the name as the site's (loopback only).
	Auth Auth `yaml:"auth"`
	// LeafUsers are the sites' own credentials on the hub's leaf listener
	// (role hub): each site authenticates as its own user and may use the
	// link only for what its sourcing and its outcome pull need
	// (docs/edge.md). List every site of Sites once. Empty: the hub
	// authenticates no site by its own secret (see Auth). Set in the file
	// only.
	LeafUsers []LeafUser `yaml:"leaf_users"`
	// TLS of the leaf link: the hub serves CertFile/KeyFile (and requires
	// client certificates signed by CAFile when set); a site verifies the
	// hub with CAFile and presents CertFile/KeyFile when set.
	TLS TLS `yaml:"tls"`
	// Sites are the site ids the hub aggregates (role hub). A site added
	// later delivers its whole backlog, from its first event.
	Sites []string `yaml:"sites"`
	// HubKinds are the command kinds that run at the hub (a target only the
	// hub can reach): a site keeps them in its OUTBOX until the hub takes
	// them, and their outcomes come back to the issuing aggregate at the
	// site. Every other kind runs at the site that issued it. A workers
	// entry (or Go handler) of a kind that runs elsewhere is ignored, so one
	// file can configure the workers of the hub and of the sites.
	HubKinds []string `yaml:"hub_kinds"`
	// Owners say which site writes which aggregate: the first rule whose
	// types contain the aggregate's type (or that lists no types) and whose
	// id_prefix starts its id. A write anywhere else is refused. Without a
	// matching rule an aggregate is owned by the site whose id followed by
	// "-" starts its id ("shop1-42" by shop1). Set in the file only.
	Owners []Owner `yaml:"owners"`
	// StallAfter flags a site whose events lag at the hub and made no
	// progress for that long. Default 2m.
	StallAfter Duration `yaml:"stall_after"`
}

// LeafUser is one site's credentials on the hub's leaf listener
// ([Edge.LeafUsers]).
type LeafUser struct {
	// Site is the site the user is (one of [Edge.Sites]).
	Site string `yaml:"site"`
	// User is the name the site presents (its edge.auth.user). Default:
	// the site id.
	User string `yaml:"user"`
	// Password is a bcrypt hash ("$2a$…", from `nats server passwd`) of
	// the password the site presents (its edge.auth.password); plaintext
	// only with nats.embedded.allow_plaintext_passwords.
	Password string `yaml:"password"`
}

// Name is the user name the site presents: User, or the site id.
func (u LeafUser) Name() string {
	if u.User != "" {
		return u.User
	}
	return u.Site
}

// Owner is one ownership rule of [Edge.Owners].
type Owner struct {
	// Site owns the aggregates the rule matches.
	Site string `yaml:"site"`
	// Types the rule matches; empty: every type.
	Types []string `yaml:"types"`
	// IDPrefix an aggregate id must start with; empty: every id.
	IDPrefix string `yaml:"id_prefix"`
}

// DefaultEdge is the edge section's defaults.
func DefaultEdge() Edge {
	return Edge{
		HubDomain:  "hub",
		HubURLs:    []string{},
		LeafListen: "127.0.0.1:7422",
		Sites:      []string{},
		LeafUsers:  []LeafUser{},
		HubKinds:   []string{},
		Owners:     []Owner{},
		StallAfter: Duration(2 * time.Minute),
	}
}

// OwnerOf is the site that writes aggregate typ/id under the rules e
// states, "" when none of them nor the "<site>-" id prefix names one.
func (e Edge) OwnerOf(typ, id string) string {
	for _, o := range e.Owners {
		if (len(o.Types) == 0 || slices.Contains(o.Types, typ)) && strings.HasPrefix(id, o.IDPrefix) {
			return o.Site
		}
	}
	if site, _, ok := strings.Cut(id, "-"); ok && site != "" && (site == e.Site || slices.Contains(e.Sites, site)) {
		return site
	}
	return ""
}

// IsHubKind reports whether command kind runs at the hub.
func (e Edge) IsHubKind(kind string) bool { return slices.Contains(e.HubKinds, kind) }

var sitePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,31}$`)

const siteRule = "use 1-32 characters of a-z, 0-9, '_' and '-', starting with a letter or digit (it becomes a JetStream domain and server name)"

func (c *Config) validateEdge(v *validator) {
	e := &c.Edge
	v.oneOf("edge.role", e.Role, EdgeNone, EdgeSite, EdgeHub)
	if e.Role == EdgeNone {
		if v.tool {
			return // a fleet's shared file: each node sets its role
		}
		// An edge block without a role would be ignored: say so.
		for _, f := range []struct {
			path string
			set  bool
		}{
			{"edge.site", e.Site != ""}, {"edge.hub_urls", len(e.HubURLs) > 0}, {"edge.sites", len(e.Sites) > 0},
			{"edge.hub_kinds", len(e.HubKinds) > 0}, {"edge.owners", len(e.Owners) > 0},
		} {
			if f.set {
				v.add(f.path, nil, `is set but has no effect without edge.role: set edge.role to "site" or "hub" (ESJET_EDGE_ROLE, for a fleet's shared file), or remove it`)
			}
		}
		return
	}
	if c.NATS.Mode != ModeEmbedded {
		v.add("nats.mode", c.NATS.Mode, fmt.Sprintf("edge.role %q runs on the node's own embedded server: use nats.mode \"embedded\"", e.Role))
	}
	if !sitePattern.MatchString(e.HubDomain) {
		v.add("edge.hub_domain", e.HubDomain, siteRule)
	}
	for i, s := range e.Sites {
		switch {
		case !sitePattern.MatchString(s):
			v.add(fmt.Sprintf("edge.sites[%d]", i), s, siteRule)
		case s == e.HubDomain:
			v.add(fmt.Sprintf("edge.sites[%d]", i), s, "is the hub's domain (edge.hub_domain): give the site another id")
		case slices.Index(e.Sites, s) != i:
			v.add(fmt.Sprintf("edge.sites[%d]", i), s, "listed twice; list each site once")
		}
	}
	for i, kind := range e.HubKinds {
		if !kindPattern.MatchString(kind) {
			v.add(fmt.Sprintf("edge.hub_kinds[%d]", i), kind, "a command kind is 1-128 characters of A-Z a-z 0-9 _ -")
		}
	}
	for i, o := range e.Owners {
		if !sitePattern.MatchString(o.Site) {
			v.add(fmt.Sprintf("edge.owners[%d].site", i), o.Site, siteRule)
		}
	}
	if e.StallAfter < Duration(10*time.Second) {
		v.add("edge.stall_after", e.StallAfter, "must be at least 10s (the hub restarts a stalled source at most every 10s)")
	}
	v.auth("edge.auth", e.Auth)
	if e.Auth.Token != "" {
		v.add("edge.auth.token", redacted, "the leaf link takes a user and password (or credentials_file), not a token")
	}
	v.tls("edge.tls", e.TLS)
	switch e.Role {
	case EdgeSite:
		c.validateSite(v)
	case EdgeHub:
		c.validateHub(v)
	}
}

func (c *Config) validateSite(v *validator) {
	e := &c.Edge
	if e.Site == "" {
		v.add("edge.site", nil, fmt.Sprintf(`the site role needs the site's id: set edge.site in the config or %s, e.g. shop1 (%s)`, EnvName("edge.site"), strings.TrimPrefix(siteRule, "use ")))
	} else if !sitePattern.MatchString(e.Site) {
		v.add("edge.site", e.Site, siteRule)
	} else if e.Site == e.HubDomain {
		v.add("edge.site", e.Site, "is the hub's domain (edge.hub_domain): give the site another id")
	}
	if sn := c.NATS.Embedded.ServerName; sn != e.Site && sn != Default().NATS.Embedded.ServerName {
		v.add("nats.embedded.server_name", sn, fmt.Sprintf("an edge site's server name is its site id %q: leave server_name unset or set it to the site id", e.Site))
	}
	if len(e.Sites) > 0 && e.Site != "" && !slices.Contains(e.Sites, e.Site) {
		// A fleet's shared file lists the hub's sites: the hub has no leaf
		// user for another id and refuses its link, over and over.
		v.add("edge.site", e.Site, fmt.Sprintf("is not in edge.sites %v, so the hub would refuse its link: add it to edge.sites (and restart the hub), or fix the id", e.Sites))
	}
	if len(e.HubURLs) == 0 {
		v.add("edge.hub_urls", nil, "a site needs the hub's leaf node URL, e.g. nats-leaf://hub.example:7422")
	}
	for i, raw := range e.HubURLs {
		u, err := url.Parse(raw)
		if err != nil || u.Host == "" || u.Port() == "" {
			v.add(fmt.Sprintf("edge.hub_urls[%d]", i), RedactURL(raw), "use a URL like nats-leaf://hub.example:7422")
			continue
		}
		switch u.Scheme {
		case "nats-leaf", "nats", "tls", "ws", "wss":
		default:
			v.add(fmt.Sprintf("edge.hub_urls[%d]", i), RedactURL(raw), "use the scheme nats-leaf, tls, ws or wss")
		}
		if e.Auth.Password != "" && !isLoopback(u.Hostname()) && u.Scheme != "tls" && u.Scheme != "wss" && e.TLS.CAFile == "" {
			v.add(fmt.Sprintf("edge.hub_urls[%d]", i), RedactURL(raw), "the leaf link's password would travel unencrypted: use a tls:// URL or edge.tls.ca_file")
		}
	}
}

func (c *Config) validateHub(v *validator) {
	e := &c.Edge
	if e.Site != "" {
		v.add("edge.site", e.Site, "the hub is not a site: leave edge.site empty (its domain is edge.hub_domain)")
	}
	if sn := c.NATS.Embedded.ServerName; sn != e.HubDomain && sn != Default().NATS.Embedded.ServerName {
		v.add("nats.embedded.server_name", sn, fmt.Sprintf("the hub's server name is its domain %q: leave server_name unset or set it to edge.hub_domain", e.HubDomain))
	}
	if len(e.Sites) == 0 {
		v.add("edge.sites", nil, "the hub needs the ids of the sites it aggregates")
	}
	if c.NATS.Embedded.Auth.Token != "" {
		v.add("nats.embedded.auth.token", redacted, "the hub's leaf users (one per site, with its permissions) are users of its server, which then cannot take a token: use nats.embedded.auth user and password, or nats.embedded.users")
	}
	c.validateLeafUsers(v)
	for i, o := range e.Owners {
		if !slices.Contains(e.Sites, o.Site) {
			v.add(fmt.Sprintf("edge.owners[%d].site", i), o.Site, "is not in edge.sites: add it there, or fix the rule")
		}
	}
	if host, ok := v.listen("edge.leaf_listen", e.LeafListen); ok {
		if e.LeafListen == ListenNone {
			v.add("edge.leaf_listen", e.LeafListen, "the hub needs a leaf node listener for its sites")
		} else if !isLoopback(host) && ((!e.Auth.set() && len(e.LeafUsers) == 0) || e.TLS.CertFile == "") {
			v.add("edge.leaf_listen", e.LeafListen, "a leaf listener beyond loopback needs edge.leaf_users (or a shared edge.auth) and edge.tls (cert_file, key_file): set them, or listen on 127.0.0.1")
		}
	}
}

// validateLeafUsers checks the hub's per-site leaf users: one per site of
// edge.sites, each with a bcrypt hash, names unique, and no shared
// edge.auth beside them (which user would a site be?).
func (c *Config) validateLeafUsers(v *validator) {
	e := &c.Edge
	if len(e.LeafUsers) == 0 {
		return
	}
	if e.Auth.User != "" {
		v.add("edge.auth", nil, "the hub with edge.leaf_users authenticates each site as its own user: remove the shared edge.auth from the hub's config (each site presents its own)")
	}
	names := map[string]bool{}
	for i, u := range e.LeafUsers {
		path := fmt.Sprintf("edge.leaf_users[%d]", i)
		switch {
		case !slices.Contains(e.Sites, u.Site):
			v.add(path+".site", u.Site, "is not in edge.sites: add it there, or fix the entry")
		case slices.IndexFunc(e.LeafUsers, func(o LeafUser) bool { return o.Site == u.Site }) != i:
			v.add(path+".site", u.Site, "has two leaf users: list each site once")
		}
		if names[u.Name()] {
			v.add(path+".user", u.Name(), "is another site's user name: give each site its own")
		}
		names[u.Name()] = true
		switch {
		case u.Password == "":
			v.add(path+".password", nil, "set the bcrypt hash of the site's password (nats server passwd)")
		case !bcryptPattern.MatchString(u.Password) && !c.NATS.Embedded.AllowPlaintextPasswords:
			v.add(path+".password", redacted, "is not a bcrypt hash: hash the site's password with nats server passwd (or set nats.embedded.allow_plaintext_passwords)")
		}
	}
	for _, s := range e.Sites {
		if !slices.ContainsFunc(e.LeafUsers, func(u LeafUser) bool { return u.Site == s }) {
			v.add("edge.leaf_users", nil, fmt.Sprintf("site %q has no leaf user: with edge.leaf_users every site of edge.sites needs one", s))
		}
	}
}
