package api

import (
	"fmt"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// The HTTP listener's boundary, in front of everything it serves (the API
// under /v1/, the console, /metrics): one handler, so the API and the
// console cannot differ. Always on, with or without authentication:
//
//   - Host must be a loopback name, the listener's own host or one listed
//     in http.allowed_hosts (403 host_not_allowed). A web page that rebinds
//     its own name to 127.0.0.1 (DNS rebinding) sends its name as Host.
//   - A state-changing request (any method but GET, HEAD and OPTIONS) from
//     another origin is refused (403 cross_origin): Sec-Fetch-Site other
//     than same-origin or none, or an Origin whose host is not the Host.
//     The scheme is not compared: TLS may end at a proxy in front.
//   - A state-changing request needs Content-Type: application/json (415
//     unsupported_media_type): a cross-site HTML form can send only
//     text/plain, urlencoded or multipart without a CORS preflight, which
//     the node never answers.
//   - Every response is nosniff, no-referrer, and may not be framed; the
//     console sets its own Content-Security-Policy for its page.
//
// /healthz and /readyz are outside the Host and auth checks: probes reach a
// pod by its IP, and the probes change nothing and reveal only "ok".

// GuardConfig says what the HTTP listener accepts.
type GuardConfig struct {
	// ListenHost is the host of the listen address; when it is a specific
	// host (not empty, 0.0.0.0 or ::) it is an allowed Host.
	ListenHost string
	// AllowedHosts are further Host values (http.allowed_hosts): a name or
	// IP, with ":port" to allow only that port. Loopback names (localhost,
	// any loopback IP) are always allowed.
	AllowedHosts []string
	// Tokens and Certs are the credentials (http.auth); none of either
	// means no authentication.
	Tokens []TokenCredential
	Certs  []CertCredential
}

// probePaths answer any Host and need no credential.
var probePaths = map[string]bool{"/healthz": true, "/readyz": true}

// Guard returns next behind the listener's checks (above) and, when cfg
// has credentials, authentication and the roles of [Permits]. A handler
// behind it finds the request's [Identity] with [IdentityFrom].
func Guard(cfg GuardConfig, next http.Handler) http.Handler {
	g := &guard{auth: newAuthenticator(cfg.Tokens, cfg.Certs), csrf: http.NewCrossOriginProtection()}
	for _, h := range cfg.AllowedHosts {
		g.hosts = append(g.hosts, splitHost(h))
	}
	if h := strings.Trim(cfg.ListenHost, "[]"); h != "" {
		if ip := net.ParseIP(h); ip == nil || !ip.IsUnspecified() {
			g.hosts = append(g.hosts, hostPort{host: strings.ToLower(h)})
		}
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Content-Security-Policy", "default-src 'none'; frame-ancestors 'none'")
		if probePaths[r.URL.Path] {
			next.ServeHTTP(w, r)
			return
		}
		id, authed, err := g.check(r)
		if err != nil {
			if err.Status == http.StatusUnauthorized {
				h.Set("WWW-Authenticate", g.auth.challenge(r))
			}
			writeError(w, err)
			return
		}
		if authed {
			r = r.WithContext(withIdentity(r.Context(), id))
		}
		next.ServeHTTP(w, r)
	})
}

type guard struct {
	hosts []hostPort
	auth  *authenticator
	csrf  *http.CrossOriginProtection
}

// check returns the request's identity (authed false without
// authentication), or the [*Error] it is refused with.
func (g *guard) check(r *http.Request) (id Identity, authed bool, _ *Error) {
	if !g.hostAllowed(r.Host) {
		return id, false, &Error{Status: http.StatusForbidden, Code: CodeHostNotAllowed, Message: fmt.Sprintf(
			"Host %q is not a name this node answers to (loopback names, the listen address's host and http.allowed_hosts); "+
				"if clients reach the node by this name, add it to http.allowed_hosts; nothing was written", r.Host)}
	}
	id, authed, e := g.auth.authorize(r)
	if e != nil || !changesState(r.Method) {
		return id, authed, e
	}
	if err := g.csrf.Check(r); err != nil || !sameOrigin(r) {
		return id, false, &Error{Status: http.StatusForbidden, Code: CodeCrossOrigin, Message: fmt.Sprintf(
			"%s %s from another origin (Origin %q, Sec-Fetch-Site %q) is refused, and nothing was written: the node takes writes only from its own pages (the console) and from clients that are not browsers; send from a program or the console, or serve the page from the node's own origin",
			r.Method, r.URL.Path, r.Header.Get("Origin"), r.Header.Get("Sec-Fetch-Site"))}
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return id, false, &Error{Status: http.StatusUnsupportedMediaType, Code: CodeUnsupportedMediaType, Message: fmt.Sprintf(
			"Content-Type %q: send the body as JSON with Content-Type: application/json (curl: -H 'Content-Type: application/json'); nothing was written",
			r.Header.Get("Content-Type"))}
	}
	return id, authed, nil
}

// changesState reports whether a request with method may change something.
func changesState(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return false
	}
	return true
}

// sameOrigin reports whether r has no Origin or one whose host:port is r's
// Host (default ports as the browser omits them).
func sameOrigin(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" {
		return true
	}
	u, err := url.Parse(o)
	if err != nil || u.Host == "" {
		return false // "null" and the like
	}
	return strings.EqualFold(u.Host, r.Host)
}

// hostPort is a Host value split; port "" matches any.
type hostPort struct{ host, port string }

func splitHost(hp string) hostPort {
	host, port, err := net.SplitHostPort(hp)
	if err != nil {
		host, port = hp, ""
	}
	return hostPort{host: strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), "."), port: port}
}

// hostAllowed reports whether a request's Host is a loopback name or one
// the configuration allows.
func (g *guard) hostAllowed(host string) bool {
	hp := splitHost(host)
	if hp.host == "" {
		return false
	}
	if hp.host == "localhost" {
		return true
	}
	if ip := net.ParseIP(hp.host); ip != nil && ip.IsLoopback() {
		return true
	}
	for _, a := range g.hosts {
		if a.host == hp.host && (a.port == "" || a.port == hp.port) {
			return true
		}
	}
	return false
}
