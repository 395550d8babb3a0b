package streams

import (
	"bytes"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/natstest"
)

// noUpdate may do everything but update a stream: the node role's rights
// over its streams (it may create them, never change them).
var noUpdate = &server.Permissions{
	Publish:   &server.SubjectPermission{Allow: []string{">"}, Deny: []string{"$JS.API.STREAM.UPDATE.>"}},
	Subscribe: &server.SubjectPermission{Allow: []string{">"}},
}

// nodeAndAdmin starts a server with a "node" user that may not update
// streams and an "admin" that may, and connects both.
func nodeAndAdmin(t *testing.T) (node, admin jetstream.JetStream) {
	t.Helper()
	s := natstest.RunServer(t, func(o *server.Options) {
		o.Users = []*server.User{{Username: "node", Password: "x", Permissions: noUpdate}, {Username: "admin", Password: "x"}}
	})
	connect := func(user string) jetstream.JetStream {
		nc, err := nats.Connect(s.ClientURL(), nats.UserInfo(user, "x"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		return js
	}
	return connect("node"), connect("admin")
}

func updateStream(t *testing.T, js jetstream.JetStream, name string, change func(*jetstream.StreamConfig)) {
	t.Helper()
	cfg := streamInfo(t, js, name).Config
	change(&cfg)
	if _, err := js.UpdateStream(t.Context(), cfg); err != nil {
		t.Fatalf("update %s: %v", name, err)
	}
}

// A node that may not update streams creates a whole namespace on a fresh
// server, receipts with atomic batches from their first CREATE, and starts
// again on it (and on a namespace an admin provisioned) without a change.
func TestEnsureCreatesEverythingWithoutUpdateRights(t *testing.T) {
	t.Parallel()
	node, admin := nodeAndAdmin(t)
	ns := natstest.Namespace(t)
	names := NamesFor(ns)
	if _, err := node.Stream(t.Context(), names.Events); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Fatalf("EVENTS before: %v", err)
	}
	// The user really may not update: an update is refused.
	if _, err := node.CreateStream(t.Context(), jetstream.StreamConfig{Name: "PROBE_" + ns, Subjects: []string{"probe." + ns}}); err != nil {
		t.Fatal(err)
	}
	if _, err := node.UpdateStream(t.Context(), jetstream.StreamConfig{Name: "PROBE_" + ns, Subjects: []string{"probe." + ns}, MaxMsgs: 5}); err == nil {
		t.Fatal("the node user updated a stream")
	}

	changes, err := Ensure(t.Context(), node, Objects(ns, ProvisionConfig{}), nil)
	if err != nil {
		t.Fatalf("ensure on a fresh server: %v", err)
	}
	got := changesByName(t, changes)
	for _, name := range []string{names.Events, names.Outbox, names.DLQ, names.Snapshots, names.Receipts} {
		if got[name].Action != "created" {
			t.Errorf("%s: %+v, want created", name, got[name])
		}
	}
	if !bucketConfig(t, node, names.Receipts).AllowAtomicPublish {
		t.Error("receipts were created without atomic batches")
	}
	if bucketConfig(t, node, names.Snapshots).AllowAtomicPublish {
		t.Error("snapshots were created with atomic batches")
	}
	// The buckets are KV buckets: they open, take puts, and the receipts
	// take an atomic batch.
	kv, err := node.KeyValue(t.Context(), names.Receipts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(t.Context(), "a", []byte("1")); err != nil {
		t.Fatal(err)
	}
	batch := []*nats.Msg{nats.NewMsg("$KV." + names.Receipts + ".b"), nats.NewMsg("$KV." + names.Receipts + ".c")}
	if _, err := PublishAtomic(t.Context(), node.Conn(), batch); err != nil {
		t.Fatalf("atomic batch to receipts: %v", err)
	}
	if e, err := kv.Get(t.Context(), "c"); err != nil || e.Revision() != 3 {
		t.Fatalf("receipt c after the batch: %v, %v", e, err)
	}
	if _, err := Open(t.Context(), node, ns, Config{}, nil); err != nil {
		t.Fatalf("open the log: %v", err)
	}

	again, err := Ensure(t.Context(), node, Objects(ns, ProvisionConfig{}), nil)
	if err != nil {
		t.Fatalf("ensure again: %v", err)
	}
	for _, c := range again {
		if c.Action != "unchanged" {
			t.Errorf("ensure again: %s", c)
		}
	}
	// What the node created is what an admin's provision wants.
	plan, err := Apply(t.Context(), admin, Objects(ns, ProvisionConfig{}), PlanOnly, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range plan {
		if c.Action != "unchanged" {
			t.Errorf("provision's plan after the node created the namespace: %s", c)
		}
	}

	// A namespace an admin provisioned (buckets through nats.go's
	// CreateKeyValue, then updated) is one the node starts on unchanged.
	ns2 := natstest.Namespace(t)
	names2 := NamesFor(ns2)
	for _, b := range BucketConfigs(names2, ProvisionConfig{}) {
		if _, err := admin.CreateKeyValue(t.Context(), b); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Provision(t.Context(), admin, ns2, ProvisionConfig{}, nil); err != nil {
		t.Fatal(err)
	}
	changes, err = Ensure(t.Context(), node, Objects(ns2, ProvisionConfig{}), nil)
	if err != nil {
		t.Fatalf("ensure on a provisioned namespace: %v", err)
	}
	for _, c := range changes {
		if c.Action != "unchanged" {
			t.Errorf("ensure on a provisioned namespace: %s", c)
		}
	}
}

// An admin set EVENTS to keep one message per subject (an update the
// server accepts even with purges denied, and which would delete every
// aggregate's history at its next decision): the node refuses to start,
// names the setting and the fix, and the log stays whole.
func TestEnsureRefusesAnEventLogThatWouldLoseHistory(t *testing.T) {
	t.Parallel()
	node, admin := nodeAndAdmin(t)
	ns := natstest.Namespace(t)
	names := NamesFor(ns)
	if _, err := Ensure(t.Context(), node, Objects(ns, ProvisionConfig{}), nil); err != nil {
		t.Fatal(err)
	}
	l, err := Open(t.Context(), node, ns, Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"a1", "a2", "a3"} {
		if _, err := l.Append(t.Context(), decision("acct", id, "opened"), Position{}); err != nil {
			t.Fatal(err)
		}
	}
	updateStream(t, admin, names.Events, func(c *jetstream.StreamConfig) { c.MaxMsgsPerSubject = 1 })
	before := configJSON(t, streamInfo(t, admin, names.Events).Config)

	_, err = Ensure(t.Context(), node, Objects(ns, ProvisionConfig{}), nil)
	var se *StreamConfigError
	if !errors.Is(err, ErrUnsafeStream) || !errors.As(err, &se) {
		t.Fatalf("ensure over a truncating EVENTS: %v, want a StreamConfigError", err)
	}
	if se.Stream != names.Events || len(se.Diffs) != 1 || se.Diffs[0].Field != "max_msgs_per_subject" || se.Diffs[0].Kind != DiffLossy {
		t.Errorf("refusal %+v, want EVENTS max_msgs_per_subject lossy", se)
	}
	for _, want := range []string{"stream " + names.Events, "max_msgs_per_subject: 1 → unlimited", "history is deleted", "esjet provision", "admin"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	ev := streamInfo(t, admin, names.Events)
	if ev.State.Msgs != 3 {
		t.Errorf("EVENTS holds %d messages, want 3", ev.State.Msgs)
	}
	if after := configJSON(t, ev.Config); !bytes.Equal(before, after) {
		t.Errorf("the refused EVENTS was changed:\nbefore %s\nafter  %s", before, after)
	}

	// The fix the message names: esjet provision (Provision) as admin.
	if _, err := Provision(t.Context(), admin, ns, ProvisionConfig{}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := Ensure(t.Context(), node, Objects(ns, ProvisionConfig{}), nil); err != nil {
		t.Fatalf("ensure after provision: %v", err)
	}
	for _, id := range []string{"a1", "a2", "a3"} {
		if recs, err := l.Load(t.Context(), "acct", id, Position{}); err != nil || len(recs) != 1 {
			t.Errorf("load %s: %d records, %v", id, len(recs), err)
		}
	}
}

// Republish on OUTBOX makes the server write every command elsewhere
// (issue 26 wrote a forged decision into the log that way): refused.
func TestEnsureRefusesRepublishOnOutbox(t *testing.T) {
	t.Parallel()
	node, admin := nodeAndAdmin(t)
	ns := natstest.Namespace(t)
	names := NamesFor(ns)
	if _, err := Ensure(t.Context(), node, Objects(ns, ProvisionConfig{}), nil); err != nil {
		t.Fatal(err)
	}
	updateStream(t, admin, names.Outbox, func(c *jetstream.StreamConfig) {
		c.RePublish = &jetstream.RePublish{Source: ns + ".outbox.cancel_hotel", Destination: ns + ".evt.trip.t1"}
	})
	changes, err := Ensure(t.Context(), node, Objects(ns, ProvisionConfig{}), nil)
	var se *StreamConfigError
	if !errors.As(err, &se) || se.Stream != names.Outbox || se.Diffs[0].Field != "republish" {
		t.Fatalf("ensure over a republishing OUTBOX: %v", err)
	}
	if !strings.Contains(err.Error(), "republish: "+ns+".outbox.cancel_hotel → "+ns+".evt.trip.t1 → none") {
		t.Errorf("error %q does not show have → want", err)
	}
	if _, ok := changesByName(t, changes)[names.Events]; !ok {
		t.Error("the other streams were not checked")
	}
}

// A benign difference (a description, compression, a longer window) lets
// the node run, with a warning that names the field and esjet provision.
func TestEnsureWarnsOfABenignDifferenceAndRuns(t *testing.T) {
	t.Parallel()
	node, admin := nodeAndAdmin(t)
	ns := natstest.Namespace(t)
	names := NamesFor(ns)
	if _, err := Ensure(t.Context(), node, Objects(ns, ProvisionConfig{}), nil); err != nil {
		t.Fatal(err)
	}
	updateStream(t, admin, names.Events, func(c *jetstream.StreamConfig) {
		c.Description = "edited by hand"
		c.Duplicates = time.Hour
	})
	var logs bytes.Buffer
	changes, err := Ensure(t.Context(), node, Objects(ns, ProvisionConfig{}), slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatalf("ensure with a benign difference: %v", err)
	}
	c := changesByName(t, changes)[names.Events]
	if c.Action != "differs" || len(c.Fields) != 2 || !slices.Contains(c.Fields, "duplicate_window: 1h0m0s → 2m0s") {
		t.Errorf("EVENTS: %s, want differs in duplicate_window and description", c)
	}
	if out := logs.String(); !strings.Contains(out, "level=WARN") || !strings.Contains(out, "esjet provision") || !strings.Contains(out, "duplicate_window") {
		t.Errorf("no warning naming the field and esjet provision:\n%s", out)
	}
	if cfg := streamInfo(t, admin, names.Events).Config; cfg.Description != "edited by hand" {
		t.Errorf("the node changed EVENTS: description %q", cfg.Description)
	}
}

// What the node needs and may not set itself (atomic batches on receipts
// an older esjet made without them) refuses the start with the fix.
func TestEnsureRefusesReceiptsWithoutAtomicBatches(t *testing.T) {
	t.Parallel()
	node, admin := nodeAndAdmin(t)
	ns := natstest.Namespace(t)
	names := NamesFor(ns)
	if _, err := admin.CreateKeyValue(t.Context(), BucketConfigs(names, ProvisionConfig{})[1]); err != nil {
		t.Fatal(err)
	}
	_, err := Ensure(t.Context(), node, Objects(ns, ProvisionConfig{}), nil)
	var se *StreamConfigError
	if !errors.As(err, &se) || se.Stream != "KV_"+names.Receipts || se.Diffs[0].Field != "allow_atomic" || se.Diffs[0].Kind != DiffNeeded {
		t.Fatalf("ensure over receipts without atomic batches: %v", err)
	}
	if !strings.Contains(err.Error(), "esjet provision") {
		t.Errorf("error %q does not name esjet provision", err)
	}
	if _, err := Provision(t.Context(), admin, ns, ProvisionConfig{}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := Ensure(t.Context(), node, Objects(ns, ProvisionConfig{}), nil); err != nil {
		t.Fatalf("ensure after provision: %v", err)
	}
}

// A hub adds a site's sources itself, but refuses a hub stream whose
// limits would lose history like any node.
func TestEnsureHubUpdatesSourcesAndRefusesLossyLimits(t *testing.T) {
	t.Parallel()
	s := natstest.RunServer(t)
	_, js := natstest.Connect(t, s)
	ns := natstest.Namespace(t)
	names := NamesFor(ns)
	pc := ProvisionConfig{}
	if _, err := Ensure(t.Context(), js, HubObjects(ns, pc, HubConfig{Sites: []string{"s1"}}), nil); err != nil {
		t.Fatal(err)
	}
	changes, err := Ensure(t.Context(), js, HubObjects(ns, pc, HubConfig{Sites: []string{"s1", "s2"}}), nil)
	if err != nil {
		t.Fatalf("hub with a site added: %v", err)
	}
	if c := changesByName(t, changes)[names.Events]; c.Action != "updated" || !strings.HasPrefix(c.Fields[0], "sources") {
		t.Errorf("hub EVENTS: %s, want its sources updated", c)
	}
	if n := len(streamInfo(t, js, names.Events).Config.Sources); n != 2 {
		t.Errorf("hub EVENTS has %d sources, want 2", n)
	}
	updateStream(t, js, names.Events, func(c *jetstream.StreamConfig) { c.MaxAge = time.Hour })
	_, err = Ensure(t.Context(), js, HubObjects(ns, pc, HubConfig{Sites: []string{"s1", "s2"}}), nil)
	var se *StreamConfigError
	if !errors.As(err, &se) || se.Stream != names.Events || se.Diffs[0].Field != "max_age" {
		t.Fatalf("hub EVENTS with max_age: %v", err)
	}
	// A source no hub makes (another stream, into other subjects) is
	// refused, not quietly replaced.
	updateStream(t, js, names.Events, func(c *jetstream.StreamConfig) {
		c.MaxAge = 0
		c.Sources = append(c.Sources, &jetstream.StreamSource{Name: "OTHER", External: &jetstream.ExternalStream{APIPrefix: "$JS.s3.API"}})
	})
	_, err = Ensure(t.Context(), js, HubObjects(ns, pc, HubConfig{Sites: []string{"s1", "s2"}}), nil)
	if !errors.As(err, &se) || se.Diffs[0].Field != "sources" || se.Diffs[0].Kind != DiffLossy {
		t.Fatalf("hub EVENTS with a foreign source: %v", err)
	}
}

// Plan reports what Provision would do and changes nothing.
func TestPlanChangesNothing(t *testing.T) {
	t.Parallel()
	s := natstest.RunServer(t)
	_, js := natstest.Connect(t, s)
	ns := natstest.Namespace(t)
	names := NamesFor(ns)
	plan, err := Apply(t.Context(), js, Objects(ns, ProvisionConfig{}), PlanOnly, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range plan {
		if c.Action != "create" {
			t.Errorf("plan on an empty server: %s", c)
		}
	}
	if _, err := js.Stream(t.Context(), names.Events); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Fatalf("the plan created EVENTS: %v", err)
	}
	if _, err := Provision(t.Context(), js, ns, ProvisionConfig{}, nil); err != nil {
		t.Fatal(err)
	}
	plan, err = Apply(t.Context(), js, Objects(ns, ProvisionConfig{OutboxMaxAge: time.Hour}), PlanOnly, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c := changesByName(t, plan)[names.Outbox]; c.Action != "update" || !slices.Equal(c.Fields, []string{"max_age: 168h0m0s → 1h0m0s"}) {
		t.Errorf("plan: OUTBOX %s", c)
	}
	if cfg := streamInfo(t, js, names.Outbox).Config; cfg.MaxAge != 7*24*time.Hour {
		t.Errorf("the plan changed OUTBOX max_age to %v", cfg.MaxAge)
	}
}

func TestDiffStreamClassifies(t *testing.T) {
	t.Parallel()
	names := NamesFor("cls")
	want := StreamConfigs(names, ProvisionConfig{})
	events, outbox := want[0], want[1]
	receipts := bucketObjects(names, ProvisionConfig{})[1].Config
	for _, tc := range []struct {
		name   string
		want   jetstream.StreamConfig
		change func(*jetstream.StreamConfig)
		field  string
		kind   DiffKind
	}{
		{"events max_msgs", events, func(c *jetstream.StreamConfig) { c.MaxMsgs = 100 }, "max_msgs", DiffLossy},
		{"events max_bytes", events, func(c *jetstream.StreamConfig) { c.MaxBytes = 1 << 30 }, "max_bytes", DiffLossy},
		{"events max_age", events, func(c *jetstream.StreamConfig) { c.MaxAge = time.Hour }, "max_age", DiffLossy},
		{"events per subject", events, func(c *jetstream.StreamConfig) { c.MaxMsgsPerSubject = 1 }, "max_msgs_per_subject", DiffLossy},
		{"events deny_purge off", events, func(c *jetstream.StreamConfig) { c.DenyPurge = false }, "deny_purge", DiffLossy},
		{"events deny_delete off", events, func(c *jetstream.StreamConfig) { c.DenyDelete = false }, "deny_delete", DiffLossy},
		{"events rollup", events, func(c *jetstream.StreamConfig) { c.AllowRollup = true }, "allow_rollup", DiffLossy},
		{"events extra subject", events, func(c *jetstream.StreamConfig) { c.Subjects = append(c.Subjects, "esjet.cls.>") }, "subjects", DiffLossy},
		{"events transform", events, func(c *jetstream.StreamConfig) {
			c.SubjectTransform = &jetstream.SubjectTransformConfig{Source: "cls.evt.>", Destination: "x.>"}
		}, "subject_transform", DiffLossy},
		{"events mirror", events, func(c *jetstream.StreamConfig) { c.Mirror = &jetstream.StreamSource{Name: "X"} }, "mirror", DiffLossy},
		{"events sources", events, func(c *jetstream.StreamConfig) { c.Sources = []*jetstream.StreamSource{{Name: "X"}} }, "sources", DiffLossy},
		{"events msg ttl", events, func(c *jetstream.StreamConfig) { c.AllowMsgTTL = true }, "allow_msg_ttl", DiffLossy},
		{"events memory", events, func(c *jetstream.StreamConfig) { c.Storage = jetstream.MemoryStorage }, "storage", DiffLossy},
		{"events interest", events, func(c *jetstream.StreamConfig) { c.Retention = jetstream.InterestPolicy }, "retention", DiffLossy},
		{"events async persist", events, func(c *jetstream.StreamConfig) { c.PersistMode = jetstream.AsyncPersistMode }, "persist_mode", DiffLossy},
		{"events no atomic", events, func(c *jetstream.StreamConfig) { c.AllowAtomicPublish = false }, "allow_atomic", DiffNeeded},
		{"events no direct", events, func(c *jetstream.StreamConfig) { c.AllowDirect = false }, "allow_direct", DiffNeeded},
		{"events shorter dedup", events, func(c *jetstream.StreamConfig) { c.Duplicates = time.Second }, "duplicate_window", DiffNeeded},
		{"events smaller messages", events, func(c *jetstream.StreamConfig) { c.MaxMsgSize = 1024 }, "max_msg_size", DiffNeeded},
		{"events longer dedup", events, func(c *jetstream.StreamConfig) { c.Duplicates = time.Hour }, "duplicate_window", DiffBenign},
		{"events description", events, func(c *jetstream.StreamConfig) { c.Description = "x" }, "description", DiffBenign},
		{"events replicas", events, func(c *jetstream.StreamConfig) { c.Replicas = 3 }, "replicas", DiffBenign},
		{"events unlimited message size", events, func(c *jetstream.StreamConfig) { c.MaxMsgSize = -1 }, "max_msg_size", DiffBenign},
		{"events discard old, no limits", events, func(c *jetstream.StreamConfig) { c.Discard = jetstream.DiscardOld }, "discard", DiffBenign},
		{"outbox shorter max_age", outbox, func(c *jetstream.StreamConfig) { c.MaxAge = time.Hour }, "max_age", DiffLossy},
		{"outbox longer max_age", outbox, func(c *jetstream.StreamConfig) { c.MaxAge = 30 * 24 * time.Hour }, "max_age", DiffBenign},
		{"outbox no max_age", outbox, func(c *jetstream.StreamConfig) { c.MaxAge = 0 }, "max_age", DiffBenign},
		{"outbox republish", outbox, func(c *jetstream.StreamConfig) {
			c.RePublish = &jetstream.RePublish{Source: ">", Destination: "cls.evt.x.y"}
		}, "republish", DiffLossy},
		{"outbox no schedules", outbox, func(c *jetstream.StreamConfig) { c.AllowMsgSchedules = false }, "allow_msg_schedules", DiffNeeded},
		{"receipts max_age", receipts, func(c *jetstream.StreamConfig) { c.MaxAge = time.Hour }, "max_age", DiffLossy},
		{"receipts more history", receipts, func(c *jetstream.StreamConfig) { c.MaxMsgsPerSubject = 5 }, "max_msgs_per_subject", DiffBenign},
		{"receipts no atomic", receipts, func(c *jetstream.StreamConfig) { c.AllowAtomicPublish = false }, "allow_atomic", DiffNeeded},
	} {
		have := tc.want
		have.Subjects = slices.Clone(have.Subjects)
		tc.change(&have)
		diffs := diffStream(have, tc.want)
		if len(diffs) != 1 || diffs[0].Field != tc.field || diffs[0].Kind != tc.kind {
			t.Errorf("%s: %+v, want one %s difference in %s", tc.name, diffs, tc.kind, tc.field)
		}
		if d := diffStream(tc.want, tc.want); len(d) != 0 {
			t.Errorf("%s: the wanted config differs from itself: %+v", tc.name, d)
		}
	}
}
