package natstest

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Option adjusts the server options before the server starts.
type Option func(*server.Options)

// SyncAlways makes the server fsync every write, like esjet's default.
func SyncAlways() Option { return func(o *server.Options) { o.SyncAlways = true } }

// RunServer starts a single JetStream server on 127.0.0.1 with a random port
// and a store under tb.TempDir(). It shuts down when the test ends.
func RunServer(tb testing.TB, opts ...Option) *server.Server {
	tb.Helper()
	s := start(tb, options(tb, "esjet-test", opts))
	tb.Cleanup(func() { shutdown(s) })
	return s
}

// RunCluster starts a three-node JetStream cluster on loopback, waits until it
// has a meta leader, and shuts it down when the test ends. Streams created
// through any member may use Replicas: 3.
func RunCluster(tb testing.TB, opts ...Option) []*server.Server {
	tb.Helper()
	ports := Ports(tb, 3)
	var routes []string
	for _, p := range ports {
		routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", p))
	}
	clusterName := fmt.Sprintf("esjet-test-%d", clusterSeq.Add(1))
	servers := make([]*server.Server, 0, 3)
	for i, p := range ports {
		cluster := func(o *server.Options) {
			o.Cluster = server.ClusterOpts{Name: clusterName, Host: "127.0.0.1", Port: p}
			o.Routes = server.RoutesFromStr(strings.Join(routes, ","))
		}
		s := start(tb, options(tb, fmt.Sprintf("%s-n%d", clusterName, i+1), append([]Option{cluster}, opts...)))
		servers = append(servers, s)
	}
	tb.Cleanup(func() {
		for _, s := range servers {
			shutdown(s)
		}
	})
	// ReadyForConnections does not wait for the meta leader: poll until the
	// JetStream API answers on every member.
	for _, s := range servers {
		_, js := Connect(tb, s)
		Eventually(tb, 20*time.Second, func() bool {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			_, err := js.AccountInfo(ctx)
			return err == nil
		})
	}
	return servers
}

var clusterSeq atomic.Int64

// options are a test server's: loopback, random client port, JetStream in a
// temp dir, 8 MiB max payload (the largest max_message_size esjet accepts).
func options(tb testing.TB, name string, opts []Option) *server.Options {
	o := &server.Options{
		ServerName: name,
		Host:       "127.0.0.1",
		Port:       -1,
		JetStream:  true,
		StoreDir:   tb.TempDir(),
		NoLog:      true,
		NoSigs:     true,
		MaxPayload: 8 << 20,
	}
	for _, opt := range opts {
		opt(o)
	}
	return o
}

func start(tb testing.TB, o *server.Options) *server.Server {
	tb.Helper()
	s, err := server.NewServer(o)
	if err != nil {
		tb.Fatalf("natstest: new server: %v", err)
	}
	s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		shutdown(s)
		tb.Fatalf("natstest: server %s not ready", o.ServerName)
	}
	return s
}

func shutdown(s *server.Server) {
	s.Shutdown()
	s.WaitForShutdown()
}

// Connect opens a client connection to s and closes it when the test ends.
func Connect(tb testing.TB, s *server.Server, opts ...nats.Option) (*nats.Conn, jetstream.JetStream) {
	tb.Helper()
	nc, err := nats.Connect(s.ClientURL(), append([]nats.Option{nats.MaxReconnects(-1), nats.ReconnectWait(50 * time.Millisecond)}, opts...)...)
	if err != nil {
		tb.Fatalf("natstest: connect: %v", err)
	}
	tb.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		tb.Fatalf("natstest: jetstream: %v", err)
	}
	return nc, js
}

var nsSeq atomic.Int64

// Namespace returns a namespace unique in this test binary, so parallel tests
// can share one server without sharing streams.
func Namespace(tb testing.TB) string {
	return fmt.Sprintf("t%d", nsSeq.Add(1))
}

// Eventually polls cond every 10ms until it returns true, failing the test
// after timeout.
func Eventually(tb testing.TB, timeout time.Duration, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("natstest: condition not met within %s", timeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
