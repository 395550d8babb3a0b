package broker

import (
	"testing"

	"github.com/nats-io/nats-server/v2/server"
)

// startPlainServer runs a nats-server without JetStream and returns its URL.
func startPlainServer(t *testing.T) string {
	t.Helper()
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, NoSigs: true, NoLog: true})
	if err != nil {
		t.Fatal(err)
	}
	srv.Start()
	t.Cleanup(func() {
		srv.Shutdown()
		srv.WaitForShutdown()
	})
	if !srv.ReadyForConnections(startTimeout) {
		t.Fatal("plain nats-server not ready")
	}
	return srv.ClientURL()
}
