package ops

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/broker"
	"github.com/esjet/esjet/internal/natstest"
	"github.com/esjet/esjet/internal/streams"
)

func TestAnOperatorsLongReadCreatesNoConsumer(t *testing.T) {
	t.Parallel()
	ns := natstest.Namespace(t)
	op, err := broker.RolePermissions(broker.RoleOperator, broker.RoleSpec{Namespace: ns, User: "op"})
	if err != nil {
		t.Fatal(err)
	}
	s := natstest.RunServer(t, func(o *server.Options) {
		o.Users = []*server.User{{Username: "admin", Password: "x"}, {Username: "op", Password: "x", Permissions: op}}
	})
	var violations []string
	connect := func(user string) jetstream.JetStream {
		nc, err := nats.Connect(s.ClientURL(), nats.UserInfo(user, "x"), nats.CustomInboxPrefix(broker.InboxPrefix(user)),
			nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { violations = append(violations, err.Error()) }))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		js, _ := jetstream.New(nc)
		return js
	}
	admin, operator := connect("admin"), connect("op")
	if _, err := streams.Provision(t.Context(), admin, ns, streams.ProvisionConfig{}, nil); err != nil {
		t.Fatal(err)
	}
	al, err := streams.Open(t.Context(), admin, ns, streams.Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 30 {
		d := streams.Decision{ID: uuid.NewString(), AggregateType: "item", AggregateID: fmt.Sprint("a", i), Events: []streams.Event{{Type: "made", Data: []byte(`{}`)}}}
		if _, err := al.Append(t.Context(), d, streams.Position{}); err != nil {
			t.Fatal(err)
		}
	}
	sub, _ := admin.Conn().SubscribeSync("$JS.EVENT.ADVISORY.CONSUMER.CREATED.>")
	admin.Conn().Flush()
	ol, err := streams.Open(t.Context(), operator, ns, streams.Config{LoadBatch: 2}, nil)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	recs, err := ol.ReadFrom(t.Context(), 0, 0)
	if err != nil || len(recs) != 30 {
		t.Fatalf("operator ReadFrom: %d, %v", len(recs), err)
	}
	evs, _, err := ol.ReadAfter(t.Context(), 0, 25)
	if err != nil || len(evs) != 25 {
		t.Fatalf("operator ReadAfter: %d, %v", len(evs), err)
	}
	t.Logf("took %s, async errors %v", time.Since(start), violations)
	if m, err := sub.NextMsg(300 * time.Millisecond); err == nil {
		t.Fatalf("the operator created a consumer: %s", m.Data)
	}
}
