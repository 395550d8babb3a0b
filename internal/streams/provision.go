package streams

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/esjet/esjet/config"
	"github.com/esjet/esjet/internal/wire"
	"github.com/nats-io/nats.go/jetstream"
)

// ProvisionConfig is what the operator chose for a namespace's streams.
type ProvisionConfig struct {
	Replicas        int           // 1, 3 or 5; zero means 1
	DuplicateWindow time.Duration // EVENTS dedup window; zero means 2m
	// OutboxDuplicateWindow is OUTBOX's dedup window: how long a command
	// id re-published by a relay after a crash is dropped. Keep it well
	// above the relay's redelivery horizon. Zero means 10m.
	OutboxDuplicateWindow time.Duration
	OutboxMaxAge          time.Duration // OUTBOX and DLQ retention; zero means 7 days
	ReceiptsMaxAge        time.Duration // the receipts bucket's max age; zero: kept forever
	MaxMessageSize        int           // stream max_msg_size; zero means 1 MiB
	// Compression keeps EVENTS and OUTBOX blocks S2-compressed on disk
	// (a sealed block is compressed whole; readers see the same messages).
	Compression bool
	// DLQSettledMaxAge is how long a settled dead letter's copy stays
	// (streams.dlq_settled_max_age): provisioning gives an older DLQ's
	// settled letters what is left of it. Zero means 720h.
	DLQSettledMaxAge time.Duration
	// Archive allows purges on EVENTS (deny_purge off), which archiving
	// needs (internal/archive: only the admin role may purge). JetStream
	// cannot turn deny_purge off on an existing stream: it takes effect on
	// an EVENTS created with it.
	Archive bool
}

// setDefaults fills what is zero with config.Default()'s values: the
// defaults are stated once, there.
func (c *ProvisionConfig) setDefaults() {
	d := config.Default().Streams
	if c.Replicas == 0 {
		// The config's default is "auto" (0), which the node decides when
		// it connects (node.ResolveReplicas); unresolved, one copy.
		c.Replicas = max(d.Replicas, 1)
	}
	if c.DuplicateWindow == 0 {
		c.DuplicateWindow = d.DuplicateWindow.Std()
	}
	if c.OutboxDuplicateWindow == 0 {
		c.OutboxDuplicateWindow = d.OutboxDuplicateWindow.Std()
	}
	if c.DLQSettledMaxAge == 0 {
		c.DLQSettledMaxAge = d.DLQSettledMaxAge.Std()
	}
	if c.OutboxMaxAge == 0 {
		c.OutboxMaxAge = d.OutboxMaxAge.Std()
	}
	if c.MaxMessageSize == 0 {
		c.MaxMessageSize = int(d.MaxMessageSize)
	}
}

// Change is what provisioning did, or would do, to one stream or bucket.
type Change struct {
	Name string // stream or bucket name
	// Action is what [Provision] did ("created", "updated", "unchanged"),
	// what [Plan] would do ("create", "update", "unchanged"), or what
	// [Ensure] found ("created", "unchanged", or "differs": a benign
	// difference the node runs with; a hub's "updated" sources).
	Action string
	Fields []string // for "updated", "update" and "differs": "field: old → new"
}

// StreamConfigs returns the desired configuration of the namespace's three
// streams: EVENTS, OUTBOX, DLQ (names: [wire.Names]).
func StreamConfigs(names Names, c ProvisionConfig) []jetstream.StreamConfig {
	c.setDefaults()
	maxMsg := int32(c.MaxMessageSize)
	return []jetstream.StreamConfig{{
		Name:        names.Events,
		Description: "esjet event log: one message per decision on " + names.TypePrefix("<type>") + "<id>",
		Subjects:    []string{names.EventsFilter()},
		Retention:   jetstream.LimitsPolicy,
		Storage:     jetstream.FileStorage,
		Replicas:    c.Replicas,
		// The log is the record of truth: nothing ages out, nothing is
		// deleted, purged or rolled up; when full it refuses new writes
		// rather than dropping history.
		MaxAge:            0,
		MaxMsgs:           -1,
		MaxBytes:          -1,
		MaxMsgsPerSubject: -1,
		MaxMsgSize:        maxMsg,
		Discard:           jetstream.DiscardNew,
		DenyDelete:        true,
		DenyPurge:         !c.Archive,
		AllowRollup:       false,
		AllowDirect:       true,
		Duplicates:        c.DuplicateWindow,
		// Group commit (groupcommit.go) stores concurrent decisions as
		// atomic batches; esjet provision turns it on for an older stream.
		AllowAtomicPublish: true,
		Compression:        compression(c),
	}, {
		Name:        names.Outbox,
		Description: "esjet outbox: one message per command on " + names.Namespace + ".outbox.<kind>; delayed ones as schedules on " + names.ScheduleFilter(),
		Subjects:    []string{names.OutboxFilter(), names.ScheduleFilter()},
		// Delayed commands are JetStream message schedules (@at), fired by
		// the server into <ns>.outbox.<kind>. Schedules require roll-ups to
		// be allowed; esjet never sends a roll-up header to OUTBOX.
		AllowMsgSchedules: true,
		AllowRollup:       true,
		Retention:         jetstream.LimitsPolicy,
		Storage:           jetstream.FileStorage,
		Replicas:          c.Replicas,
		MaxAge:            c.OutboxMaxAge,
		MaxMsgs:           -1,
		MaxBytes:          -1,
		MaxMsgsPerSubject: -1,
		MaxMsgSize:        maxMsg,
		Discard:           jetstream.DiscardOld,
		AllowDirect:       true,
		Duplicates:        c.OutboxDuplicateWindow,
		// The relay publishes a batch of commands as one atomic batch under
		// sync always (one fsync, not one each); esjet provision turns it
		// on for an older stream.
		AllowAtomicPublish: true,
		Compression:        compression(c),
	}, {
		Name:        names.DLQ,
		Description: "esjet dead letters: exhausted or terminally failed commands, one subject each, " + wire.DeadLetterSubject(names.Namespace, "<kind>", 0) + "…",
		Subjects:    []string{names.DLQFilter()},
		Retention:   jetstream.LimitsPolicy,
		Storage:     jetstream.FileStorage,
		Replicas:    c.Replicas,
		MaxAge:      0,
		MaxMsgs:     -1,
		MaxBytes:    -1,
		// One message per subject, and per-message TTLs: every letter,
		// settled copy and audit record has a subject of its own, and a
		// settled letter leaves by being replaced on its subject by a mark
		// that expires (wire.SettleMark); its copy expires after
		// streams.dlq_settled_max_age. Open letters carry no TTL.
		MaxMsgsPerSubject: 1,
		AllowMsgTTL:       true,
		MaxMsgSize:        maxMsg,
		Discard:           jetstream.DiscardNew,
		// Nothing may delete or purge a dead letter: only settling one (an
		// audit record first) replaces it. esjet provision turns them on
		// for an older DLQ (false → true is allowed; the reverse is not).
		DenyDelete:  true,
		DenyPurge:   true,
		AllowDirect: true,
		Duplicates:  c.DuplicateWindow,
	}}
}

func compression(c ProvisionConfig) jetstream.StoreCompression {
	if c.Compression {
		return jetstream.S2Compression
	}
	return jetstream.NoCompression
}

// BucketConfigs returns the desired KV buckets: snapshots, receipts and
// the workers' flow control (pauses, rate limits, per-key leases, which
// expire by per-key TTLs: LimitMarkerTTL turns them on).
func BucketConfigs(names Names, c ProvisionConfig) []jetstream.KeyValueConfig {
	c.setDefaults()
	return []jetstream.KeyValueConfig{{
		Bucket:      names.Snapshots,
		Description: "esjet aggregate snapshots, key <type>.<id>",
		History:     1,
		Storage:     jetstream.FileStorage,
		Replicas:    c.Replicas,
	}, {
		Bucket:      names.Receipts,
		Description: "esjet command receipts, keyed by command id",
		TTL:         c.ReceiptsMaxAge, // from the receipt's last write: written once the command is final
		History:     1,
		Storage:     jetstream.FileStorage,
		Replicas:    c.Replicas,
	}, {
		Bucket:         names.Workers,
		Description:    "esjet workers' flow control: pauses, rate limits, per-key leases",
		History:        1,
		Storage:        jetstream.FileStorage,
		Replicas:       c.Replicas,
		LimitMarkerTTL: time.Second,
	}}
}

// BucketStreamConfig is the stream (KV_<bucket>) that nats.go's
// CreateKeyValue makes for kv, without mirrors or sources: the same
// settings, so jetstream.KeyValue opens it and a bucket made either way
// compares equal. esjet creates buckets through it so that a bucket which
// needs more (atomic batches) has it from its first CREATE: a node may
// create streams but never update them.
func BucketStreamConfig(kv jetstream.KeyValueConfig) jetstream.StreamConfig {
	history := int64(max(kv.History, 1))
	replicas := max(kv.Replicas, 1)
	maxBytes, maxValue := kv.MaxBytes, kv.MaxValueSize
	if maxBytes == 0 {
		maxBytes = -1
	}
	if maxValue == 0 {
		maxValue = -1
	}
	var comp jetstream.StoreCompression
	if kv.Compression {
		comp = jetstream.S2Compression
	}
	return jetstream.StreamConfig{
		Name:              wire.KVStream(kv.Bucket),
		Description:       kv.Description,
		Subjects:          []string{wire.KVFilter(kv.Bucket)},
		MaxMsgsPerSubject: history,
		MaxBytes:          maxBytes,
		MaxAge:            kv.TTL,
		MaxMsgSize:        maxValue,
		Storage:           kv.Storage,
		Replicas:          replicas,
		Placement:         kv.Placement,
		AllowRollup:       true,
		DenyDelete:        true,
		Duplicates:        min(2*time.Minute, cmp.Or(kv.TTL, 2*time.Minute)),
		MaxMsgs:           -1,
		MaxConsumers:      -1,
		AllowDirect:       true,
		Compression:       comp,
		Discard:           jetstream.DiscardNew,
		// Per-key TTLs (nats.go asks the server's API level first; esjet
		// needs 2.11+ anyway).
		AllowMsgTTL:            kv.LimitMarkerTTL > 0,
		SubjectDeleteMarkerTTL: kv.LimitMarkerTTL,
	}
}

// Object is one stream or KV bucket of a namespace and the configuration
// esjet wants for it.
type Object struct {
	Name   string // the stream's name, or the bucket's
	Config jetstream.StreamConfig
	dlq    *legacyDLQ // the DLQ's: an older one's letters to move first (dlqmigrate.go)
}

// Objects are the namespace's streams (EVENTS, OUTBOX, DLQ) and buckets
// (snapshots, receipts) as [Provision] and [Ensure] make them.
func Objects(ns string, c ProvisionConfig) []Object {
	names := NamesFor(ns)
	var out []Object
	for _, s := range StreamConfigs(names, c) {
		out = append(out, Object{Name: s.Name, Config: s})
	}
	return withLegacyDLQ(names, c, append(out, bucketObjects(names, c)...))
}

// bucketObjects are the namespace's buckets; receipts allow atomic
// batches (group commit writes them; JetStream refuses a batch to a KV
// stream without allow_atomic with 10174). Only the workers' bucket allows
// roll-ups: a released per-key lease is purged with a TTL, so no marker
// stays per key ever used.
func bucketObjects(names Names, c ProvisionConfig) []Object {
	var out []Object
	for _, b := range BucketConfigs(names, c) {
		sc := BucketStreamConfig(b)
		sc.AllowAtomicPublish = b.Bucket == names.Receipts
		// esjet never purges a key of these (a KV purge is a roll-up): with
		// roll-ups allowed, one publish with Nats-Rollup: all would delete
		// every receipt (the proof that an effect happened) or snapshot.
		sc.AllowRollup = b.Bucket == names.Workers
		out = append(out, Object{Name: b.Bucket, Config: sc})
	}
	return out
}

// ApplyMode says whether [Apply] changes streams or only reports what it
// would change.
type ApplyMode int

const (
	// ApplyChanges creates and updates streams.
	ApplyChanges ApplyMode = iota
	// PlanOnly changes nothing and reports "create", "update" or
	// "unchanged" for each object.
	PlanOnly
)

// Provision creates or updates the namespace's streams and KV buckets: what
// esjet provision does, as an admin. It is idempotent: with an unchanged
// config a second call changes nothing and reports every object
// "unchanged". A setting JetStream can update in place is updated; one it
// cannot (storage, retention, deny delete/purge turned off) is reported as
// an [*ImmutableError] and nothing of that stream is touched. The node
// itself never updates a stream: it runs [Ensure]. logger may be nil.
func Provision(ctx context.Context, js jetstream.JetStream, ns string, c ProvisionConfig, logger *slog.Logger) ([]Change, error) {
	return Apply(ctx, js, Objects(ns, c), ApplyChanges, logger)
}

// Apply creates each missing object and updates each existing one to its
// configuration (see [Provision]), or with [PlanOnly] reports what it would
// do. Errors of single objects are joined; the others are still applied.
func Apply(ctx context.Context, js jetstream.JetStream, objs []Object, mode ApplyMode, logger *slog.Logger) ([]Change, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	logger = logger.With("component", "streams")
	var changes []Change
	var errs []error
	for _, o := range objs {
		ch, err := provisionStream(ctx, js, o, mode)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		changes = append(changes, ch)
		if mode == ApplyChanges && ch.Action != "unchanged" {
			logger.Info("provisioned", "stream", ch.Name, "action", ch.Action, "fields", ch.Fields)
		}
	}
	return changes, errors.Join(errs...)
}

func provisionStream(ctx context.Context, js jetstream.JetStream, o Object, mode ApplyMode) (Change, error) {
	want := o.Config
	st, created, err := openOrCreate(ctx, js, want, mode == ApplyChanges)
	switch {
	case mode == PlanOnly && errors.Is(err, jetstream.ErrStreamNotFound):
		return Change{Name: o.Name, Action: "create"}, nil
	case err != nil:
		return Change{}, err
	case created:
		return Change{Name: o.Name, Action: "created"}, nil
	}
	have := st.CachedInfo().Config
	diffs := diffStream(have, want)
	var immutable []string
	for _, d := range diffs {
		if d.Immutable {
			immutable = append(immutable, d.String())
		}
	}
	if len(immutable) > 0 {
		return Change{}, &ImmutableError{Stream: want.Name, Fields: immutable}
	}
	if o.dlq != nil {
		return o.dlq.provision(ctx, js, st, o, diffs, mode)
	}
	if len(diffs) == 0 {
		return Change{Name: o.Name, Action: "unchanged"}, nil
	}
	if mode == PlanOnly {
		return Change{Name: o.Name, Action: "update", Fields: fields(diffs)}, nil
	}
	if _, err := js.UpdateStream(ctx, updated(have, want)); err != nil {
		return Change{}, fmt.Errorf("update stream %s (%s): %w", want.Name, strings.Join(fields(diffs), "; "), err)
	}
	return Change{Name: o.Name, Action: "updated", Fields: fields(diffs)}, nil
}

// updated is have with the settings esjet manages taken from want. It
// starts from what exists so settings esjet does not manage (placement,
// metadata) survive the update.
func updated(have, want jetstream.StreamConfig) jetstream.StreamConfig {
	upd := have
	upd.Description = want.Description
	upd.Subjects = want.Subjects
	upd.Retention = want.Retention
	upd.Replicas = want.Replicas
	upd.MaxAge = want.MaxAge
	upd.MaxMsgs = want.MaxMsgs
	upd.MaxBytes = want.MaxBytes
	upd.MaxMsgsPerSubject = want.MaxMsgsPerSubject
	upd.MaxMsgSize = want.MaxMsgSize
	upd.Discard = want.Discard
	upd.DenyDelete = want.DenyDelete
	// JetStream refuses to turn deny_purge off (an EVENTS made before
	// archiving was configured): keep it, archiving says why it cannot run.
	upd.DenyPurge = want.DenyPurge || have.DenyPurge
	upd.AllowRollup = want.AllowRollup
	upd.AllowDirect = want.AllowDirect
	upd.Duplicates = want.Duplicates
	upd.AllowMsgSchedules = want.AllowMsgSchedules
	upd.AllowMsgTTL = want.AllowMsgTTL
	// The server takes a new compression in place; its file store applies
	// it to the blocks it writes after a restart.
	upd.Compression = want.Compression
	upd.AllowAtomicPublish = want.AllowAtomicPublish
	upd.Sources = want.Sources
	upd.RePublish = want.RePublish
	upd.SubjectTransform = want.SubjectTransform
	upd.NoAck = want.NoAck
	return upd
}

// openOrCreate finds stream want.Name, creating it when it is missing and
// create is set (created: this call made it, st is nil). A name taken
// meanwhile — another node created it first, perhaps with another
// configuration — is looked up again, for the caller to check what is
// there. Without create a missing stream is [jetstream.ErrStreamNotFound].
func openOrCreate(ctx context.Context, js jetstream.JetStream, want jetstream.StreamConfig, create bool) (st jetstream.Stream, created bool, err error) {
	st, err = lookupStream(ctx, js, want.Name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		if !create {
			return nil, false, err
		}
		if err = createStream(ctx, js, want); err == nil {
			return nil, true, nil
		}
		if !errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			return nil, false, err
		}
		st, err = lookupStream(ctx, js, want.Name)
	}
	if err != nil {
		return nil, false, fmt.Errorf("look up stream %s: %w", want.Name, err)
	}
	return st, false, nil
}

// createStream creates want. A cluster that has just started may refuse
// to place replicas for a moment (10005, no suitable peers) or not answer
// in time: it tries again ([patiently]). A create that timed out may have
// been done: its retry then finds the stream there (already in use), which
// the callers take as "someone created it" and check what is there.
func createStream(ctx context.Context, js jetstream.JetStream, want jetstream.StreamConfig) error {
	err := patiently(ctx, func(ctx context.Context) error {
		_, err := js.CreateStream(ctx, want)
		return err
	})
	if err != nil && !errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
		return fmt.Errorf("create stream %s: %w", want.Name, err)
	}
	return err
}
