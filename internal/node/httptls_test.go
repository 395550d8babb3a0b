package node_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/esjet/esjet/config"
)

// testCA is a throwaway certificate authority.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "esjet test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue signs a leaf for cn: a server certificate for 127.0.0.1, or a
// client certificate.
func (ca *testCA) issue(t *testing.T, cn string, server bool) (certPEM, keyPEM []byte) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kb, _ := x509.MarshalECPrivateKey(key)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb})
}

func writePEM(t *testing.T, dir, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// With http.tls and a client CA, a client certificate named in
// http.auth.certs is a credential with its role, beside the tokens; a
// request with neither is 401.
func TestHTTPAuth_ClientCertificatesOverTLS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := newTestCA(t)
	srvCert, srvKey := ca.issue(t, "esjet", true)
	cliCert, cliKey := ca.issue(t, "oncall", false)
	app, appCfg := tokenFor("app", config.RoleClient)
	n := tripNode(t, tripOptions{edit: func(c *config.Config) {
		c.HTTP.TLS = config.HTTPTLS{CertFile: writePEM(t, dir, "srv.pem", srvCert), KeyFile: writePEM(t, dir, "srv-key.pem", srvKey),
			ClientCAFile: writePEM(t, dir, "ca.pem", ca.pem)}
		c.HTTP.Auth.Tokens = []config.HTTPToken{appCfg}
		c.HTTP.Auth.Certs = []config.HTTPCert{{Name: "oncall", Role: config.RoleOperator}}
	}})
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca.pem)
	pair, err := tls.X509KeyPair(cliCert, cliKey)
	if err != nil {
		t.Fatal(err)
	}
	withCert := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{pair}}}}
	noCert := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	base := "https://" + n.HTTPAddr()
	do := func(c *http.Client, method, path, body string, h map[string]string) int {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), method, base+path, strings.NewReader(body))
		for k, v := range h {
			req.Header.Set(k, v)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, tc := range []struct {
		what         string
		client       *http.Client
		method, path string
		h            map[string]string
		want         int
	}{
		{"operator by certificate reads the console", withCert, "GET", "/console/api/dlq", nil, 200},
		{"operator by certificate sends a command", withCert, "POST", "/v1/trip/c1/request_trip", jsonCT, 403},
		{"client by token over TLS sends a command", noCert, "POST", "/v1/trip/c1/request_trip", bearer(app, jsonCT), 200},
		{"neither certificate nor token", noCert, "GET", "/v1/types", nil, 401},
		{"a wrong token is not made up for by the certificate", withCert, "GET", "/v1/types", bearer("esjet_wrong", nil), 401},
	} {
		if got := do(tc.client, tc.method, tc.path, lisbon, tc.h); got != tc.want {
			t.Errorf("%s: %d, want %d", tc.what, got, tc.want)
		}
	}
}
