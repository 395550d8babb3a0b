package e2e

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/broker"
	"github.com/esjet/esjet/internal/natstest"
	"github.com/esjet/esjet/internal/ops"
	"github.com/esjet/esjet/internal/wire"
)

// roleConn is a connection as one role's user that records the permission
// violations the server reports to it.
type roleConn struct {
	nc *nats.Conn
	js jetstream.JetStream

	mu         sync.Mutex
	violations []string
}

func connectAs(t *testing.T, url, user string) *roleConn {
	t.Helper()
	rc := &roleConn{}
	// Each role's user receives its replies on its own inbox prefix (the
	// node's is its namespace's).
	inbox := broker.InboxPrefix(user)
	if ns, ok := strings.CutSuffix(user, "-node"); ok {
		inbox = broker.NodeInboxPrefix(ns)
	}
	nc, err := nats.Connect(url, nats.UserInfo(user, "pw-"+user), nats.Name(user), nats.CustomInboxPrefix(inbox),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			rc.mu.Lock()
			defer rc.mu.Unlock()
			rc.violations = append(rc.violations, err.Error())
		}))
	if err != nil {
		t.Fatalf("connect as %s: %v", user, err)
	}
	t.Cleanup(nc.Close)
	rc.nc = nc
	rc.js, err = jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return rc
}

// refused waits until the server reported a permission violation naming
// subject to this connection.
func (rc *roleConn) refused(t *testing.T, what, subject string) {
	t.Helper()
	_ = rc.nc.Flush()
	deadline := time.Now().Add(5 * time.Second)
	for {
		rc.mu.Lock()
		for _, v := range rc.violations {
			if strings.Contains(strings.ToLower(v), "permissions violation") && strings.Contains(v, `"`+subject+`"`) {
				rc.mu.Unlock()
				return
			}
		}
		seen := append([]string(nil), rc.violations...)
		rc.mu.Unlock()
		if time.Now().After(deadline) {
			t.Fatalf("%s: no permission violation for %q within 5s (violations seen: %q)", what, subject, seen)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// request sends a request as this role and returns the reply's body.
func (rc *roleConn) request(t *testing.T, subject, body string) string {
	t.Helper()
	m, err := rc.nc.Request(subject, []byte(body), 10*time.Second)
	if err != nil {
		t.Fatalf("request %s: %v", subject, err)
	}
	return string(m.Data)
}

// startRoleServer starts a nats-server whose users are the roles `esjet
// permissions` prints for namespace ns, each with password "pw-<user>".
func startRoleServer(t *testing.T, dir, ns string) string {
	t.Helper()
	block := runCLI(t, dir, "permissions", "--namespace", ns, "--format", "server")
	var users []string
	for _, line := range strings.Split(block, "\n") {
		if name, ok := strings.CutPrefix(strings.TrimSpace(line), "user: "); ok {
			name = strings.Trim(name, `"`)
			users = append(users, name)
			block = strings.ReplaceAll(block, "$"+broker.PasswordVar(name)+"\n", `"pw-`+name+`"`+"\n")
		}
	}
	if len(users) < 5 {
		t.Fatalf("esjet permissions printed %d users:\n%s", len(users), block)
	}
	file := filepath.Join(dir, "auth.conf")
	if err := os.WriteFile(file, []byte(block), 0o600); err != nil {
		t.Fatal(err)
	}
	conf, err := server.ProcessConfigFile(file)
	if err != nil {
		t.Fatalf("the printed config does not load: %v\n%s", err, block)
	}
	s := natstest.RunServer(t, func(o *server.Options) { o.Accounts, o.Users, o.Nkeys = conf.Accounts, conf.Users, conf.Nkeys })
	return s.ClientURL()
}

// TestRolesEachDoTheirJobAndNothingMore runs a node in external mode as the
// node role of `esjet permissions` and proves, against the real server,
// that the trip saga runs end to end with those permissions, and that the
// attacks of issue 12 are refused: a client cannot append, delete, forge a
// snapshot or an OUTBOX command, delete a receipt, pull the workers'
// commands or spoof the API's queue group; an operator reads and cannot
// append or send; a receiver sees only its subject.
func TestRolesEachDoTheirJobAndNothingMore(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const ns = "sec"
	url := startRoleServer(t, dir, ns)

	// Anonymous connections are refused outright.
	if nc, err := nats.Connect(url); err == nil {
		nc.Close()
		t.Fatal("an unauthenticated connection was accepted")
	}

	n := startNodeEnv(t, dir, []string{"ESJET_NAMESPACE=" + ns,
		"ESJET_NATS_EXTERNAL_AUTH_USER=sec-node", "ESJET_NATS_EXTERNAL_AUTH_PASSWORD=pw-sec-node"}, "--url", url)
	sendTrip(t, n, "lisbon", tripRequest)
	waitTrip(t, n, "lisbon", sagaTimeout, "confirmed", func(s tripState) bool { return s.Status == "confirmed" })

	admin := connectAs(t, url, "sec-admin")
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	events, err := admin.js.Stream(ctx, "SEC_EVENTS")
	if err != nil {
		t.Fatal(err)
	}

	// The client calls the API: a command and a state read.
	client := connectAs(t, url, "sec-client")
	if got := client.request(t, "esjet.sec.trip.porto.request_trip", tripRequest); strings.Contains(got, `"error"`) {
		t.Fatalf("client's command refused: %s", got)
	}
	if got := client.request(t, "esjet.sec.trip.lisbon.state", ""); !strings.Contains(got, "confirmed") {
		t.Fatalf("client's state read: %s", got)
	}
	// ... and a view, which the node (as the node role) keeps.
	// Ada's porto trip may be confirmed too by the time the view has
	// caught up: one confirmed trip or two, not a count of exactly one.
	confirmed := regexp.MustCompile(`"confirmed":[12][,}]`)
	natstest.Eventually(t, 2*time.Minute, func() bool { // the view follows the log: slower on a loaded machine
		return confirmed.MatchString(client.request(t, "esjet.sec.views.traveler_spend.get", `{"key":"ada"}`))
	})

	// ... and nothing more.
	forged := nats.NewMsg("sec.evt.trip.lisbon")
	forged.Data = []byte(`{"forged":true}`)
	forged.Header.Set("Nats-Msg-Id", "forged-decision")
	attacks := []struct{ what, subject string }{
		{"append a decision to the event log", "sec.evt.trip.lisbon"},
		{"publish an OUTBOX command", "sec.outbox.book_flight"},
		{"schedule a command", "sec.schedule.book_flight"},
		{"forge a dead letter", "sec.dlq.book_flight"},
		{"forge a snapshot", "$KV.sec_snapshots.trip.lisbon"},
		{"delete a receipt", "$KV.sec_receipts.x"},
		{"delete the EVENTS stream", "$JS.API.STREAM.DELETE.SEC_EVENTS"},
		{"purge OUTBOX", "$JS.API.STREAM.PURGE.SEC_OUTBOX"},
		{"delete a message", "$JS.API.STREAM.MSG.DELETE.SEC_EVENTS"},
		{"pull the workers' commands", "$JS.API.CONSUMER.MSG.NEXT.SEC_OUTBOX.esjet-worker-book_flight"},
		{"re-point the relay", "$JS.API.CONSUMER.CREATE.SEC_EVENTS.esjet-relay.sec.evt.>"},
		{"change the EVENTS stream", "$JS.API.STREAM.UPDATE.SEC_EVENTS"},
		{"write a view", "$KV.sec_view_traveler_spend.ada"},
		{"take a view's lease", "$KV.sec_projections.traveler_spend.g1.p0.lease"},
		{"purge a view", "$JS.API.STREAM.PURGE.KV_sec_view_traveler_spend"},
	}
	for _, a := range attacks {
		forged.Subject = a.subject
		if a.subject == "$KV.sec_receipts.x" {
			forged.Header.Set("KV-Operation", "DEL")
		}
		if err := client.nc.PublishMsg(forged); err != nil {
			t.Fatal(err)
		}
		client.refused(t, "client: "+a.what, a.subject)
	}
	short, cancelShort := context.WithTimeout(ctx, 2*time.Second)
	if _, err := client.js.Stream(short, "SEC_EVENTS"); err == nil {
		t.Error("client: reads stream info")
	}
	cancelShort()
	client.refused(t, "client: read stream info", "$JS.API.STREAM.INFO.SEC_EVENTS")

	// Spoofing the service: a subscription in the API's queue group (or any
	// subscription to the API) is refused, and every command still reaches
	// the node.
	if _, err := client.nc.QueueSubscribe("esjet.sec.>", broker.APIQueue(ns), func(m *nats.Msg) { _ = m.Respond([]byte(`{"spoofed":true}`)) }); err != nil {
		t.Fatal(err)
	}
	client.refused(t, "client: join the API's queue group", "esjet.sec.>")
	if _, err := client.nc.Subscribe("esjet.sec.>", func(*nats.Msg) {}); err != nil {
		t.Fatal(err)
	}
	for range 8 {
		if got := client.request(t, "esjet.sec.trip.lisbon.state", ""); strings.Contains(got, "spoofed") || !strings.Contains(got, "confirmed") {
			t.Fatalf("a state request answered by someone else: %s", got)
		}
	}

	// Replies to the node's requests (JetStream reads of events, snapshots,
	// receipts) do not reach a client listening on _INBOX.>.
	spy := connectAs(t, url, "sec-client")
	var spied sync.Map
	if _, err := spy.nc.Subscribe("_INBOX.>", func(m *nats.Msg) { spied.Store(m.Subject, string(m.Data)) }); err != nil {
		t.Fatal(err)
	}
	spy.refused(t, "client: subscribe to every inbox", "_INBOX.>")
	if err := spy.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	sendTrip(t, n, "faro", tripRequest)
	waitTrip(t, n, "faro", sagaTimeout, "confirmed", func(s tripState) bool { return s.Status == "confirmed" })
	_ = spy.nc.Flush()
	spied.Range(func(k, v any) bool {
		t.Errorf("a client on _INBOX.> saw the node's reply on %s: %.200s", k, v)
		return true
	})

	// The operator reads (API, stream info, a message) and cannot append,
	// send a command, or delete.
	op := connectAs(t, url, "sec-operator")
	if got := op.request(t, "esjet.sec.trip.lisbon.events", ""); !strings.Contains(got, "trip_confirmed") {
		t.Fatalf("operator's history read: %s", got)
	}
	opEvents, err := op.js.Stream(ctx, "SEC_EVENTS")
	if err != nil {
		t.Fatalf("operator: stream info: %v", err)
	}
	if _, err := opEvents.GetMsg(ctx, 1); err != nil {
		t.Fatalf("operator: get message 1: %v", err)
	}
	if _, err := op.js.Consumer(ctx, "SEC_EVENTS", "esjet-relay"); err != nil {
		t.Fatalf("operator: relay consumer info: %v", err)
	}
	for _, subject := range []string{"sec.evt.trip.lisbon", "esjet.sec.trip.lisbon.cancel_trip", "sec.outbox.book_flight", "$JS.API.STREAM.DELETE.SEC_DLQ", "$KV.sec_snapshots.trip.lisbon"} {
		forged.Subject = subject
		if err := op.nc.PublishMsg(forged); err != nil {
			t.Fatal(err)
		}
		op.refused(t, "operator: publish", subject)
	}

	// The operator re-drives and discards dead letters through the node, on
	// its own ops subject: the audit records name the user the server
	// checked, and the operator writes neither OUTBOX nor the audit record.
	operatorDLQ(t, dir, url, n, op, forged)

	// A receiver sees only its subject, and may answer what it receives.
	rcv := connectAs(t, url, "sec-receiver-demo-svc-flights-book")
	got := make(chan *nats.Msg, 1)
	if _, err := rcv.nc.Subscribe("demo.svc.flights.book", func(m *nats.Msg) {
		_ = m.Respond([]byte("seen"))
		select {
		case got <- m:
		default:
		}
	}); err != nil {
		t.Fatal(err)
	}
	for _, subject := range []string{"demo.svc.hotels.book", ">", "sec.evt.>", "esjet.sec.>"} {
		if _, err := rcv.nc.Subscribe(subject, func(*nats.Msg) {}); err != nil {
			t.Fatal(err)
		}
		rcv.refused(t, "receiver: subscribe", subject)
	}
	if err := rcv.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	sub, err := admin.nc.SubscribeSync(admin.nc.NewInbox())
	if err != nil {
		t.Fatal(err)
	}
	if err := admin.nc.PublishRequest("demo.svc.flights.book", sub.Subject, []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("receiver: its subject's request never arrived")
	}
	replied := false
	for !replied {
		m, err := sub.NextMsg(10 * time.Second)
		if err != nil {
			t.Fatalf("receiver's reply never arrived: %v", err)
		}
		replied = string(m.Data) == "seen"
	}
	forged.Subject = "sec.evt.trip.lisbon"
	if err := rcv.nc.PublishMsg(forged); err != nil {
		t.Fatal(err)
	}
	rcv.refused(t, "receiver: publish", "sec.evt.trip.lisbon")

	// Nothing the attacks sent was stored, and the streams are all there.
	for stream, subject := range map[string]string{"SEC_EVENTS": "sec.evt.trip.lisbon", "SEC_OUTBOX": "sec.outbox.book_flight", "KV_sec_snapshots": "$KV.sec_snapshots.trip.lisbon"} {
		st, err := admin.js.Stream(ctx, stream)
		if err != nil {
			t.Fatalf("stream %s: %v", stream, err)
		}
		if m, err := st.GetLastMsgForSubject(ctx, subject); err == nil && strings.Contains(string(m.Data), "forged") {
			t.Errorf("a forged message was stored on %s", subject)
		}
	}
	for _, st := range []string{"SEC_EVENTS", "SEC_OUTBOX", "SEC_DLQ"} {
		if _, err := admin.js.Stream(ctx, st); err != nil {
			t.Errorf("stream %s after the attacks: %v", st, err)
		}
	}
	if m, err := events.GetLastMsgForSubject(ctx, "sec.evt.trip.lisbon"); err != nil || m.Header.Get("Nats-Msg-Id") == "forged-decision" {
		t.Errorf("lisbon's last decision: %v %v", m, err)
	}
	if strings.Contains(strings.ToLower(n.stderr.String()), "permissions violation") {
		t.Errorf("the node hit a permission violation:\n%s", n.stderr.String())
	}
	n.stop(t, syscall.SIGTERM)
}

// startNodeWithUsers runs `esjet run` with nats.embedded.users app
// (client, password pw-app, as connectAs uses) and oncall (operator,
// pw-oncall); it returns the node, its directory and its config file.
func startNodeWithUsers(t *testing.T) (n *node, dir, cfgFile string) {
	t.Helper()
	dir = t.TempDir()
	cfgFile = filepath.Join(dir, "esjet.yaml")
	if err := os.WriteFile(cfgFile, []byte(`nats:
  embedded:
    allow_plaintext_passwords: true
    users:
      - {name: app, password: pw-app, role: client}
      - {name: oncall, password: pw-oncall, role: operator}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	return startNode(t, dir, "--config", cfgFile), dir, cfgFile
}

// TestEmbeddedNodeWithUsersRunsAsNode runs `esjet run` with
// nats.embedded.users: the node (in-process, as role node, with the demo
// services) runs the trip saga; the CLI reaches it only as one of the users.
func TestEmbeddedNodeWithUsersRunsAsNode(t *testing.T) {
	t.Parallel()
	n, dir, cfgFile := startNodeWithUsers(t)
	sendTrip(t, n, "lisbon", tripRequest)
	waitTrip(t, n, "lisbon", sagaTimeout, "confirmed", func(s tripState) bool { return s.Status == "confirmed" })

	listen := "ESJET_NATS_EMBEDDED_LISTEN=" + n.natsListen
	out, stderr, code := runCLIFailEnv(t, dir, []string{listen, "ESJET_NATS_EMBEDDED_AUTH_USER=oncall", "ESJET_NATS_EMBEDDED_AUTH_PASSWORD=pw-oncall"}, "--config", cfgFile, "state", "trip", "lisbon")
	if code != 0 || !strings.Contains(out, "confirmed") {
		t.Fatalf("esjet state as the operator: exit %d\n%s%s", code, out, stderr)
	}
	if _, stderr, code := runCLIFailEnv(t, dir, []string{listen}, "--config", cfgFile, "state", "trip", "lisbon"); code == 0 || !strings.Contains(strings.ToLower(stderr), "authorization") {
		t.Fatalf("esjet state without a user: exit %d\n%s", code, stderr)
	}

	// The operator discards a dead letter; the audit record names the NATS
	// user the server authenticated, not $USER@host.
	sendTrip(t, n, "atl", strings.Replace(tripRequest, "Lisbon", "Atlantis", 1))
	waitTrip(t, n, "atl", sagaTimeout, "cancelled", func(s tripState) bool { return s.Status == "cancelled" })
	oncall := []string{listen, "ESJET_NATS_EMBEDDED_AUTH_USER=oncall", "ESJET_NATS_EMBEDDED_AUTH_PASSWORD=pw-oncall"}
	// The letter is written just after the failure the trip was told.
	natstest.Eventually(t, 30*time.Second, func() bool {
		_, _, code := runCLIFailEnv(t, dir, oncall, "--config", cfgFile, "dlq", "show", "trip:atl:2:0")
		return code == 0
	})
	out, stderr, code = runCLIFailEnv(t, dir, oncall, "--config", cfgFile, "dlq", "discard", "trip:atl:2:0", "--reason", "refunded by hand")
	if code != 0 {
		t.Fatalf("esjet dlq discard as the operator: exit %d\n%s%s", code, out, stderr)
	}
	out, stderr, code = runCLIFailEnv(t, dir, oncall, "--config", cfgFile, "dlq", "show", "trip:atl:2:0")
	if !strings.Contains(out+stderr, "discarded by nats user oncall") {
		t.Errorf("esjet dlq show after the discard: exit %d\n%s%s", code, out, stderr)
	}
	if strings.Contains(strings.ToLower(n.stderr.String()), "permissions violation") {
		t.Errorf("the node hit a permission violation:\n%s", n.stderr.String())
	}
	n.stop(t, syscall.SIGTERM)
}

// operatorDLQ: as sec-operator, `esjet dlq retry` and `esjet dlq discard`
// go through the node (esjet.sec.ops.sec-operator.dlq.*): a retry of a
// command whose aggregate was told it failed is refused unless
// --after-failed, the audit records say "nats user sec-operator", and the
// operator cannot publish to another user's ops subject, to OUTBOX, the
// audit subjects, or delete a dead letter.
func operatorDLQ(t *testing.T, dir, url string, n *node, op *roleConn, forged *nats.Msg) {
	t.Helper()
	for _, id := range []string{"atl1", "atl2"} {
		sendTrip(t, n, id, strings.Replace(tripRequest, "Lisbon", "Atlantis", 1))
	}
	for _, id := range []string{"atl1", "atl2"} {
		waitTrip(t, n, id, sagaTimeout, "cancelled", func(s tripState) bool { return s.Status == "cancelled" })
	}
	env := []string{"ESJET_NAMESPACE=sec", "ESJET_NATS_EXTERNAL_AUTH_USER=sec-operator", "ESJET_NATS_EXTERNAL_AUTH_PASSWORD=pw-sec-operator"}
	cli := func(args ...string) (string, int) {
		t.Helper()
		out, stderr, code := runCLIFailEnv(t, dir, env, append(args, "--url", url)...)
		return out + stderr, code
	}
	for _, id := range []string{"atl1", "atl2"} {
		// The letter is written just after the failure the trip was told.
		natstest.Eventually(t, 30*time.Second, func() bool { _, code := cli("dlq", "show", "trip:"+id+":2:0"); return code == 0 })
	}
	out, code := cli("dlq", "retry", "trip:atl1:2:0")
	if code == 0 || !strings.Contains(out, "409") || !strings.Contains(out, "--after-failed") {
		t.Fatalf("operator: dlq retry of a command its aggregate was told failed: exit %d\n%s", code, out)
	}
	out, code = cli("dlq", "retry", "trip:atl1:2:0", "--after-failed")
	if code != 0 || !strings.Contains(out, "by nats user sec-operator") || !strings.Contains(out, "trip:atl1:2:0:redrive:") {
		t.Fatalf("operator: dlq retry --after-failed: exit %d\n%s", code, out)
	}
	out, code = cli("dlq", "discard", "trip:atl2:2:0", "--reason", "refunded by hand")
	if code != 0 {
		t.Fatalf("operator: dlq discard: exit %d\n%s", code, out)
	}
	// The history names the operator (the re-driven flight finds no seats
	// again and dies anew: a new entry, the retried one settled).
	history := regexp.MustCompile(`(?m)^  \S+\s+(retried|discarded)\s+nats user sec-operator\s+`)
	for id, action := range map[string]string{"trip:atl1:2:0": "retried", "trip:atl2:2:0": "discarded"} {
		out, code = cli("dlq", "show", id)
		if m := history.FindStringSubmatch(out); code != 0 || m == nil || m[1] != action {
			t.Errorf("operator: dlq show %s: exit %d, want %s by nats user sec-operator in its history\n%s", id, code, action, out)
		}
	}
	if out, code = cli("dlq", "ls"); code != 0 || strings.Contains(out, "trip:atl2") {
		t.Errorf("operator: dlq ls after the discard: exit %d\n%s", code, out)
	}

	// Another user's ops subject, OUTBOX, the audit records, a delete.
	for _, subject := range []string{wire.ActionSubject("sec", "sec-admin", ops.ActionDiscard), "sec.outbox.book_flight", "sec.dlq.audit.book_flight", "$JS.API.STREAM.MSG.DELETE.SEC_DLQ"} {
		forged.Subject = subject
		if err := op.nc.PublishMsg(forged); err != nil {
			t.Fatal(err)
		}
		op.refused(t, "operator: publish", subject)
	}
	// The node serves no ops request it cannot read, whoever asks: the
	// client may not even ask.
	client := connectAs(t, url, "sec-client")
	forged.Subject = wire.ActionSubject("sec", "sec-operator", ops.ActionDiscard)
	if err := client.nc.PublishMsg(forged); err != nil {
		t.Fatal(err)
	}
	client.refused(t, "client: ask for a DLQ action", forged.Subject)
}
