package api

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net/http"
	"slices"
	"strings"
)

// HTTP authentication: the roles of the NATS boundary, on the HTTP
// listener. A credential is a bearer token (stored as its SHA-256: tokens
// are 32 random bytes, so a fast hash compared in constant time is enough)
// or a client certificate verified by the listener's client CA. No cookies:
// a browser would send one with a cross-site request, and the console
// sends the token itself.

// Roles an HTTP credential may have, with the meaning they have on NATS.
const (
	// RoleClient uses the API under /v1/: commands, state, history, raw
	// appends, multi, views, the log.
	RoleClient = "client"
	// RoleOperator reads everything (GET /v1/…, the console, /metrics) and
	// acts on dead letters in the console; it sends no command and appends
	// nothing.
	RoleOperator = "operator"
	// RoleAdmin may do everything.
	RoleAdmin = "admin"
)

// TokenCredential is a bearer token's holder, role and SHA-256.
type TokenCredential struct {
	Name, Role string
	SHA256     [sha256.Size]byte
}

// CertCredential maps a client certificate's common name, DNS or email
// subject alternative name to a role.
type CertCredential struct{ Name, Role string }

// Identity is who an authenticated HTTP request comes from.
type Identity struct {
	Name string // the credential's name
	Role string // RoleClient, RoleOperator or RoleAdmin
	Via  string // "token" or "certificate"
}

type identityKey struct{}

func withIdentity(ctx context.Context, id Identity) context.Context {
	return context.WithValue(ctx, identityKey{}, id)
}

// IdentityFrom returns the identity [Guard] authenticated the request as;
// false when the listener has no authentication.
func IdentityFrom(ctx context.Context) (Identity, bool) {
	id, ok := ctx.Value(identityKey{}).(Identity)
	return id, ok
}

// Permits reports whether role may send method to path: client the API
// under /v1/; operator reads under /v1/, the console (its actions too) and
// /metrics; admin everything. Any other path is admin's only, so a route
// added later is closed to the other roles until it is classified here.
func Permits(role, method, path string) bool {
	if role == RoleAdmin {
		return true
	}
	read := !changesState(method)
	switch {
	case strings.HasPrefix(path, "/v1/"):
		return role == RoleClient || (role == RoleOperator && read)
	case path == "/console" || strings.HasPrefix(path, "/console/"), path == "/metrics":
		return role == RoleOperator
	}
	return false
}

// authenticator identifies requests by their credentials.
type authenticator struct {
	tokens []TokenCredential
	certs  []CertCredential
}

func newAuthenticator(tokens []TokenCredential, certs []CertCredential) *authenticator {
	return &authenticator{tokens: tokens, certs: certs}
}

func (a *authenticator) on() bool { return len(a.tokens) > 0 || len(a.certs) > 0 }

// identify returns the request's identity: its bearer token's when it
// sends one (a wrong token is not made up for by a certificate), else its
// verified client certificate's.
func (a *authenticator) identify(r *http.Request) (Identity, bool) {
	if !a.on() {
		return Identity{}, false
	}
	if tok, sent := bearer(r); sent {
		sum := sha256.Sum256([]byte(tok))
		var found *TokenCredential
		for i := range a.tokens { // every one compared: no early exit to time
			if subtle.ConstantTimeCompare(sum[:], a.tokens[i].SHA256[:]) == 1 {
				found = &a.tokens[i]
			}
		}
		if found == nil {
			return Identity{}, false
		}
		return Identity{Name: found.Name, Role: found.Role, Via: "token"}, true
	}
	if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 || len(r.TLS.VerifiedChains[0]) == 0 {
		return Identity{}, false
	}
	leaf := r.TLS.VerifiedChains[0][0]
	names := append([]string{leaf.Subject.CommonName}, leaf.DNSNames...)
	names = append(names, leaf.EmailAddresses...)
	for _, c := range a.certs {
		if slices.Contains(names, c.Name) {
			return Identity{Name: c.Name, Role: c.Role, Via: "certificate"}, true
		}
	}
	return Identity{}, false
}

// authorize returns the request's identity, or refuses a request without
// a known credential (401) or whose role may not do what it asks (403).
// With authentication off it returns no identity and no error.
func (a *authenticator) authorize(r *http.Request) (Identity, bool, *Error) {
	if !a.on() {
		return Identity{}, false, nil
	}
	id, ok := a.identify(r)
	if !ok {
		msg := "this node requires a credential (http.auth): send Authorization: Bearer <token> (esjet http-token makes one) or a client certificate"
		if _, sent := bearer(r); sent {
			msg = "the bearer token is not one this node knows (http.auth.tokens): check it, or make one with esjet http-token"
		} else if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
			msg = "the client certificate names no credential in http.auth.certs (matched by common name or subject alternative name)"
		}
		return Identity{}, false, &Error{Status: http.StatusUnauthorized, Code: CodeUnauthorized, Message: msg}
	}
	if !Permits(id.Role, r.Method, r.URL.Path) {
		return Identity{}, false, &Error{Status: http.StatusForbidden, Code: CodeForbidden, Message: fmt.Sprintf(
			"http user %s has the role %s, which may not %s %s (%s)", id.Name, id.Role, r.Method, r.URL.Path, whoMay(r.Method, r.URL.Path))}
	}
	return id, true, nil
}

// whoMay names the roles that may do what a refused request asked.
func whoMay(method, path string) string {
	var roles []string
	for _, role := range []string{RoleClient, RoleOperator, RoleAdmin} {
		if Permits(role, method, path) {
			roles = append(roles, role)
		}
	}
	return "allowed: " + strings.Join(roles, ", ")
}

// challenge is the WWW-Authenticate header of a 401.
func (a *authenticator) challenge(r *http.Request) string {
	if _, sent := bearer(r); sent {
		return `Bearer realm="esjet", error="invalid_token"`
	}
	return `Bearer realm="esjet"`
}

// bearer returns the request's bearer token and whether it sent an
// Authorization header at all.
func bearer(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return "", false
	}
	scheme, tok, _ := strings.Cut(h, " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return "", true
	}
	return strings.TrimSpace(tok), true
}
