package config

import (
	"strings"
	"testing"
)

const testSum = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"

// Every problem of http.* at once: a short or non-hex hash, a role that is
// NATS-only, a name twice, a host with a scheme, certs without a CA, a
// client CA without HTTPS.
func TestHTTPAuthIsValidatedAllAtOnce(t *testing.T) {
	c := Default()
	c.HTTP.AllowedHosts = []string{"esjet.example.com", "esjet.example.com:8443", "[::1]:80", "10.0.0.5", "http://evil.example", "*.example.com"}
	c.HTTP.Auth.Tokens = []HTTPToken{
		{Name: "app", Role: RoleClient, SHA256: testSum},
		{Name: "app", Role: RoleNode, SHA256: "abc"},
		{Name: "x y", Role: RoleOperator, SHA256: strings.Repeat("z", 64)},
		{Name: "dup", Role: RoleAdmin, SHA256: strings.ToUpper(testSum)},
	}
	c.HTTP.Auth.Certs = []HTTPCert{{Name: "oncall", Role: RoleReceiver}}
	c.HTTP.TLS.ClientCAFile = "ca.pem"
	err := c.Validate()
	if err == nil {
		t.Fatal("Validate() = nil")
	}
	for _, want := range []string{
		`http.allowed_hosts[4]: "http://evil.example" is not valid`, `http.allowed_hosts[5]: "*.example.com"`,
		`http.auth.tokens[1].name: "app" is not valid: listed twice`, `http.auth.tokens[1].role: "node" is not valid: use "client", "operator" or "admin"`,
		`http.auth.tokens[1].sha256: "abc" is not valid: is not a SHA-256 in hex`, `http.auth.tokens[2].name: "x y"`,
		`http.auth.tokens[2].sha256`, `http.auth.tokens[3].sha256: "` + strings.ToUpper(testSum) + `" is not valid: is listed twice`,
		`http.auth.certs[0].role: "receiver"`, `http.tls.client_ca_file: "ca.pem" is not valid: client certificates need HTTPS`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %v\nwant it to say %s", err, want)
		}
	}
	for _, ok := range []string{"allowed_hosts[0]", "allowed_hosts[1]", "allowed_hosts[2]", "allowed_hosts[3]", "tokens[0]"} {
		if strings.Contains(err.Error(), ok) {
			t.Errorf("Validate() refused %s: %v", ok, err)
		}
	}
	c = Default()
	c.HTTP.Auth.Certs = []HTTPCert{{Name: "oncall", Role: RoleOperator}}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "http.auth.certs: client certificates need http.tls.client_ca_file") {
		t.Errorf("certs without a CA: %v", err)
	}
}

// Beyond loopback the listener needs auth and TLS (a token would travel in
// clear otherwise), or allow_remote saying a proxy does both.
func TestHTTPListenBeyondLoopbackNeedsAuthAndTLSOrAllowRemote(t *testing.T) {
	for _, tc := range []struct {
		name          string
		auth, tls, ar bool
		want          string // "" when valid
	}{
		{"bare", false, false, false, "without http.auth and http.tls"},
		{"auth only", true, false, false, "without http.tls"},
		{"tls only", false, true, false, "without http.auth"},
		{"auth and tls", true, true, false, ""},
		{"allow_remote", false, false, true, ""},
	} {
		c := Default()
		c.HTTP.Listen = "0.0.0.0:8080"
		c.HTTP.AllowRemote = tc.ar
		if tc.auth {
			c.HTTP.Auth.Tokens = []HTTPToken{{Name: "app", Role: RoleClient, SHA256: testSum}}
		}
		if tc.tls {
			c.HTTP.TLS = HTTPTLS{CertFile: "c.pem", KeyFile: "k.pem"}
		}
		err := c.Validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: Validate() = %v, want nil", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), `http.listen: "0.0.0.0:8080" is not valid: listening beyond loopback `+tc.want)):
			t.Errorf("%s: Validate() = %v, want it to say %q", tc.name, err, tc.want)
		}
	}
}

func TestHTTPAuthLoadsFromTheFile(t *testing.T) {
	cfg, err := Load(writeFile(t, "http:\n  allowed_hosts: [esjet.example.com]\n  auth:\n    tokens:\n      - {name: app, role: client, sha256: "+testSum+"}\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.HTTP.Auth.Tokens; len(got) != 1 || got[0].Name != "app" || got[0].SHA256 != testSum || !cfg.HTTP.Auth.Set() {
		t.Errorf("http.auth.tokens = %+v", got)
	}
	if _, err := Load(writeFile(t, "http:\n  auth:\n    tokens:\n      - {name: app, role: client, sha: x}\n"), nil); err == nil {
		t.Error("a misspelt key under http.auth.tokens loaded; want a strict error")
	}
}
