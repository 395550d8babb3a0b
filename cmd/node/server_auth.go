package main

import (
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
)

// serverSecurity applies --auth and --tls-* to opts. It returns the option
// the in-process readiness check connects with (nil: no auth configured).
//
// --auth names a nats-server config file whose accounts (or authorization) block lists
// users (what `esjet permissions` prints); the server then accepts only
// them, in their accounts. Since the readiness check connects in-process
// too, it gets a user of its own: a fresh nkey allowed only to ask for
// JetStream's account info (in an account of its own when the file has
// accounts).
//
// --tls-cert/--tls-key serve the client listener over TLS; --tls-ca then
// requires and verifies client certificates (mTLS). In a cluster, routes use
// the same certificate and require the peers' certificates signed by
// --tls-ca.
func serverSecurity(f *serverFlags, opts *server.Options, bad func(string, ...any)) nats.Option {
	var asReadiness nats.Option
	if f.authFile != "" {
		conf, err := server.ProcessConfigFile(f.authFile)
		switch {
		case err != nil:
			bad("--auth %s: %v (is each password variable it names set?)", f.authFile, err)
		case len(conf.Users) == 0 && len(conf.Nkeys) == 0:
			bad("--auth %s: no users: write an accounts block with users (esjet permissions prints one)", f.authFile)
		default:
			opts.Users, opts.Nkeys, opts.Accounts = conf.Users, conf.Nkeys, conf.Accounts
			kp, err := nkeys.CreateUser()
			var pub string
			if err == nil {
				pub, err = kp.PublicKey()
			}
			if err != nil {
				bad("readiness key: %v", err)
				break
			}
			perms := &server.Permissions{
				Publish:   &server.SubjectPermission{Allow: []string{"$JS.API.INFO"}},
				Subscribe: &server.SubjectPermission{Allow: []string{"_INBOX.>"}},
			}
			asReadiness = nats.Nkey(pub, kp.Sign)
			if len(conf.Accounts) == 0 {
				opts.Nkeys = append(opts.Nkeys, &server.NkeyUser{Nkey: pub, Permissions: perms})
				break
			}
			// With accounts (what esjet permissions prints), the readiness
			// user gets an account of its own with JetStream, alone in it.
			ready := &server.Options{}
			if err := ready.ProcessConfigString(`accounts { ESJET_READINESS: { jetstream: enabled, users: [ {nkey: "` + pub + `", permissions: { publish: ["$JS.API.INFO"], subscribe: ["_INBOX.>"] } } ] } }`); err != nil {
				bad("readiness account: %v", err)
				break
			}
			opts.Accounts = append(opts.Accounts, ready.Accounts...)
			opts.Nkeys = append(opts.Nkeys, ready.Nkeys...)
		}
	}
	if (f.tlsCert == "") != (f.tlsKey == "") {
		bad("--tls-cert and --tls-key go together: give both or neither")
	}
	if f.tlsCA != "" && f.tlsCert == "" {
		bad("--tls-ca needs --tls-cert and --tls-key (it makes the TLS listener require client certificates)")
	}
	if f.tlsCert != "" && f.tlsKey != "" {
		tc, err := server.GenTLSConfig(&server.TLSConfigOpts{CertFile: f.tlsCert, KeyFile: f.tlsKey, CaFile: f.tlsCA, Verify: f.tlsCA != ""})
		if err != nil {
			bad("--tls-cert/--tls-key/--tls-ca: %v", err)
		} else {
			opts.TLSConfig, opts.TLSVerify = tc, f.tlsCA != ""
			opts.TLSTimeout = 2
		}
	}
	return asReadiness
}

// clusterTLS gives routes the client certificate and requires the peers'
// ones, signed by --tls-ca.
func clusterTLS(f *serverFlags, opts *server.Options, bad func(string, ...any)) {
	if f.tlsCert == "" || f.tlsCA == "" {
		return
	}
	tc, err := server.GenTLSConfig(&server.TLSConfigOpts{CertFile: f.tlsCert, KeyFile: f.tlsKey, CaFile: f.tlsCA, Verify: true})
	if err != nil {
		bad("cluster TLS: %v", err)
		return
	}
	opts.Cluster.TLSConfig, opts.Cluster.TLSTimeout = tc, 2
}

// secure reports what the client listener lacks to be exposed: "" when it
// has both authentication and TLS.
func (f *serverFlags) missing() string {
	switch {
	case f.authFile == "" && f.tlsCert == "":
		return "authentication (--auth) or TLS (--tls-cert, --tls-key)"
	case f.authFile == "":
		return "authentication (--auth)"
	case f.tlsCert == "":
		return "TLS (--tls-cert, --tls-key)"
	}
	return ""
}
