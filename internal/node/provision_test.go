package node

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/config"
	"github.com/esjet/esjet/internal/natstest"
	"github.com/esjet/esjet/internal/streams"
)

// A node whose user may do everything but update a stream (the node role)
// starts on a fresh server, creating the namespace, and on it again; it
// refuses to start once an admin set EVENTS to keep one message per subject
// (the log stays whole) and starts with a warning over a harmless change.
func TestNodeWithoutUpdateRightsCreatesChecksAndRefuses(t *testing.T) {
	t.Parallel()
	noUpdate := &server.Permissions{
		Publish:   &server.SubjectPermission{Allow: []string{">"}, Deny: []string{"$JS.API.STREAM.UPDATE.>"}},
		Subscribe: &server.SubjectPermission{Allow: []string{">"}},
	}
	s := natstest.RunServer(t, func(o *server.Options) {
		o.Users = []*server.User{{Username: "node", Password: "x", Permissions: noUpdate}, {Username: "admin", Password: "x"}}
	})
	ns := natstest.Namespace(t)
	names := streams.NamesFor(ns)
	cfg := testConfig(t, ns)
	cfg.NATS.Mode = config.ModeExternal
	cfg.NATS.External.URLs = []string{s.ClientURL()}
	cfg.NATS.External.Auth.User, cfg.NATS.External.Auth.Password = "node", "x"

	n := startTestNode(t, cfg, Options{})
	for _, c := range n.Provisioned() {
		if c.Action != "created" {
			t.Errorf("fresh start: %s", c)
		}
	}
	closeNode := func(n *Node) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := n.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	closeNode(n)
	start := func(logs *bytes.Buffer) (*Node, error) {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		return Start(ctx, cfg, Options{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	}
	var logs bytes.Buffer
	n, err := start(&logs)
	if err != nil {
		t.Fatalf("start on the namespace it created: %v", err)
	}
	for _, c := range n.Provisioned() {
		if c.Action != "unchanged" {
			t.Errorf("second start: %s", c)
		}
	}
	closeNode(n)

	adminNC, err := nats.Connect(s.ClientURL(), nats.UserInfo("admin", "x"))
	if err != nil {
		t.Fatal(err)
	}
	defer adminNC.Close()
	adminJS, err := jetstream.New(adminNC)
	if err != nil {
		t.Fatal(err)
	}
	l, err := streams.Open(t.Context(), adminJS, ns, streams.Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"a1", "a2"} {
		d := streams.Decision{ID: uuid.NewString(), AggregateType: "acct", AggregateID: id,
			Events: []streams.Event{{Type: "opened", Data: []byte(`{}`)}}}
		if _, err := l.Append(t.Context(), d, streams.Position{}); err != nil {
			t.Fatal(err)
		}
	}
	st, err := adminJS.Stream(t.Context(), names.Events)
	if err != nil {
		t.Fatal(err)
	}
	ev := st.CachedInfo().Config
	ev.MaxMsgsPerSubject = 1
	if _, err := adminJS.UpdateStream(t.Context(), ev); err != nil {
		t.Fatal(err)
	}
	_, err = start(&logs)
	if err == nil || !strings.Contains(err.Error(), names.Events) || !strings.Contains(err.Error(), "max_msgs_per_subject: 1 → unlimited") || !strings.Contains(err.Error(), "esjet provision") {
		t.Fatalf("start over a truncating EVENTS: %v", err)
	}
	if info, err := adminJS.Stream(t.Context(), names.Events); err != nil || info.CachedInfo().State.Msgs != 2 {
		t.Fatalf("EVENTS after the refused start: %v", err)
	}

	ev.MaxMsgsPerSubject, ev.Description = -1, "edited by hand"
	if _, err := adminJS.UpdateStream(t.Context(), ev); err != nil {
		t.Fatal(err)
	}
	logs.Reset()
	n, err = start(&logs)
	if err != nil {
		t.Fatalf("start with a harmless difference: %v", err)
	}
	closeNode(n)
	if out := logs.String(); !strings.Contains(out, "level=WARN") || !strings.Contains(out, "description") || !strings.Contains(out, "esjet provision") {
		t.Errorf("no warning of the description:\n%s", out)
	}
}

// An embedded node without users is its own server's admin: a changed
// setting in its configuration is applied at the next start (as esjet
// provision would), with no step of the user's.
func TestEmbeddedNodeWithoutUsersAppliesItsChangedConfig(t *testing.T) {
	t.Parallel()
	ns := natstest.Namespace(t)
	cfg := testConfig(t, ns)
	n := startTestNodeNoCleanup(t, cfg)
	closeTestNode(t, n)
	cfg.Streams.OutboxMaxAge = config.Duration(cfg.Streams.OutboxMaxAge.Std() + time.Hour)
	n = startTestNodeNoCleanup(t, cfg)
	defer closeTestNode(t, n)
	var updated bool
	for _, c := range n.Provisioned() {
		if c.Name == streams.NamesFor(ns).Outbox {
			updated = c.Action == "updated"
		}
	}
	if !updated {
		t.Fatalf("OUTBOX not updated to the new max age: %v", n.Provisioned())
	}
	st, err := n.broker.JetStream().Stream(t.Context(), streams.NamesFor(ns).Outbox)
	if err != nil {
		t.Fatal(err)
	}
	if got := st.CachedInfo().Config.MaxAge; got != cfg.Streams.OutboxMaxAge.Std() {
		t.Errorf("OUTBOX max age %s, want %s", got, cfg.Streams.OutboxMaxAge.Std())
	}
}

func startTestNodeNoCleanup(t *testing.T, cfg config.Config) *Node {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	n, err := Start(ctx, cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func closeTestNode(t *testing.T, n *Node) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := n.Close(ctx); err != nil {
		t.Error(err)
	}
}
