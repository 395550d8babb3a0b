package streams

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/natstest"
)

// changesByName indexes Provision's report and fails on a duplicate entry.
func changesByName(t *testing.T, changes []Change) map[string]Change {
	t.Helper()
	m := make(map[string]Change, len(changes))
	for _, c := range changes {
		if _, dup := m[c.Name]; dup {
			t.Fatalf("Provision reported %s twice: %+v", c.Name, changes)
		}
		m[c.Name] = c
	}
	return m
}

func streamInfo(t *testing.T, js jetstream.JetStream, name string) *jetstream.StreamInfo {
	t.Helper()
	st, err := js.Stream(t.Context(), name)
	if err != nil {
		t.Fatalf("stream %s: %v", name, err)
	}
	return st.CachedInfo()
}

func bucketConfig(t *testing.T, js jetstream.JetStream, bucket string) jetstream.StreamConfig {
	t.Helper()
	kv, err := js.KeyValue(t.Context(), bucket)
	if err != nil {
		t.Fatalf("bucket %s: %v", bucket, err)
	}
	status, err := kv.Status(t.Context())
	if err != nil {
		t.Fatalf("bucket %s status: %v", bucket, err)
	}
	return status.(*jetstream.KeyValueBucketStatus).StreamInfo().Config
}

func configJSON(t *testing.T, c jetstream.StreamConfig) []byte {
	t.Helper()
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestProvisionCreatesStreamsAndBuckets(t *testing.T) {
	t.Parallel()
	s := natstest.RunServer(t)
	_, js := natstest.Connect(t, s)
	ns := natstest.Namespace(t)
	names := NamesFor(ns)
	pc := ProvisionConfig{DuplicateWindow: 90 * time.Second, OutboxMaxAge: 36 * time.Hour, MaxMessageSize: 256 << 10}

	changes, err := Provision(t.Context(), js, ns, pc, nil)
	if err != nil {
		t.Fatalf("provision: %v", err)
	}
	got := changesByName(t, changes)
	for _, name := range []string{names.Events, names.Outbox, names.DLQ, names.Snapshots, names.Receipts, names.Workers} {
		if c, ok := got[name]; !ok || c.Action != "created" || len(c.Fields) != 0 {
			t.Errorf("change for %s = %+v, want created", name, c)
		}
	}
	if len(changes) != 6 {
		t.Errorf("%d changes reported, want 6: %+v", len(changes), changes)
	}
	// The workers' bucket expires per-key leases by TTL; nothing else does.
	if wk := streamInfo(t, js, "KV_"+names.Workers).Config; !wk.AllowMsgTTL || wk.SubjectDeleteMarkerTTL != time.Second {
		t.Errorf("KV_%s allow_msg_ttl %v subject_delete_marker_ttl %v; want true, 1s", names.Workers, wk.AllowMsgTTL, wk.SubjectDeleteMarkerTTL)
	}

	ev := streamInfo(t, js, names.Events).Config
	if !slices.Equal(ev.Subjects, []string{ns + ".evt.>"}) || ev.Storage != jetstream.FileStorage || ev.Retention != jetstream.LimitsPolicy || ev.Replicas != 1 {
		t.Errorf("EVENTS subjects %v storage %v retention %v replicas %d", ev.Subjects, ev.Storage, ev.Retention, ev.Replicas)
	}
	if !ev.DenyDelete || !ev.DenyPurge || ev.AllowRollup || !ev.AllowDirect {
		t.Errorf("EVENTS deny_delete %v deny_purge %v allow_rollup %v allow_direct %v; want true true false true", ev.DenyDelete, ev.DenyPurge, ev.AllowRollup, ev.AllowDirect)
	}
	if ev.MaxAge != 0 || ev.MaxMsgs != -1 || ev.MaxBytes != -1 || ev.MaxMsgsPerSubject != -1 || ev.Discard != jetstream.DiscardNew {
		t.Errorf("EVENTS limits: max_age %v max_msgs %d max_bytes %d per_subject %d discard %v; want no limits, discard new", ev.MaxAge, ev.MaxMsgs, ev.MaxBytes, ev.MaxMsgsPerSubject, ev.Discard)
	}
	if ev.AllowMsgTTL || ev.AllowMsgSchedules {
		t.Errorf("EVENTS allows per-message TTL (%v) or schedules (%v)", ev.AllowMsgTTL, ev.AllowMsgSchedules)
	}
	if ev.Duplicates != 90*time.Second || ev.MaxMsgSize != 256<<10 {
		t.Errorf("EVENTS duplicates %v max_msg_size %d, want 1m30s and %d", ev.Duplicates, ev.MaxMsgSize, 256<<10)
	}

	ob := streamInfo(t, js, names.Outbox).Config
	if ob.MaxAge != 36*time.Hour || ob.Duplicates != 10*time.Minute || ob.MaxMsgSize != 256<<10 || ob.Storage != jetstream.FileStorage {
		t.Errorf("OUTBOX max_age %v duplicates %v (want the 10m outbox default) max_msg_size %d storage %v", ob.MaxAge, ob.Duplicates, ob.MaxMsgSize, ob.Storage)
	}
	if !slices.Equal(ob.Subjects, []string{ns + ".outbox.>", ns + ".schedule.>"}) || ob.DenyDelete || !ob.AllowMsgSchedules {
		t.Errorf("OUTBOX subjects %v deny_delete %v schedules %v", ob.Subjects, ob.DenyDelete, ob.AllowMsgSchedules)
	}
	dlq := streamInfo(t, js, names.DLQ).Config
	if !slices.Equal(dlq.Subjects, []string{ns + ".dlq.>"}) || dlq.MaxAge != 0 || dlq.Discard != jetstream.DiscardNew || dlq.Duplicates != 90*time.Second {
		t.Errorf("DLQ subjects %v max_age %v discard %v duplicates %v", dlq.Subjects, dlq.MaxAge, dlq.Discard, dlq.Duplicates)
	}
	for _, b := range []string{names.Snapshots, names.Receipts} {
		bc := bucketConfig(t, js, b)
		if bc.MaxMsgsPerSubject != 1 || bc.Storage != jetstream.FileStorage || bc.Replicas != 1 {
			t.Errorf("bucket %s: history %d storage %v replicas %d", b, bc.MaxMsgsPerSubject, bc.Storage, bc.Replicas)
		}
	}

	// The provisioned log is usable: Open accepts it.
	if _, err := Open(t.Context(), js, ns, Config{}, nil); err != nil {
		t.Fatalf("open after provision: %v", err)
	}
}

func TestProvisionTwiceChangesNothing(t *testing.T) {
	t.Parallel()
	s := natstest.RunServer(t)
	_, js := natstest.Connect(t, s)
	ns := natstest.Namespace(t)
	names := NamesFor(ns)
	pc := ProvisionConfig{DuplicateWindow: time.Minute}
	if _, err := Provision(t.Context(), js, ns, pc, nil); err != nil {
		t.Fatal(err)
	}
	streams := []string{names.Events, names.Outbox, names.DLQ}
	before := map[string]*jetstream.StreamInfo{}
	for _, n := range streams {
		before[n] = streamInfo(t, js, n)
	}
	bucketsBefore := map[string][]byte{}
	for _, b := range []string{names.Snapshots, names.Receipts} {
		bucketsBefore[b] = configJSON(t, bucketConfig(t, js, b))
	}

	changes, err := Provision(t.Context(), js, ns, pc, nil)
	if err != nil {
		t.Fatalf("second provision: %v", err)
	}
	if len(changes) != 6 {
		t.Fatalf("%d changes reported, want 6: %+v", len(changes), changes)
	}
	for _, c := range changes {
		if c.Action != "unchanged" || len(c.Fields) != 0 {
			t.Errorf("second provision: %s %s %v, want unchanged", c.Name, c.Action, c.Fields)
		}
	}
	for _, n := range streams {
		after := streamInfo(t, js, n)
		if b, a := configJSON(t, before[n].Config), configJSON(t, after.Config); !bytes.Equal(b, a) {
			t.Errorf("stream %s config changed:\nbefore %s\nafter  %s", n, b, a)
		}
		if !after.Created.Equal(before[n].Created) {
			t.Errorf("stream %s re-created: created %v, was %v", n, after.Created, before[n].Created)
		}
	}
	for b, was := range bucketsBefore {
		if now := configJSON(t, bucketConfig(t, js, b)); !bytes.Equal(was, now) {
			t.Errorf("bucket %s config changed:\nbefore %s\nafter  %s", b, was, now)
		}
	}
}

func TestProvisionUpdatesChangedSettings(t *testing.T) {
	t.Parallel()
	s := natstest.RunServer(t)
	_, js := natstest.Connect(t, s)
	ns := natstest.Namespace(t)
	names := NamesFor(ns)
	if _, err := Provision(t.Context(), js, ns, ProvisionConfig{}, nil); err != nil {
		t.Fatal(err)
	}
	// Data written before the update must survive it.
	l, err := Open(t.Context(), js, ns, Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := l.Append(t.Context(), decision("acct", "a1", "opened"), Position{})
	if err != nil {
		t.Fatal(err)
	}
	created := streamInfo(t, js, names.Events).Created

	pc := ProvisionConfig{DuplicateWindow: 30 * time.Second, OutboxDuplicateWindow: 20 * time.Minute, OutboxMaxAge: 48 * time.Hour, MaxMessageSize: 512 << 10}
	changes, err := Provision(t.Context(), js, ns, pc, nil)
	if err != nil {
		t.Fatalf("provision with a changed config: %v", err)
	}
	got := changesByName(t, changes)
	fieldNames := func(c Change) []string {
		var out []string
		for _, f := range c.Fields {
			name, _, _ := strings.Cut(f, ":")
			out = append(out, name)
		}
		slices.Sort(out)
		return out
	}
	for name, want := range map[string][]string{
		names.Events: {"duplicate_window", "max_msg_size"},
		names.Outbox: {"duplicate_window", "max_age", "max_msg_size"},
		names.DLQ:    {"duplicate_window", "max_msg_size"},
	} {
		c := got[name]
		if c.Action != "updated" || !slices.Equal(fieldNames(c), want) {
			t.Errorf("%s: %s %q, want updated with fields %v", name, c.Action, c.Fields, want)
		}
	}
	if c := got[names.Events]; !slices.Contains(c.Fields, "duplicate_window: 2m0s → 30s") || !slices.Contains(c.Fields, "max_msg_size: 1048576 → 524288") {
		t.Errorf("EVENTS fields %q do not say old → new", c.Fields)
	}
	for _, b := range []string{names.Snapshots, names.Receipts} {
		if got[b].Action != "unchanged" {
			t.Errorf("bucket %s: %+v, want unchanged", b, got[b])
		}
	}

	ev := streamInfo(t, js, names.Events)
	if ev.Config.Duplicates != 30*time.Second || ev.Config.MaxMsgSize != 512<<10 || !ev.Config.DenyDelete || !ev.Config.DenyPurge {
		t.Errorf("EVENTS after update: duplicates %v max_msg_size %d deny %v/%v", ev.Config.Duplicates, ev.Config.MaxMsgSize, ev.Config.DenyDelete, ev.Config.DenyPurge)
	}
	if !ev.Created.Equal(created) || ev.State.Msgs != 1 {
		t.Errorf("EVENTS was replaced rather than updated: created %v (was %v), %d messages", ev.Created, created, ev.State.Msgs)
	}
	ob := streamInfo(t, js, names.Outbox).Config
	if ob.MaxAge != 48*time.Hour || ob.Duplicates != 20*time.Minute || ob.MaxMsgSize != 512<<10 {
		t.Errorf("OUTBOX after update: max_age %v duplicates %v max_msg_size %d", ob.MaxAge, ob.Duplicates, ob.MaxMsgSize)
	}
	recs, err := l.Load(t.Context(), "acct", "a1", Position{})
	if err != nil || len(recs) != 1 || recs[0].Seq != rec.Seq {
		t.Errorf("load after update: %d records, %v", len(recs), err)
	}

	// And the new config is now the steady state.
	again, err := Provision(t.Context(), js, ns, pc, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range again {
		if c.Action != "unchanged" {
			t.Errorf("provision after the update: %s %s %v", c.Name, c.Action, c.Fields)
		}
	}
}

func TestProvisionSettingsJetStreamCannotChangeAreRefused(t *testing.T) {
	t.Parallel()
	s := natstest.RunServer(t)
	_, js := natstest.Connect(t, s)
	ns := natstest.Namespace(t)
	names := NamesFor(ns)
	want := StreamConfigs(names, ProvisionConfig{})
	// Someone created EVENTS in memory, and OUTBOX with deletes denied
	// (esjet wants them allowed there, and JetStream cannot lift the denial).
	events := want[0]
	events.Storage = jetstream.MemoryStorage
	outbox := want[1]
	outbox.DenyDelete = true
	for _, c := range []jetstream.StreamConfig{events, outbox} {
		if _, err := js.CreateStream(t.Context(), c); err != nil {
			t.Fatal(err)
		}
	}
	eventsBefore := configJSON(t, streamInfo(t, js, names.Events).Config)

	changes, err := Provision(t.Context(), js, ns, ProvisionConfig{}, nil)
	if !errors.Is(err, ErrImmutable) {
		t.Fatalf("provision over a memory EVENTS stream: err = %v, want ErrImmutable", err)
	}
	joined, ok := err.(interface{ Unwrap() []error })
	if !ok {
		t.Fatalf("provision error %T does not join the errors of each stream", err)
	}
	byStream := map[string]*ImmutableError{}
	for _, e := range joined.Unwrap() {
		var ie *ImmutableError
		if !errors.As(e, &ie) {
			t.Fatalf("unexpected provision error: %v", e)
		}
		byStream[ie.Stream] = ie
	}
	if len(byStream) != 2 {
		t.Fatalf("immutable errors for %d streams, want EVENTS and OUTBOX: %v", len(byStream), err)
	}
	for name, field := range map[string]string{names.Events: "storage: Memory → File", names.Outbox: "deny_delete: true → false"} {
		ie := byStream[name]
		if ie == nil {
			t.Errorf("no ImmutableError for %s", name)
			continue
		}
		if !slices.Equal(ie.Fields, []string{field}) {
			t.Errorf("%s: immutable fields %q, want [%q]", name, ie.Fields, field)
		}
		msg := ie.Error()
		first, _, _ := strings.Cut(field, ":")
		if !strings.Contains(msg, "stream "+name+" ") || !strings.Contains(msg, first) || !strings.Contains(msg, "migrate") {
			t.Errorf("%s: message %q does not name the stream, the setting and a way out", name, msg)
		}
	}

	// Everything else was provisioned; the refused streams were not touched.
	got := changesByName(t, changes)
	for _, name := range []string{names.DLQ, names.Snapshots, names.Receipts} {
		if got[name].Action != "created" {
			t.Errorf("%s: %+v, want created despite the refused streams", name, got[name])
		}
	}
	if _, ok := got[names.Events]; ok {
		t.Errorf("EVENTS reported as %+v though it was refused", got[names.Events])
	}
	if after := configJSON(t, streamInfo(t, js, names.Events).Config); !bytes.Equal(after, eventsBefore) {
		t.Errorf("the refused EVENTS stream was changed:\nbefore %s\nafter  %s", eventsBefore, after)
	}
	if st := streamInfo(t, js, names.DLQ); st.Config.Storage != jetstream.FileStorage || !st.Config.DenyDelete {
		t.Errorf("DLQ storage %v deny_delete %v", st.Config.Storage, st.Config.DenyDelete)
	}
}

func TestProvisionReplicas3OnASingleServerFails(t *testing.T) {
	t.Parallel()
	s := natstest.RunServer(t)
	_, js := natstest.Connect(t, s)
	ns := natstest.Namespace(t)
	names := NamesFor(ns)
	_, err := Provision(t.Context(), js, ns, ProvisionConfig{Replicas: 3}, nil)
	if err == nil {
		t.Fatal("provisioning R3 streams on a single server succeeded")
	}
	if !strings.Contains(err.Error(), "create stream "+names.Events) || !strings.Contains(strings.ToLower(err.Error()), "replicas") {
		t.Fatalf("error %q does not name the stream and the replica problem", err)
	}
	if _, err := js.Stream(t.Context(), names.Events); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Fatalf("EVENTS exists after the failed R3 provision: %v", err)
	}
}

func TestProvisionReplicas3OnACluster(t *testing.T) {
	t.Parallel()
	servers := natstest.RunCluster(t)
	_, js := natstest.Connect(t, servers[1])
	ns := natstest.Namespace(t)
	names := NamesFor(ns)
	pc := ProvisionConfig{Replicas: 3}
	changes, err := Provision(t.Context(), js, ns, pc, nil)
	if err != nil {
		t.Fatalf("provision R3: %v", err)
	}
	for _, c := range changes {
		if c.Action != "created" {
			t.Errorf("%s: %s, want created", c.Name, c.Action)
		}
	}
	for _, name := range []string{names.Events, names.Outbox, names.DLQ} {
		natstest.Eventually(t, 10*time.Second, func() bool {
			st, err := js.Stream(t.Context(), name)
			if err != nil {
				return false
			}
			info := st.CachedInfo()
			return info.Config.Replicas == 3 && info.Cluster != nil && info.Cluster.Leader != "" && len(info.Cluster.Replicas) == 2
		})
	}
	for _, b := range []string{names.Snapshots, names.Receipts} {
		if r := bucketConfig(t, js, b).Replicas; r != 3 {
			t.Errorf("bucket %s replicas %d, want 3", b, r)
		}
	}
	// Idempotent on a cluster too, from another member.
	_, js0 := natstest.Connect(t, servers[0])
	again, err := Provision(t.Context(), js0, ns, pc, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range again {
		if c.Action != "unchanged" {
			t.Errorf("second R3 provision: %s %s %v", c.Name, c.Action, c.Fields)
		}
	}
}

// The DLQ denies purge and delete; a DLQ provisioned by an earlier esjet
// without them is updated in place (turning them on is allowed), not refused.
func TestDLQDeniesPurgeAndAnOldDLQIsUpdated(t *testing.T) {
	t.Parallel()
	s := natstest.RunServer(t)
	_, js := natstest.Connect(t, s)
	ns := natstest.Namespace(t)
	names := NamesFor(ns)
	pc := ProvisionConfig{DuplicateWindow: time.Minute, OutboxMaxAge: time.Hour}
	old := StreamConfigs(names, pc)[2]
	old.DenyPurge, old.DenyDelete = false, false
	if _, err := js.CreateStream(t.Context(), old); err != nil {
		t.Fatal(err)
	}
	changes, err := Provision(t.Context(), js, ns, pc, nil)
	if err != nil {
		t.Fatalf("provision over an old DLQ: %v", err)
	}
	c := changesByName(t, changes)[names.DLQ]
	for _, field := range []string{"deny_purge", "deny_delete"} {
		if c.Action != "updated" || !slices.ContainsFunc(c.Fields, func(f string) bool { return strings.HasPrefix(f, field) }) {
			t.Errorf("DLQ change %+v, want %s updated", c, field)
		}
	}
	dlq := streamInfo(t, js, names.DLQ).Config
	if !dlq.DenyPurge || !dlq.DenyDelete {
		t.Errorf("DLQ deny_purge %v deny_delete %v, want true true", dlq.DenyPurge, dlq.DenyDelete)
	}
	st, err := js.Stream(t.Context(), names.DLQ)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Purge(t.Context()); err == nil {
		t.Error("the DLQ was purged")
	}
	if _, err := js.Publish(t.Context(), ns+".dlq.pay", []byte("{}")); err != nil {
		t.Fatal(err)
	}
	if err := st.DeleteMsg(t.Context(), 1); err == nil {
		t.Error("a dead letter was deleted")
	}
}

// Compression is set on new streams and updated in place on existing ones
// (the server accepts it; its file store compresses the blocks it writes
// after a restart), keeping what they hold readable.
func TestProvisionSetsAndUpdatesCompression(t *testing.T) {
	t.Parallel()
	s := natstest.RunServer(t)
	_, js := natstest.Connect(t, s)
	ns := natstest.Namespace(t)
	names := NamesFor(ns)
	if _, err := Provision(t.Context(), js, ns, ProvisionConfig{}, nil); err != nil {
		t.Fatal(err)
	}
	l, err := Open(t.Context(), js, ns, Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(t.Context(), decision("acct", "a1", "opened"), Position{}); err != nil {
		t.Fatal(err)
	}
	changes, err := Provision(t.Context(), js, ns, ProvisionConfig{Compression: true}, nil)
	if err != nil {
		t.Fatalf("turn compression on: %v", err)
	}
	got := changesByName(t, changes)
	for _, name := range []string{names.Events, names.Outbox} {
		c := got[name]
		if c.Action != "updated" || len(c.Fields) != 1 || !strings.HasPrefix(c.Fields[0], "compression") {
			t.Errorf("%s: %s %q, want updated: compression", name, c.Action, c.Fields)
		}
		if cfg := streamInfo(t, js, name).Config; cfg.Compression != jetstream.S2Compression {
			t.Errorf("%s compression %v after the update", name, cfg.Compression)
		}
	}
	if got[names.DLQ].Action != "unchanged" {
		t.Errorf("DLQ: %+v, want unchanged", got[names.DLQ])
	}
	if recs, err := l.Load(t.Context(), "acct", "a1", Position{}); err != nil || len(recs) != 1 {
		t.Errorf("load after the update: %d records, %v", len(recs), err)
	}
	ns2 := natstest.Namespace(t)
	if _, err := Provision(t.Context(), js, ns2, ProvisionConfig{Compression: true}, nil); err != nil {
		t.Fatal(err)
	}
	if cfg := streamInfo(t, js, NamesFor(ns2).Events).Config; cfg.Compression != jetstream.S2Compression {
		t.Errorf("new EVENTS compression %v", cfg.Compression)
	}
}

// A publish with Nats-Rollup: all to the receipts or snapshots bucket is
// refused: it would delete every receipt (the proof an effect happened),
// and the node's role may publish there. Both keep their keys.
func TestReceiptsAndSnapshotsRefuseARollUp(t *testing.T) {
	t.Parallel()
	_, js := natstest.Connect(t, natstest.RunServer(t))
	ns := natstest.Namespace(t)
	if _, err := Provision(t.Context(), js, ns, ProvisionConfig{}, nil); err != nil {
		t.Fatal(err)
	}
	names := NamesFor(ns)
	for _, bucket := range []string{names.Receipts, names.Snapshots} {
		kv, err := js.KeyValue(t.Context(), bucket)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"a", "b"} {
			if _, err := kv.Put(t.Context(), k, []byte("v")); err != nil {
				t.Fatalf("%s put %s: %v", bucket, k, err)
			}
		}
		msg := nats.NewMsg("$KV." + bucket + ".c")
		msg.Header.Set("Nats-Rollup", "all")
		if _, err := js.PublishMsg(t.Context(), msg); err == nil || !strings.Contains(err.Error(), "rollup") {
			t.Errorf("%s: a roll-up was accepted (%v)", bucket, err)
		}
		if st := bucketConfig(t, js, bucket); st.AllowRollup {
			t.Errorf("%s allows roll-ups", bucket)
		}
		for _, k := range []string{"a", "b"} {
			if _, err := kv.Get(t.Context(), k); err != nil {
				t.Errorf("%s lost key %s: %v", bucket, k, err)
			}
		}
	}
}
