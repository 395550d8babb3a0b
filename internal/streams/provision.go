package streams

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"time"

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
	MaxMessageSize        int           // stream max_msg_size; zero means 1 MiB
	// Compression keeps EVENTS and OUTBOX blocks S2-compressed on disk
	// (a sealed block is compressed whole; readers see the same messages).
	Compression bool
}

func (c *ProvisionConfig) setDefaults() {
	if c.Replicas == 0 {
		c.Replicas = 1
	}
	if c.DuplicateWindow == 0 {
		c.DuplicateWindow = 2 * time.Minute
	}
	if c.OutboxDuplicateWindow == 0 {
		c.OutboxDuplicateWindow = 10 * time.Minute
	}
	if c.OutboxMaxAge == 0 {
		c.OutboxMaxAge = 7 * 24 * time.Hour
	}
	if c.MaxMessageSize == 0 {
		c.MaxMessageSize = 1 << 20
	}
}

// Change is what provisioning did to one stream or bucket.
type Change struct {
	Name   string   // stream or bucket name
	Action string   // "created", "updated" or "unchanged"
	Fields []string // for "updated": what changed, as "field: old → new"
}

// ErrImmutable is wrapped by [*ImmutableError].
var ErrImmutable = errors.New("streams: existing stream cannot be changed to match config")

// ImmutableError names the settings of an existing stream that JetStream does
// not allow to change in place.
type ImmutableError struct {
	Stream string
	Fields []string // "field: current → wanted"
}

func (e *ImmutableError) Error() string {
	return fmt.Sprintf("stream %s exists with settings JetStream cannot change in place (%s); "+
		"keep the old values in the config, or migrate the data to a new namespace", e.Stream, strings.Join(e.Fields, "; "))
}

func (e *ImmutableError) Unwrap() error { return ErrImmutable }

// StreamConfigs returns the desired configuration of the namespace's three
// streams: EVENTS, OUTBOX, DLQ (DESIGN.md).
func StreamConfigs(names Names, c ProvisionConfig) []jetstream.StreamConfig {
	c.setDefaults()
	maxMsg := int32(c.MaxMessageSize)
	return []jetstream.StreamConfig{{
		Name:        names.Events,
		Description: "esjet event log: one message per decision on " + names.Namespace + ".evt.<type>.<id>",
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
		DenyPurge:         true,
		AllowRollup:       false,
		AllowDirect:       true,
		Duplicates:        c.DuplicateWindow,
		// Group commit (groupcommit.go) stores concurrent decisions as
		// atomic batches; an older stream is updated in place.
		AllowAtomicPublish: true,
		Compression:        compression(c),
	}, {
		Name:        names.Outbox,
		Description: "esjet outbox: one message per command on " + names.Namespace + ".outbox.<kind>; delayed ones as schedules on " + names.Namespace + ".schedule.>",
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
		// sync always (one fsync, not one each); an older stream is updated
		// in place.
		AllowAtomicPublish: true,
		Compression:        compression(c),
	}, {
		Name:              names.DLQ,
		Description:       "esjet dead letters: exhausted or terminally failed commands on " + names.Namespace + ".dlq.<kind>",
		Subjects:          []string{names.DLQFilter()},
		Retention:         jetstream.LimitsPolicy,
		Storage:           jetstream.FileStorage,
		Replicas:          c.Replicas,
		MaxAge:            0,
		MaxMsgs:           -1,
		MaxBytes:          -1,
		MaxMsgsPerSubject: -1,
		MaxMsgSize:        maxMsg,
		Discard:           jetstream.DiscardNew,
		// Nothing may delete or purge the dead letters: esjet dlq
		// retry/discard settle an entry with an audit record that names
		// it, and the entry stays. An older DLQ is updated in place
		// (false → true is allowed; the reverse is not).
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

// BucketConfigs returns the desired KV buckets: snapshots and receipts.
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
		History:     1,
		Storage:     jetstream.FileStorage,
		Replicas:    c.Replicas,
	}}
}

// Provision creates or updates the namespace's streams and KV buckets.
// It is idempotent: with an unchanged config a second call changes nothing
// and reports every object "unchanged". A setting JetStream can update in
// place is updated; one it cannot (storage, retention, deny delete/purge
// turned off) is reported as an [*ImmutableError] and nothing of that stream
// is touched. logger may be nil.
func Provision(ctx context.Context, js jetstream.JetStream, ns string, c ProvisionConfig, logger *slog.Logger) ([]Change, error) {
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	logger = logger.With("component", "streams")
	names := NamesFor(ns)
	var changes []Change
	var errs []error
	for _, want := range StreamConfigs(names, c) {
		ch, err := provisionStream(ctx, js, want)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		changes = append(changes, ch)
	}
	return provisionBuckets(ctx, js, names, c, changes, errs, logger)
}

// provisionBuckets creates or updates the namespace's KV buckets after its
// streams (Provision, ProvisionHub: a hub's workers write receipts too) and
// logs every change.
func provisionBuckets(ctx context.Context, js jetstream.JetStream, names Names, c ProvisionConfig, changes []Change, errs []error, logger *slog.Logger) ([]Change, error) {
	for _, want := range BucketConfigs(names, c) {
		ch, err := provisionBucket(ctx, js, want)
		if err == nil && want.Bucket == names.Receipts {
			ch, err = withAtomic(ctx, js, ch) // receipts are group-committed (atomic.go)
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		changes = append(changes, ch)
	}
	for _, ch := range changes {
		if ch.Action != "unchanged" {
			logger.Info("provisioned", "stream", ch.Name, "action", ch.Action, "fields", ch.Fields)
		}
	}
	return changes, errors.Join(errs...)
}

func provisionStream(ctx context.Context, js jetstream.JetStream, want jetstream.StreamConfig) (Change, error) {
	st, err := js.Stream(ctx, want.Name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		// A cluster that has just started may refuse to place replicas for a
		// moment (10005, no suitable peers): try again for a few seconds.
		deadline := time.Now().Add(10 * time.Second)
		for {
			_, err := js.CreateStream(ctx, want)
			var apiErr *jetstream.APIError
			if errors.As(err, &apiErr) && apiErr.ErrorCode == 10005 && time.Now().Before(deadline) {
				select {
				case <-ctx.Done():
					return Change{}, fmt.Errorf("create stream %s: %w", want.Name, ctx.Err())
				case <-time.After(250 * time.Millisecond):
				}
				continue
			}
			if err != nil {
				return Change{}, fmt.Errorf("create stream %s: %w", want.Name, err)
			}
			return Change{Name: want.Name, Action: "created"}, nil
		}
	}
	if err != nil {
		return Change{}, fmt.Errorf("look up stream %s: %w", want.Name, err)
	}
	have := st.CachedInfo().Config
	diffs, immutable := diffStream(have, want)
	if len(immutable) > 0 {
		return Change{}, &ImmutableError{Stream: want.Name, Fields: immutable}
	}
	if len(diffs) == 0 {
		return Change{Name: want.Name, Action: "unchanged"}, nil
	}
	// Start from what exists so settings esjet does not manage (placement,
	// metadata) survive the update.
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
	upd.DenyPurge = want.DenyPurge
	upd.AllowRollup = want.AllowRollup
	upd.AllowDirect = want.AllowDirect
	upd.Duplicates = want.Duplicates
	upd.AllowMsgSchedules = want.AllowMsgSchedules
	// The server takes a new compression in place; its file store applies
	// it to the blocks it writes after a restart.
	upd.Compression = want.Compression
	upd.AllowAtomicPublish = want.AllowAtomicPublish
	if _, err := js.UpdateStream(ctx, upd); err != nil {
		return Change{}, fmt.Errorf("update stream %s (%s): %w", want.Name, strings.Join(diffs, "; "), err)
	}
	return Change{Name: want.Name, Action: "updated", Fields: diffs}, nil
}

// diffStream compares the settings esjet manages. immutable lists the
// differences JetStream refuses to apply in place.
func diffStream(have, want jetstream.StreamConfig) (diffs, immutable []string) {
	d := func(field string, h, w any) string { return fmt.Sprintf("%s: %v → %v", field, h, w) }
	if have.Storage != want.Storage {
		immutable = append(immutable, d("storage", have.Storage, want.Storage))
	}
	if have.Retention != want.Retention {
		immutable = append(immutable, d("retention", have.Retention, want.Retention))
	}
	if have.DenyDelete && !want.DenyDelete {
		immutable = append(immutable, d("deny_delete", have.DenyDelete, want.DenyDelete))
	}
	if have.DenyPurge && !want.DenyPurge {
		immutable = append(immutable, d("deny_purge", have.DenyPurge, want.DenyPurge))
	}
	// A mirror cannot take writes, and sources bring in messages that no
	// expectation guarded (and, unless set, turn dedup off): neither is an
	// esjet stream.
	if have.Mirror != nil {
		immutable = append(immutable, d("mirror", have.Mirror.Name, "none"))
	}
	if len(have.Sources) > 0 {
		immutable = append(immutable, d("sources", len(have.Sources), "none"))
	}
	check := func(field string, differ bool, h, w any) {
		if differ {
			diffs = append(diffs, d(field, h, w))
		}
	}
	check("subjects", !slices.Equal(have.Subjects, want.Subjects), have.Subjects, want.Subjects)
	check("description", have.Description != want.Description, have.Description, want.Description)
	check("replicas", have.Replicas != want.Replicas, have.Replicas, want.Replicas)
	check("max_age", have.MaxAge != want.MaxAge, have.MaxAge, want.MaxAge)
	check("max_msgs", have.MaxMsgs != want.MaxMsgs, have.MaxMsgs, want.MaxMsgs)
	check("max_bytes", have.MaxBytes != want.MaxBytes, have.MaxBytes, want.MaxBytes)
	check("max_msgs_per_subject", have.MaxMsgsPerSubject != want.MaxMsgsPerSubject, have.MaxMsgsPerSubject, want.MaxMsgsPerSubject)
	check("max_msg_size", have.MaxMsgSize != want.MaxMsgSize, have.MaxMsgSize, want.MaxMsgSize)
	check("discard", have.Discard != want.Discard, have.Discard, want.Discard)
	check("deny_delete", have.DenyDelete != want.DenyDelete, have.DenyDelete, want.DenyDelete)
	check("deny_purge", have.DenyPurge != want.DenyPurge, have.DenyPurge, want.DenyPurge)
	check("allow_rollup", have.AllowRollup != want.AllowRollup, have.AllowRollup, want.AllowRollup)
	check("allow_direct", have.AllowDirect != want.AllowDirect, have.AllowDirect, want.AllowDirect)
	check("duplicate_window", have.Duplicates != want.Duplicates, have.Duplicates, want.Duplicates)
	check("allow_msg_schedules", have.AllowMsgSchedules != want.AllowMsgSchedules, have.AllowMsgSchedules, want.AllowMsgSchedules)
	check("compression (blocks written after the next server restart)", have.Compression != want.Compression, have.Compression, want.Compression)
	check("allow_atomic", have.AllowAtomicPublish != want.AllowAtomicPublish, have.AllowAtomicPublish, want.AllowAtomicPublish)
	if have.AllowMsgSchedules && !want.AllowMsgSchedules {
		immutable = append(immutable, d("allow_msg_schedules", have.AllowMsgSchedules, want.AllowMsgSchedules))
	}
	return diffs, immutable
}

func provisionBucket(ctx context.Context, js jetstream.JetStream, want jetstream.KeyValueConfig) (Change, error) {
	kv, err := js.KeyValue(ctx, want.Bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		if _, err := js.CreateKeyValue(ctx, want); err != nil {
			return Change{}, fmt.Errorf("create bucket %s: %w", want.Bucket, err)
		}
		return Change{Name: want.Bucket, Action: "created"}, nil
	}
	if err != nil {
		return Change{}, fmt.Errorf("look up bucket %s: %w", want.Bucket, err)
	}
	status, err := kv.Status(ctx)
	if err != nil {
		return Change{}, fmt.Errorf("bucket %s status: %w", want.Bucket, err)
	}
	have := status.(*jetstream.KeyValueBucketStatus).StreamInfo().Config
	var diffs []string
	if have.Replicas != want.Replicas {
		diffs = append(diffs, fmt.Sprintf("replicas: %d → %d", have.Replicas, want.Replicas))
	}
	if have.MaxMsgsPerSubject != int64(want.History) {
		diffs = append(diffs, fmt.Sprintf("history: %d → %d", have.MaxMsgsPerSubject, want.History))
	}
	if have.Description != want.Description {
		diffs = append(diffs, fmt.Sprintf("description: %q → %q", have.Description, want.Description))
	}
	if len(diffs) == 0 {
		return Change{Name: want.Bucket, Action: "unchanged"}, nil
	}
	if _, err := js.UpdateKeyValue(ctx, want); err != nil {
		return Change{}, fmt.Errorf("update bucket %s (%s): %w", want.Bucket, strings.Join(diffs, "; "), err)
	}
	return Change{Name: want.Bucket, Action: "updated", Fields: diffs}, nil
}
