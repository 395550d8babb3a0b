package broker

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/esjet/esjet/config"
	"github.com/esjet/esjet/internal/wire"
)

// leafReconnect is how soon a site dials the hub again after the link
// dropped (nats-server's default is 1s too; set so the resume budget does
// not depend on it).
const leafReconnect = time.Second

// LeafDenies are the subjects that must not cross the leaf link between a
// site and its hub, in either direction: every subject the namespace's
// streams and buckets capture (the site and the hub each have streams on
// them, and without the deny every event would be stored on both sides and
// some publishes acknowledged by the wrong one: nats-server #4148, #6468,
// #7530), the node's API and micro discovery (a site's requests are served
// at the site, never by the hub or another site). KV buckets and object
// stores ($KV.>, $O.>: snapshots, receipts, reconcile's checkpoint) are
// each node's own. JetStream's own API
// crosses the link only through the site's domain ($JS.<site>.API.>, the
// hub's sourcing) and the hub's outcome consumers on HubAPIPrefix (a
// site's outcome pull), both wired in the hub's leaf account
// (WithLeafAccount).
func LeafDenies(ns string) []string {
	n := wire.NamesFor(ns)
	return []string{
		n.EventsFilter(), n.OutboxFilter(), n.ScheduleFilter(), n.DLQFilter(), n.OutcomesFilter(),
		wire.KVAll, wire.ObjectAll, apiPrefix(ns) + ".>", "$SRV.>",
	}
}

// leafOptions makes the embedded server an edge site (a leaf node of the
// hub, with the site id as its name and JetStream domain) or the hub (a
// leaf node listener, with the hub domain). Without an edge role it does
// nothing.
func leafOptions(cfg config.Config, opts *server.Options) error {
	e := cfg.Edge
	switch e.Role {
	case config.EdgeSite:
		opts.ServerName, opts.JetStreamDomain = e.Site, e.Site
		remote := &server.RemoteLeafOpts{
			// With users, esjet's streams are in the namespace account
			// (addUsers): that is the account the link joins to the hub.
			LocalAccount: localLeafAccount(cfg),
			Credentials:  e.CredentialsFile,
			DenyImports:  LeafDenies(cfg.Namespace),
			DenyExports:  LeafDenies(cfg.Namespace),
		}
		for _, raw := range e.HubURLs {
			u, err := url.Parse(raw)
			if err != nil {
				return fmt.Errorf("edge.hub_urls %q: %w", config.RedactURL(raw), err)
			}
			if u.Scheme == "nats-leaf" {
				u.Scheme = "nats"
			}
			switch {
			case u.User != nil || e.CredentialsFile != "":
			case e.Auth.User != "":
				u.User = url.UserPassword(e.Auth.User, e.Auth.Password)
			default:
				u.User = url.User(e.Site) // names the site to the hub's leaf users
			}
			remote.URLs = append(remote.URLs, u)
		}
		if e.TLS.CAFile != "" || e.TLS.CertFile != "" {
			tc, err := server.GenTLSConfig(&server.TLSConfigOpts{CertFile: e.TLS.CertFile, KeyFile: e.TLS.KeyFile, CaFile: e.TLS.CAFile})
			if err != nil {
				return fmt.Errorf("edge.tls: %w", err)
			}
			remote.TLS, remote.TLSConfig = true, tc
		}
		opts.LeafNode.Remotes = []*server.RemoteLeafOpts{remote}
		opts.LeafNode.ReconnectInterval = leafReconnect
	case config.EdgeHub:
		opts.ServerName, opts.JetStreamDomain = e.HubDomain, e.HubDomain
		host, portStr, err := net.SplitHostPort(e.LeafListen)
		if err != nil {
			return fmt.Errorf("edge.leaf_listen %q: %w", e.LeafListen, err)
		}
		port, err := strconv.Atoi(portStr)
		if err != nil {
			return fmt.Errorf("edge.leaf_listen %q: port: %w", e.LeafListen, err)
		}
		if port == 0 {
			port = server.RANDOM_PORT
		}
		opts.LeafNode.Host, opts.LeafNode.Port = host, port
		// Sites authenticate as the hub's leaf users (addLeafUsers), each
		// with its permissions: not here, where nats-server would apply none.
		if e.TLS.CertFile != "" {
			tc, err := server.GenTLSConfig(&server.TLSConfigOpts{
				CertFile: e.TLS.CertFile, KeyFile: e.TLS.KeyFile, CaFile: e.TLS.CAFile, Verify: e.TLS.CAFile != "",
			})
			if err != nil {
				return fmt.Errorf("edge.tls: %w", err)
			}
			opts.LeafNode.TLSConfig = tc
		}
	}
	return nil
}

// localLeafAccount is the site's account that its leaf link joins to the
// hub: the namespace account when the site has users, else the global one.
func localLeafAccount(cfg config.Config) string {
	if len(cfg.NATS.Embedded.Users) > 0 {
		return NamespaceAccount(cfg.Namespace)
	}
	return ""
}

// LeafURL is the hub's leaf node listener URL with its actual port, "" when
// the broker is not an embedded hub.
func (b *Broker) LeafURL() string {
	if b.srv == nil {
		return ""
	}
	vz, err := b.srv.Varz(nil)
	if err != nil || vz.LeafNode.Port <= 0 {
		return ""
	}
	return "nats-leaf://" + net.JoinHostPort(dialHost(vz.LeafNode.Host), strconv.Itoa(vz.LeafNode.Port))
}

// LeafConnected reports whether an embedded site's link to its hub is up
// (for a hub: whether any site is connected).
func (b *Broker) LeafConnected() bool {
	return b.srv != nil && b.srv.NumLeafNodes() > 0
}

// LeafSites are the server names of the leaf nodes connected to an
// embedded hub (the sites' ids).
func (b *Broker) LeafSites() []string {
	if b.srv == nil {
		return nil
	}
	lz, err := b.srv.Leafz(nil)
	if err != nil || lz == nil {
		return nil
	}
	var names []string
	for _, l := range lz.Leafs {
		names = append(names, l.Name)
	}
	return names
}

// EdgeSubjects are what the node role needs beyond its namespace in an
// edge fleet: a site pulls its hub kinds' outcomes on the hub's
// HubAPIPrefix; the hub records them on <ns>.outcome.<site> in its
// OUTCOMES stream, makes and reads each site's staging streams
// (StagingAPIPrefix), reads each site's streams' info through the site's
// domain, and answers `esjet sites` on its own subject.
func EdgeSubjects(cfg config.Config) []string {
	e, ns := cfg.Edge, cfg.Namespace
	switch e.Role {
	case config.EdgeSite:
		return []string{HubAPIPrefix(ns) + ".>"}
	case config.EdgeHub:
		n := wire.NamesFor(ns)
		subjects := append([]string{n.OutcomesFilter(), wire.EdgeSubjectRoot + ns + ".sites"}, streamOwner(n.Outcomes())...)
		// The hub adds and drops its sites' sources on its EVENTS and
		// OUTBOX (streams.RestartSources): the one update a node makes.
		subjects = append(subjects, "$JS.API.STREAM.UPDATE."+n.Events, "$JS.API.STREAM.UPDATE."+n.Outbox)
		for _, s := range e.Sites {
			// the site monitor reads the site's streams; the staging
			// streams are the hub node's to make (StagingAccount)
			subjects = append(subjects, "$JS."+s+".API.STREAM.INFO."+n.Events, "$JS."+s+".API.STREAM.INFO."+n.Outbox,
				StagingAPIPrefix(ns, s)+".>")
		}
		return subjects
	}
	return nil
}
