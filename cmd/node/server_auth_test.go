package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/broker"
	"github.com/esjet/esjet/internal/natstest"
)

// testCert writes a certificate for 127.0.0.1, good for a server and a
// client, that is its own CA.
func testCert(t *testing.T) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "esjet test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

// authFile writes the authorization block `esjet permissions` prints for
// namespace ns, each user's password "pw-<user>".
func authFile(t *testing.T, ns string) string {
	t.Helper()
	var stdout, stderr strings.Builder
	if err := run(t.Context(), []string{"permissions", "--namespace", ns}, nil, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	block := regexp.MustCompile(`\$(ESJET_[A-Z0-9_]+_PASSWORD)\n`).ReplaceAllStringFunc(stdout.String(), func(v string) string {
		for _, role := range broker.Roles {
			if strings.TrimSpace(v) == "$"+broker.PasswordVar(ns+"-"+role) {
				return `"pw-` + ns + "-" + role + `"` + "\n"
			}
		}
		return `"unused"` + "\n"
	})
	file := filepath.Join(t.TempDir(), "auth.conf")
	if err := os.WriteFile(file, []byte(block), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

func TestServerRefusesANonLoopbackListenWithoutAuthAndTLS(t *testing.T) {
	cert, key := testCert(t)
	auth := authFile(t, "trips")
	cases := []struct {
		args []string
		want string // "" = accepted
	}{
		{nil, "no authentication (--auth) or TLS"},
		{[]string{"--auth", auth}, "no TLS (--tls-cert, --tls-key)"},
		{[]string{"--tls-cert", cert, "--tls-key", key}, "no authentication (--auth)"},
		{[]string{"--auth", auth, "--tls-cert", cert, "--tls-key", key}, ""},
		{[]string{"--auth", auth, "--tls-cert", cert}, "--tls-cert and --tls-key go together"},
		{[]string{"--auth", filepath.Join(t.TempDir(), "missing.conf"), "--tls-cert", cert, "--tls-key", key}, "--auth"},
	}
	for _, c := range cases {
		f := &serverFlags{listen: "0.0.0.0:0", storeDir: t.TempDir(), sync: "always", maxPayload: "8MiB"}
		for i := 0; i < len(c.args); i += 2 {
			switch c.args[i] {
			case "--auth":
				f.authFile = c.args[i+1]
			case "--tls-cert":
				f.tlsCert = c.args[i+1]
			case "--tls-key":
				f.tlsKey = c.args[i+1]
			}
		}
		_, _, err := serverOptionsFromFlags(f)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%v: %v", c.args, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%v: %v, want %q", c.args, err, c.want)
		}
	}
}

// TestServerWithAuthAndMutualTLS runs `esjet server` with the roles of
// `esjet permissions` and mTLS: it gets ready (its own readiness check
// authenticates), refuses anonymous clients and clients without a
// certificate, and gives each user its role.
func TestServerWithAuthAndMutualTLS(t *testing.T) {
	cert, key := testCert(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var stdout, stderr natstest.Buffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"server", "--listen", "127.0.0.1:0", "--store-dir", filepath.Join(t.TempDir(), "store"),
			"--auth", authFile(t, "trips"), "--tls-cert", cert, "--tls-key", key, "--tls-ca", cert}, nil, &stdout, &stderr)
	}()
	m := waitForLine(t, &stdout, &stderr, done, regexp.MustCompile(`nats server ready: name \S+, client (\S+), cluster none`))
	url := strings.Replace(m[1], "nats://", "tls://", 1)
	withCert := []nats.Option{nats.RootCAs(cert), nats.ClientCert(cert, key)}

	if nc, err := nats.Connect(url, nats.RootCAs(cert), nats.UserInfo("trips-admin", "pw-trips-admin")); err == nil {
		nc.Close()
		t.Error("a client without a certificate was accepted")
	}
	if nc, err := nats.Connect(url, withCert...); err == nil {
		nc.Close()
		t.Error("a client without a user was accepted")
	}
	admin, err := nats.Connect(url, append(withCert, nats.UserInfo("trips-admin", "pw-trips-admin"))...)
	if err != nil {
		t.Fatalf("admin: %v", err)
	}
	defer admin.Close()
	js, _ := jetstream.New(admin)
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "TRIPS_EVENTS", Subjects: []string{"trips.evt.>"}}); err != nil {
		t.Fatalf("admin: create stream: %v", err)
	}
	client, err := nats.Connect(url, append(withCert, nats.UserInfo("trips-client", "pw-trips-client"))...)
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	defer client.Close()
	cjs, _ := jetstream.New(client)
	short, cancelShort := context.WithTimeout(ctx, time.Second)
	defer cancelShort()
	if err := cjs.DeleteStream(short, "TRIPS_EVENTS"); err == nil {
		t.Error("client deleted a stream")
	}
	if _, err := js.Stream(ctx, "TRIPS_EVENTS"); err != nil {
		t.Errorf("stream after the client's delete: %v", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("server: %v\n%s", err, stderr.String())
	}
}

// A non-loopback cluster listener needs --tls-ca: routes then require the
// peers' certificates.
func TestServerClusterBeyondLoopbackNeedsMutualTLS(t *testing.T) {
	cert, key := testCert(t)
	f := &serverFlags{name: "n1", listen: "127.0.0.1:0", storeDir: t.TempDir(), sync: "always", maxPayload: "8MiB",
		clusterName: "c1", clusterListen: "0.0.0.0:6222", tlsCert: cert, tlsKey: key}
	if _, _, err := serverOptionsFromFlags(f); err == nil || !strings.Contains(err.Error(), "--tls-ca") {
		t.Errorf("cluster listen 0.0.0.0 without --tls-ca: %v", err)
	}
	f.tlsCA = cert
	opts, _, err := serverOptionsFromFlags(f)
	if err != nil {
		t.Fatalf("cluster listen 0.0.0.0 with mTLS: %v", err)
	}
	if opts.Cluster.TLSConfig == nil || opts.Cluster.TLSConfig.ClientCAs == nil || opts.Cluster.TLSConfig.ClientAuth != tls.RequireAndVerifyClientCert {
		t.Errorf("routes do not verify their peers: %+v", opts.Cluster.TLSConfig)
	}
}
