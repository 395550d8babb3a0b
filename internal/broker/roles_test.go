package broker

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
)

// subjectMatch reports whether NATS subject pattern p matches literal s.
func subjectMatch(p, s string) bool {
	pt, st := strings.Split(p, "."), strings.Split(s, ".")
	for i, tok := range pt {
		if tok == ">" {
			return len(st) > i
		}
		if i >= len(st) || (tok != "*" && tok != st[i]) {
			return false
		}
	}
	return len(pt) == len(st)
}

// allowed reports whether p admits literal subject s (queue "" for a
// publish or a plain subscription), as nats-server decides it.
func allowed(p *server.SubjectPermission, s, queue string) bool {
	if p == nil {
		return true
	}
	match := func(list []string) (plain, queues []string) {
		for _, e := range list {
			subj, q, _ := strings.Cut(e, " ")
			if subjectMatch(subj, s) {
				if q == "" {
					plain = append(plain, e)
				} else {
					queues = append(queues, q)
				}
			}
		}
		return plain, queues
	}
	ok := true
	if p.Allow != nil {
		plain, queues := match(p.Allow)
		ok = len(plain) > 0
		if queue != "" && len(queues) > 0 {
			ok = containsStr(queues, queue)
		}
	}
	if ok && p.Deny != nil {
		plain, queues := match(p.Deny)
		ok = len(plain) == 0 && !(queue != "" && containsStr(queues, queue))
	}
	return ok
}

func containsStr(l []string, s string) bool {
	for _, e := range l {
		if e == s {
			return true
		}
	}
	return false
}

func perms(t *testing.T, role string) *server.Permissions {
	t.Helper()
	p, err := RolePermissions(role, RoleSpec{Namespace: "trips", Targets: []string{"billing.charge"}, Subject: "billing.charge", Bucket: "billing_keys", User: "oncall"})
	if err != nil {
		t.Fatalf("RolePermissions(%s): %v", role, err)
	}
	return p
}

// The writes that skip Decide and OCC or destroy state: no role but node
// (and admin) may publish them, and the node may not delete or purge.
var protectedWrites = []string{
	"trips.evt.trip.t1", "trips.outbox.book_flight", "trips.schedule.x", "trips.dlq.book_flight",
	"$KV.trips_snapshots.trip.t1", "$KV.trips_receipts.abc",
}

var destructiveRequests = []string{
	"$JS.API.STREAM.DELETE.TRIPS_EVENTS", "$JS.API.STREAM.PURGE.TRIPS_EVENTS",
	"$JS.API.STREAM.DELETE.KV_trips_receipts", "$JS.API.STREAM.PURGE.TRIPS_OUTBOX",
	"$JS.API.STREAM.MSG.DELETE.TRIPS_EVENTS", "$JS.API.ACCOUNT.PURGE.ACC",
}

func TestRolesOnlyNodeWritesTheLogOutboxDLQAndBuckets(t *testing.T) {
	for _, role := range []string{RoleClient, RoleReceiver, RoleOperator} {
		p := perms(t, role)
		for _, s := range append(protectedWrites, destructiveRequests...) {
			if allowed(p.Publish, s, "") {
				t.Errorf("role %s may publish %s", role, s)
			}
		}
		// Pulling from the node's consumers swallows commands; updating
		// them re-points them.
		for _, s := range []string{"$JS.API.CONSUMER.MSG.NEXT.TRIPS_OUTBOX.esjet-worker-book_flight", "$JS.API.CONSUMER.CREATE.TRIPS_EVENTS.esjet-relay.trips.evt.>",
			"$JS.API.CONSUMER.DURABLE.CREATE.TRIPS_EVENTS.esjet-relay", "$JS.API.STREAM.UPDATE.TRIPS_EVENTS", "$JS.API.STREAM.CREATE.TRIPS_EVENTS"} {
			if allowed(p.Publish, s, "") {
				t.Errorf("role %s may publish %s", role, s)
			}
		}
		// Another user's DLQ actions: the node's audit record would name them.
		for _, s := range []string{"esjet.trips.ops.someone.dlq.retry", "esjet.trips.ops.someone.dlq.discard", "esjet.trips.ops.oncall_.dlq.retry"} {
			if allowed(p.Publish, s, "") {
				t.Errorf("role %s may publish %s", role, s)
			}
		}
		for _, q := range []string{"", APIQueue("trips"), "other"} {
			if allowed(p.Subscribe, "esjet.trips.trip.t1.book", q) {
				t.Errorf("role %s may subscribe to the API (queue %q)", role, q)
			}
		}
	}
	node := perms(t, RoleNode)
	for _, s := range protectedWrites {
		if !allowed(node.Publish, s, "") {
			t.Errorf("node may not publish %s", s)
		}
	}
	for _, s := range destructiveRequests {
		if allowed(node.Publish, s, "") {
			t.Errorf("node may publish %s", s)
		}
	}
	if !allowed(node.Subscribe, "esjet.trips.trip.t1.book", APIQueue("trips")) {
		t.Error("node may not serve the API in its queue group")
	}
	if allowed(node.Subscribe, "_INBOX.abc", "") {
		t.Error("node receives its replies under _INBOX.>, where every client may listen")
	}
	if allowed(node.Subscribe, "esjet.trips.trip.t1.book", "") || allowed(node.Subscribe, "esjet.trips.>", "spoof") {
		t.Error("node may subscribe to the API outside its queue group")
	}
	admin := perms(t, RoleAdmin)
	for _, s := range append(protectedWrites, destructiveRequests...) {
		if !allowed(admin.Publish, s, "") {
			t.Errorf("admin may not publish %s", s)
		}
	}
}

func TestRolesDoTheirJobs(t *testing.T) {
	cases := []struct {
		role string
		pub  []string
		sub  []string
	}{
		{RoleNode, []string{"$JS.API.STREAM.CREATE.TRIPS_EVENTS", "$JS.API.STREAM.CREATE.KV_trips_snapshots", "$JS.API.DIRECT.GET.KV_trips_snapshots.$KV.trips_snapshots.trip.t1",
			"$JS.API.CONSUMER.MSG.NEXT.TRIPS_OUTBOX.esjet-worker-x", "$JS.ACK.TRIPS_OUTBOX.esjet-worker-x.1.2.3.4.5", "billing.charge", "$SRV.PING"},
			[]string{NodeInboxPrefix("trips") + ".abc", "$SRV.PING.esjet", "billing.charge"}},
		{RoleClient, []string{"esjet.trips.trip.t1.book", "esjet.trips.trip.t1.state", "esjet.trips.raw.append.x.y", "$SRV.INFO.esjet"}, []string{"_INBOX_oncall.abc.def"}},
		{RoleOperator, []string{"esjet.trips.trip.t1.state", "esjet.trips.trip.t1.events", "$JS.API.STREAM.INFO.TRIPS_DLQ", "$JS.API.STREAM.MSG.GET.TRIPS_EVENTS",
			"$JS.API.CONSUMER.INFO.TRIPS_EVENTS.esjet-relay", "$JS.API.DIRECT.GET.TRIPS_EVENTS", "esjet.trips.ops.oncall.dlq.retry", "esjet.trips.ops.oncall.dlq.discard", UserInfoSubject}, []string{"_INBOX_oncall.x"}},
		{RoleReceiver, []string{"$KV.billing_keys.k1", "$JS.API.STREAM.CREATE.KV_billing_keys"}, []string{"billing.charge"}},
	}
	for _, c := range cases {
		p := perms(t, c.role)
		for _, s := range c.pub {
			if !allowed(p.Publish, s, "") {
				t.Errorf("role %s may not publish %s", c.role, s)
			}
		}
		for _, s := range c.sub {
			if !allowed(p.Subscribe, s, "") {
				t.Errorf("role %s may not subscribe to %s", c.role, s)
			}
		}
	}
	op := perms(t, RoleOperator)
	// The node writes OUTBOX, the receipts and the audit record of a DLQ
	// action: the operator writes none of them, nor deletes a dead letter.
	for _, s := range []string{"esjet.trips.trip.t1.book", "$JS.API.STREAM.MSG.DELETE.TRIPS_EVENTS", "trips.dlq.book_flight",
		"trips.dlq.audit.book_flight", "$JS.API.STREAM.MSG.DELETE.TRIPS_DLQ", "trips.outbox.book_flight", "$KV.trips_receipts.abc",
		// No stream, bucket or consumer of its own: a stream's republish or
		// a push consumer's deliveries are written by the server.
		"$JS.API.STREAM.CREATE.OBJ_trips_reconcile", "$O.trips_reconcile.M.Y2hlY2twb2ludA", "$JS.API.CONSUMER.CREATE.TRIPS_EVENTS",
		"$JS.API.CONSUMER.CREATE.TRIPS_EVENTS.x.trips.evt.>", "$JS.API.CONSUMER.DURABLE.CREATE.TRIPS_EVENTS.x"} {
		if allowed(op.Publish, s, "") {
			t.Errorf("operator may publish %s", s)
		}
	}
	rc := perms(t, RoleReceiver)
	if allowed(rc.Subscribe, "billing.refund", "") || allowed(rc.Subscribe, ">", "") || allowed(rc.Subscribe, "_INBOX.x", "") {
		t.Error("receiver may subscribe beyond its subject")
	}
	if rc.Response == nil {
		t.Error("receiver may not reply")
	}
	bare, err := RolePermissions(RoleReceiver, RoleSpec{Namespace: "trips", Subject: "billing.charge", User: "billing"})
	if err != nil {
		t.Fatal(err)
	}
	if allowed(bare.Publish, "billing.charge", "") || allowed(bare.Publish, "$JS.API.INFO", "") {
		t.Error("receiver without a bucket may publish")
	}
}

func TestRolePermissionsRefusesUnknownRoleAndMissingSubject(t *testing.T) {
	if _, err := RolePermissions("root", RoleSpec{Namespace: "trips"}); !errors.Is(err, ErrRole) || !strings.Contains(err.Error(), "node, client") {
		t.Errorf("unknown role: %v", err)
	}
	if _, err := RolePermissions(RoleReceiver, RoleSpec{Namespace: "trips", User: "billing"}); !errors.Is(err, ErrRole) {
		t.Errorf("receiver without subject: %v", err)
	}
	for _, role := range []string{RoleOperator, RoleClient, RoleReceiver} {
		for _, user := range []string{"", "a.b", "*", "on call"} {
			if _, err := RolePermissions(role, RoleSpec{Namespace: "trips", User: user, Subject: "billing.charge"}); !errors.Is(err, ErrRole) || !strings.Contains(err.Error(), "subject token") {
				t.Errorf("%s with user %q: %v", role, user, err)
			}
		}
	}
}

// The printed accounts block is a valid nats-server config that puts each
// user in its role's account with exactly the role's permissions, and wires
// the imports.
func TestServerAccountsLoadsInNatsServer(t *testing.T) {
	var users []RoleUser
	for _, role := range Roles {
		name := "trips-" + role
		p, err := RolePermissions(role, RoleSpec{Namespace: "trips", Targets: []string{"billing.charge"}, Subject: "billing.charge", Bucket: "billing_keys", User: name})
		if err != nil {
			t.Fatal(err)
		}
		users = append(users, RoleUser{Name: name, Role: role, Permissions: p, Subject: "billing.charge", Bucket: "billing_keys"})
		t.Setenv(PasswordVar(name), "pw-"+role)
	}
	accounts, err := Accounts("trips", users)
	if err != nil {
		t.Fatal(err)
	}
	text := ServerAccounts(accounts)
	file := filepath.Join(t.TempDir(), "auth.conf")
	if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	opts, err := server.ProcessConfigFile(file)
	if err != nil {
		t.Fatalf("nats-server config:\n%s\n%v", text, err)
	}
	if len(opts.Users) != len(Roles) {
		t.Fatalf("users: %d, want %d", len(opts.Users), len(Roles))
	}
	for _, u := range opts.Users {
		i := slices.IndexFunc(users, func(r RoleUser) bool { return r.Name == u.Username })
		if i < 0 {
			t.Fatalf("unexpected user %s", u.Username)
		}
		want := users[i]
		if u.Password != "pw-"+want.Role || u.Account == nil || u.Account.Name != RoleAccount("trips", want.Role, want.Name) {
			t.Errorf("user %s: password %s account %v", u.Username, u.Password, u.Account)
		}
		got, _ := json.Marshal(u.Permissions)
		exp, _ := json.Marshal(want.Permissions)
		if string(got) != string(exp) {
			t.Errorf("user %s permissions:\n got %s\nwant %s", u.Username, got, exp)
		}
	}
	if names := []string{accounts[0].Name, accounts[1].Name, accounts[2].Name, accounts[3].Name}; !slices.Equal(names, []string{"ESJET_TRIPS", "ESJET_TRIPS_CLIENTS", "ESJET_TRIPS_OPS", "ESJET_TRIPS_RECV_TRIPS_RECEIVER"}) {
		t.Errorf("accounts %v", names)
	}
}

// A receiver's subject is exported into the namespace account: one that
// overlaps what esjet sends or serves would hand the node's own messages
// to the receiver, so it is refused, as is anything but one literal subject.
func TestReceiverSubjectMayNotOverlapEsjets(t *testing.T) {
	for _, subj := range []string{"trips.outbox.release_budget", "esjet.trips.trip.t1.confirm", "$JS.API.INFO", "$KV.x.y",
		"_INBOX_trips_node.x", "_INBOX.x", "esjet-edge.trips.src.s1.x", "billing.*", "billing.>", "", "a..b", "bill ing"} {
		_, err := RolePermissions(RoleReceiver, RoleSpec{Namespace: "trips", Subject: subj, User: "billing"})
		if !errors.Is(err, ErrRole) {
			t.Errorf("receiver on %q: %v, want refused", subj, err)
		}
	}
	if _, err := RolePermissions(RoleReceiver, RoleSpec{Namespace: "trips", Subject: "billing.charge", User: "billing"}); err != nil {
		t.Errorf("billing.charge: %v", err)
	}
}
