package broker

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"log/slog"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/esjet/esjet/config"
	"github.com/esjet/esjet/internal/natstest"
)

func TestMain(m *testing.M) {
	if dir := os.Getenv(lockHolderEnv); dir != "" {
		holdLock(dir) // a child process of TestDataDirLockOfAKilledProcessDoesNotBlock
		return
	}
	// nats.go v1.55.0 races in ObjectStore.Put (matrix_test puts one object as the
	// operator): Put's publisher starts resetPendingAcksOnReconnect, then its deferred
	// cleanupReplySub sets the status channel to nil; a goroutine that had not yet read
	// the channel then waits on a nil channel for ever. Only that goroutine is excused.
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction(
		"github.com/nats-io/nats.go/jetstream.(*jetStream).resetPendingAcksOnReconnect"))
}

func embeddedConfig(t *testing.T, listen string) config.Config {
	t.Helper()
	cfg := config.Default()
	cfg.NATS.Embedded.DataDir = filepath.Join(t.TempDir(), "data") // also checks it is created
	cfg.NATS.Embedded.Listen = listen
	if err := cfg.Validate(); err != nil {
		t.Fatalf("test config invalid: %v", err)
	}
	return cfg
}

func start(t *testing.T, cfg config.Config) *Broker {
	t.Helper()
	b, err := Start(t.Context(), cfg, nil)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		if err := b.Close(context.Background()); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return b
}

// roundTrip creates a stream, publishes one message and reads it back.
func roundTrip(t *testing.T, js jetstream.JetStream, stream, payload string) {
	t.Helper()
	ctx := t.Context()
	subject := strings.ToLower(stream) + ".x"
	if _, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: stream, Subjects: []string{subject}}); err != nil {
		t.Fatalf("create stream: %v", err)
	}
	ack, err := js.Publish(ctx, subject, []byte(payload))
	if err != nil {
		t.Fatalf("publish: %v", err)
	}
	assertMsg(t, js, stream, ack.Sequence, payload)
}

func assertMsg(t *testing.T, js jetstream.JetStream, stream string, seq uint64, payload string) {
	t.Helper()
	s, err := js.Stream(t.Context(), stream)
	if err != nil {
		t.Fatalf("stream %s: %v", stream, err)
	}
	msg, err := s.GetMsg(t.Context(), seq)
	if err != nil {
		t.Fatalf("get %s seq %d: %v", stream, seq, err)
	}
	if string(msg.Data) != payload {
		t.Fatalf("got %q, want %q", msg.Data, payload)
	}
}

func TestEmbeddedServesJetStreamInProcessAndOnItsPort(t *testing.T) {
	cfg := embeddedConfig(t, "127.0.0.1:0")
	b := start(t, cfg)
	if !b.Embedded() {
		t.Error("Embedded() = false")
	}
	roundTrip(t, b.JetStream(), "EMB", "hello")
	if js := b.srv.JetStreamConfig(); js == nil || !js.SyncAlways {
		t.Error("default embedded server does not sync always")
	}
	if _, err := os.Stat(cfg.NATS.Embedded.DataDir); err != nil {
		t.Errorf("data dir not created: %v", err)
	}

	u, err := url.Parse(b.ClientURL())
	if err != nil || u.Port() == "0" || u.Port() == "" || u.Hostname() != "127.0.0.1" {
		t.Fatalf("ClientURL() = %q, want nats://127.0.0.1:<actual port>", b.ClientURL())
	}
	nc, err := nats.Connect(b.ClientURL())
	if err != nil {
		t.Fatalf("plain connect to ClientURL: %v", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	assertMsg(t, js, "EMB", 1, "hello")
}

func TestCloseIsIdempotentAndDataSurvivesRestart(t *testing.T) {
	cfg := embeddedConfig(t, "127.0.0.1:0")
	b, err := Start(t.Context(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	roundTrip(t, b.JetStream(), "DURABLE", "kept")
	for i := range 2 {
		if err := b.Close(t.Context()); err != nil {
			t.Fatalf("Close #%d: %v", i+1, err)
		}
	}
	if !b.Conn().IsClosed() {
		t.Error("connection still open after Close")
	}

	b2 := start(t, cfg)
	assertMsg(t, b2.JetStream(), "DURABLE", 1, "kept")
}

func TestEmbeddedListenNoneIsInProcessOnly(t *testing.T) {
	b := start(t, embeddedConfig(t, config.ListenNone))
	if b.ClientURL() != "" {
		t.Errorf("ClientURL() = %q, want \"\"", b.ClientURL())
	}
	roundTrip(t, b.JetStream(), "INPROC", "local")

	cfg := embeddedConfig(t, config.ListenNone)
	if _, err := Connect(t.Context(), cfg, "cli"); err == nil || !strings.Contains(err.Error(), `"none"`) {
		t.Errorf("Connect with listen none = %v, want an error explaining listen is none", err)
	}
}

func TestEmbeddedSyncIntervalAndLimits(t *testing.T) {
	cfg := embeddedConfig(t, config.ListenNone)
	cfg.NATS.Embedded.Sync = config.SyncInterval
	cfg.NATS.Embedded.SyncInterval = config.Duration(time.Second)
	cfg.NATS.Embedded.MaxStore = 64 * config.MiB
	cfg.NATS.Embedded.MaxMemory = 16 * config.MiB
	cfg.Streams.MaxMessageSize = 4 * config.MiB
	b := start(t, cfg)
	js := b.srv.JetStreamConfig()
	if js == nil || js.MaxStore != int64(64*config.MiB) || js.MaxMemory != int64(16*config.MiB) {
		t.Errorf("server JetStream config = %+v, want store 64MiB, memory 16MiB", js)
	}
	if opts := b.srv.JetStreamConfig(); opts != nil && (opts.SyncInterval != time.Second || opts.SyncAlways) {
		t.Errorf("sync = always %v, interval %s; want interval 1s", opts.SyncAlways, opts.SyncInterval)
	}
	if got, want := b.Conn().MaxPayload(), int64(4*config.MiB+payloadHeadroom); got != want {
		t.Errorf("server max_payload = %d, want %d", got, want)
	}
}

func TestEmbeddedPortInUseFailsFast(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	cfg := embeddedConfig(t, l.Addr().String())
	begin := time.Now()
	b, err := Start(t.Context(), cfg, nil)
	if err == nil {
		_ = b.Close(t.Context())
		t.Fatal("Start succeeded on a port in use")
	}
	if !strings.Contains(err.Error(), l.Addr().String()) {
		t.Errorf("error %q does not name the address", err)
	}
	if elapsed := time.Since(begin); elapsed > startTimeout/2 {
		t.Errorf("took %s to fail, want well under the %s start timeout", elapsed, startTimeout)
	}
}

func TestExternalAgainstEmbedded(t *testing.T) {
	emb := start(t, embeddedConfig(t, "127.0.0.1:0"))
	cfg := config.Default()
	cfg.NATS.Mode = config.ModeExternal
	cfg.NATS.External.URLs = []string{emb.ClientURL()}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	b := start(t, cfg)
	if b.Embedded() {
		t.Error("Embedded() = true in external mode")
	}
	if b.ClientURL() != emb.ClientURL() {
		t.Errorf("ClientURL() = %q, want %q", b.ClientURL(), emb.ClientURL())
	}
	roundTrip(t, b.JetStream(), "EXT", "remote")
	assertMsg(t, emb.JetStream(), "EXT", 1, "remote")
}

func TestExternalWithoutJetStreamSaysSo(t *testing.T) {
	// A plain nats-server without JetStream: start one through the server package
	// directly, since the broker always enables JetStream.
	srv := startPlainServer(t)
	cfg := config.Default()
	cfg.NATS.Mode = config.ModeExternal
	cfg.NATS.External.URLs = []string{srv}
	_, err := Start(t.Context(), cfg, nil)
	if err == nil || !strings.Contains(err.Error(), "JetStream is not enabled") {
		t.Fatalf("Start = %v, want a JetStream-not-enabled error", err)
	}
}

func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

func TestExternalUnreachableFailsNamingTheURL(t *testing.T) {
	cfg := config.Default()
	cfg.NATS.Mode = config.ModeExternal
	u := "nats://" + closedPort(t)
	cfg.NATS.External.URLs = []string{u}
	cfg.NATS.External.ConnectTimeout = config.Duration(time.Second)
	begin := time.Now()
	_, err := Start(t.Context(), cfg, nil)
	if err == nil {
		t.Fatal("Start succeeded against a closed port")
	}
	if !strings.Contains(err.Error(), u) {
		t.Errorf("error %q does not name %s", err, u)
	}
	if elapsed := time.Since(begin); elapsed > 3*time.Second {
		t.Errorf("took %s, want about the 1s connect timeout", elapsed)
	}
}

func TestConnectEmbeddedNotRunningHints(t *testing.T) {
	cfg := embeddedConfig(t, closedPort(t))
	_, err := Connect(t.Context(), cfg, "cli")
	if err == nil || !strings.Contains(err.Error(), "esjet run") || !strings.Contains(err.Error(), cfg.NATS.Embedded.Listen) {
		t.Fatalf("Connect = %v, want an error naming the address and hinting at esjet run", err)
	}
	cfg = embeddedConfig(t, "127.0.0.1:0")
	if _, err := Connect(t.Context(), cfg, "cli"); err == nil || !strings.Contains(err.Error(), "fixed port") {
		t.Fatalf("Connect with port 0 = %v, want an error asking for a fixed port", err)
	}
}

// listenOf turns a started broker's ClientURL back into a listen address, so a
// Connect config can point at a port picked at start.
func listenOf(t *testing.T, b *Broker) string {
	t.Helper()
	u, err := url.Parse(b.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

func TestConnectWithUserPassword(t *testing.T) {
	cfg := embeddedConfig(t, "127.0.0.1:0")
	cfg.NATS.Embedded.Auth = config.Auth{User: "esjet", Password: "s3cret"}
	b := start(t, cfg) // the in-process connection authenticates too
	roundTrip(t, b.JetStream(), "AUTH", "ok")
	cfg.NATS.Embedded.Listen = listenOf(t, b)

	nc, err := Connect(t.Context(), cfg, "cli")
	if err != nil {
		t.Fatalf("Connect with credentials: %v", err)
	}
	nc.Close()

	for name, auth := range map[string]config.Auth{
		"no credentials": {},
		"wrong password": {User: "esjet", Password: "guess"},
	} {
		bad := cfg
		bad.NATS.Embedded.Auth = auth
		if nc, err := Connect(t.Context(), bad, "cli"); err == nil {
			nc.Close()
			t.Errorf("Connect with %s succeeded", name)
		} else if !errors.Is(err, nats.ErrAuthorization) && !strings.Contains(strings.ToLower(err.Error()), "authorization") {
			t.Errorf("Connect with %s = %v, want an authorization error", name, err)
		}
	}
}

func TestConnectExternalWithToken(t *testing.T) {
	cfg := embeddedConfig(t, "127.0.0.1:0")
	cfg.NATS.Embedded.Auth = config.Auth{Token: "t0ken"}
	emb := start(t, cfg)

	ext := config.Default()
	ext.NATS.Mode = config.ModeExternal
	ext.NATS.External.URLs = []string{emb.ClientURL()}
	ext.NATS.External.Auth = config.Auth{Token: "t0ken"}
	nc, err := Connect(t.Context(), ext, "cli")
	if err != nil {
		t.Fatalf("Connect external with token: %v", err)
	}
	nc.Close()
	b := start(t, ext)
	roundTrip(t, b.JetStream(), "TOKEN", "ok")
}

func TestEmbeddedTLSOnNonLoopbackConfig(t *testing.T) {
	certFile, keyFile := selfSignedCert(t)
	cfg := embeddedConfig(t, "127.0.0.1:0")
	cfg.NATS.Embedded.Auth = config.Auth{Token: "t0ken"}
	cfg.NATS.Embedded.TLS = config.TLS{CertFile: certFile, KeyFile: keyFile, CAFile: certFile}
	b := start(t, cfg)
	if !strings.HasPrefix(b.ClientURL(), "tls://") {
		t.Errorf("ClientURL() = %q, want tls://", b.ClientURL())
	}
	roundTrip(t, b.JetStream(), "TLS", "secret") // in-process needs no TLS

	cfg.NATS.Embedded.Listen = listenOf(t, b)
	nc, err := Connect(t.Context(), cfg, "cli")
	if err != nil {
		t.Fatalf("Connect over TLS: %v", err)
	}
	defer nc.Close()
	if !nc.TLSRequired() {
		t.Error("connection is not TLS")
	}
	if _, err := nats.Connect("nats://"+cfg.NATS.Embedded.Listen, nats.Token("t0ken")); err == nil {
		t.Error("a plaintext client connected to a TLS listener")
	}
}

func TestServerLogsGoToSlog(t *testing.T) {
	var buf natstest.Buffer
	logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	b, err := Start(t.Context(), embeddedConfig(t, config.ListenNone), logger)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{"component=nats-server", "component=broker", "embedded nats-server started"} {
		if !strings.Contains(out, want) {
			t.Errorf("log output lacks %q:\n%s", want, out)
		}
	}
}

func TestRedactURLs(t *testing.T) {
	got := redactURLs("nats://u:pw@a:4222,nats://b:4222,nats://tok@c:4222")
	if want := "nats://u:[redacted]@a:4222,nats://b:4222,nats://[redacted]@c:4222"; got != want {
		t.Errorf("redactURLs = %q, want %q", got, want)
	}
}

// selfSignedCert writes a certificate for 127.0.0.1 that is its own CA.
func selfSignedCert(t *testing.T) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "esjet test"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
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

// With require_client_certs a TCP client needs a certificate signed by
// ca_file; the CLI presents cert_file.
func TestEmbeddedMutualTLS(t *testing.T) {
	certFile, keyFile := selfSignedCert(t)
	cfg := embeddedConfig(t, "127.0.0.1:0")
	cfg.NATS.Embedded.TLS = config.TLS{CertFile: certFile, KeyFile: keyFile, CAFile: certFile}
	cfg.NATS.Embedded.RequireClientCerts = true
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	b := start(t, cfg)
	roundTrip(t, b.JetStream(), "MTLS", "in-process") // in-process needs no certificate
	cfg.NATS.Embedded.Listen = listenOf(t, b)
	nc, err := Connect(t.Context(), cfg, "cli")
	if err != nil {
		t.Fatalf("Connect with the client certificate: %v", err)
	}
	nc.Close()
	if nc, err := nats.Connect("tls://"+cfg.NATS.Embedded.Listen, nats.RootCAs(certFile)); err == nil {
		nc.Close()
		t.Error("a TLS client without a certificate was accepted")
	}
	bad := config.Default()
	bad.NATS.Embedded.RequireClientCerts = true
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "require_client_certs") {
		t.Errorf("require_client_certs without TLS: %v", err)
	}
}
