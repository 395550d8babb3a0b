package config

import (
	"encoding/hex"
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"
)

// HTTP configures the HTTP listener: the API under /v1/, the console, the
// probes and (unless metrics_listen moves it) /metrics.
type HTTP struct {
	// Listen is host:port or "none" to disable HTTP. Default "127.0.0.1:8080".
	// A host beyond loopback needs Auth and TLS, or AllowRemote.
	Listen string `yaml:"listen"`
	// AllowRemote permits a non-loopback Listen without Auth and TLS: only
	// behind a proxy that authenticates and encrypts, or on a network you
	// trust. Default false.
	AllowRemote bool `yaml:"allow_remote"`
	// AllowedHosts are the Host header values answered besides the loopback
	// names (localhost, 127.0.0.1, [::1], any port) and Listen's own host
	// when it is a specific one: a name or IP, exactly, with ":port" to
	// allow only that port. Any other Host is refused 403 host_not_allowed,
	// so a web page cannot reach the node by rebinding its own name to it
	// (DNS rebinding). /healthz and /readyz answer any Host. Empty (the
	// default): only those. Behind a proxy, list the name clients use.
	AllowedHosts []string `yaml:"allowed_hosts"`
	// TLS serves HTTPS with cert_file and key_file, and with client_ca_file
	// asks for client certificates signed by that CA (mTLS, for
	// Auth.Certs; a client without one may still present a token). Empty
	// (the default): plain HTTP.
	TLS HTTPTLS `yaml:"tls"`
	// Auth turns on authentication: every request but /healthz and /readyz
	// then needs a token or a client certificate listed here, and the
	// credential's role decides what it may do. Empty (the default): no
	// authentication.
	Auth HTTPAuth `yaml:"auth"`
	// MetricsListen is where Prometheus scrapes /metrics: empty (the
	// default) serves it on Listen beside the API, under the listener's
	// checks (with Auth: operator or admin); host:port on a listener of its
	// own (any host, no checks: it serves only counts, no API), and "none"
	// nowhere.
	MetricsListen string `yaml:"metrics_listen"`
}

// HTTPTLS is the HTTP listener's TLS.
type HTTPTLS struct {
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
	// ClientCAFile is the CA that signs client certificates (http.auth.certs).
	ClientCAFile string `yaml:"client_ca_file"`
}

// HTTPAuth lists the credentials the HTTP listener accepts.
type HTTPAuth struct {
	// Tokens are bearer tokens (Authorization: Bearer <token>), stored as
	// the SHA-256 of the token: `esjet http-token` makes one.
	Tokens []HTTPToken `yaml:"tokens"`
	// Certs map client certificates (signed by tls.client_ca_file) to roles.
	Certs []HTTPCert `yaml:"certs"`
}

// Set reports whether any credential is configured.
func (a HTTPAuth) Set() bool { return len(a.Tokens) > 0 || len(a.Certs) > 0 }

// HTTPToken is one bearer token.
type HTTPToken struct {
	// Name identifies the token's holder in logs and audit records.
	Name string `yaml:"name"`
	// Role is client, operator or admin ([HTTPRoles]).
	Role string `yaml:"role"`
	// SHA256 is the hex SHA-256 of the token (64 characters). Tokens are
	// random and long, so a plain hash is enough: nobody can guess one.
	SHA256 string `yaml:"sha256"`
}

// HTTPCert maps a client certificate to a role.
type HTTPCert struct {
	// Name is the certificate's subject common name, or one of its DNS or
	// email subject alternative names.
	Name string `yaml:"name"`
	// Role is client, operator or admin ([HTTPRoles]).
	Role string `yaml:"role"`
}

// HTTPRoles are the roles an HTTP credential may have: the NATS roles that
// people and applications hold (node and receiver are NATS-only).
var HTTPRoles = []string{RoleClient, RoleOperator, RoleAdmin}

var (
	httpNamePattern = regexp.MustCompile(`^[A-Za-z0-9_.@-]{1,128}$`)
	hostPattern     = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?$`)
)

func (h *HTTP) validate(v *validator) {
	if host, ok := v.listen("http.listen", h.Listen); ok && h.Listen != ListenNone && !isLoopback(host) && !h.AllowRemote {
		var missing []string
		if !h.Auth.Set() {
			missing = append(missing, "http.auth")
		}
		if h.TLS.CertFile == "" {
			missing = append(missing, "http.tls")
		}
		if len(missing) > 0 {
			v.add("http.listen", h.Listen, fmt.Sprintf("listening beyond loopback without %s would let anyone on the network "+
				"send commands and append events, or read the tokens on the wire; configure them (esjet http-token makes a token), "+
				"or put the node behind a proxy that authenticates and encrypts and set http.allow_remote: true, or listen on 127.0.0.1",
				strings.Join(missing, " and ")))
		}
	}
	for i, a := range h.AllowedHosts {
		path := fmt.Sprintf("http.allowed_hosts[%d]", i)
		host, port, err := net.SplitHostPort(a)
		if err != nil {
			host, port = strings.TrimSuffix(strings.TrimPrefix(a, "["), "]"), ""
		}
		if n, perr := strconv.Atoi(port); port != "" && (perr != nil || n < 1 || n > 65535) {
			v.add(path, a, "the port must be 1-65535")
			continue
		}
		if !hostPattern.MatchString(host) && net.ParseIP(host) == nil {
			v.add(path, a, "use a host name or IP as clients send it in the Host header, with an optional :port (no scheme, path or wildcard), e.g. esjet.example.com or esjet.example.com:8443")
		}
	}
	t := h.TLS
	if (t.CertFile == "") != (t.KeyFile == "") {
		v.add("http.tls", nil, "cert_file and key_file go together: set both or neither")
	}
	if t.ClientCAFile != "" && t.CertFile == "" {
		v.add("http.tls.client_ca_file", t.ClientCAFile, "client certificates need HTTPS: set http.tls.cert_file and key_file too")
	}
	names, hashes := map[string]bool{}, map[string]bool{}
	for i, tok := range h.Auth.Tokens {
		path := fmt.Sprintf("http.auth.tokens[%d]", i)
		h.validateName(v, path, tok.Name, names)
		v.oneOf(path+".role", tok.Role, HTTPRoles...)
		sum := strings.ToLower(tok.SHA256)
		if _, err := hex.DecodeString(sum); err != nil || len(sum) != 64 {
			v.add(path+".sha256", tok.SHA256, "is not a SHA-256 in hex (64 characters of 0-9 and a-f): store the hash `esjet http-token` prints, never the token")
		} else if hashes[sum] {
			v.add(path+".sha256", tok.SHA256, "is listed twice: give each holder a token of its own")
		}
		hashes[sum] = true
	}
	names = map[string]bool{}
	for i, c := range h.Auth.Certs {
		path := fmt.Sprintf("http.auth.certs[%d]", i)
		h.validateName(v, path, c.Name, names)
		v.oneOf(path+".role", c.Role, HTTPRoles...)
	}
	if len(h.Auth.Certs) > 0 && t.ClientCAFile == "" {
		v.add("http.auth.certs", nil, "client certificates need http.tls.client_ca_file (the CA that signs them), with cert_file and key_file")
	}
}

func (h *HTTP) validateName(v *validator, path, name string, seen map[string]bool) {
	switch {
	case !httpNamePattern.MatchString(name):
		v.add(path+".name", name, "give each credential a name of 1-128 characters of A-Z, a-z, 0-9, '_', '.', '@' and '-' (it is written in audit records)")
	case seen[name]:
		v.add(path+".name", name, "listed twice; give each credential its own name")
	}
	seen[name] = true
}
