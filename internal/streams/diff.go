package streams

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/esjet/esjet/internal/wire"
	"github.com/nats-io/nats.go/jetstream"
)

// DiffKind says what a difference between an existing stream and the
// configuration means to a node, which creates what is missing but never
// updates what exists (only an admin does, with esjet provision).
type DiffKind int

const (
	// DiffBenign loses nothing and breaks no guarantee (a description,
	// compression, replicas, a longer window or a looser limit): the node
	// runs and warns; esjet provision applies the configured value.
	DiffBenign DiffKind = iota
	// DiffLossy would lose or hide history (a limit tighter than the
	// configuration, deletes or purges allowed, roll-ups) or lets the
	// server write into esjet's subjects on its own (republish, subject
	// transforms, sources or a mirror nobody asked for): the node refuses
	// to run on it.
	DiffLossy
	// DiffNeeded is a setting the node relies on and cannot apply without
	// updating the stream (atomic batches, schedules, direct gets, a dedup
	// window or message size at least the configured one): the node
	// refuses to run until esjet provision applies it.
	DiffNeeded
)

func (k DiffKind) String() string {
	switch k {
	case DiffLossy:
		return "lossy"
	case DiffNeeded:
		return "needed"
	}
	return "benign"
}

// Diff is one setting in which an existing stream differs from the one the
// configuration asks for.
type Diff struct {
	Field string // the setting, as in the stream's JSON config
	Have  string // what the stream has
	Want  string // what the configuration asks for
	Kind  DiffKind
	// Why says, for a lossy or needed difference, what it does.
	Why string
	// Immutable: JetStream refuses to change it in place (see
	// [ImmutableError]); the data has to move to a new stream.
	Immutable bool
}

// String reads "field: have → want".
func (d Diff) String() string { return d.Field + ": " + d.Have + " → " + d.Want }

// explain is String with the reason, for a refusal.
func (d Diff) explain() string {
	if d.Why == "" {
		return d.String()
	}
	return d.String() + " (" + d.Why + ")"
}

// diffStream compares the settings esjet manages (and the ones that would
// let the server write into the stream, which esjet never sets unless want
// does) and classifies each difference.
func diffStream(have, want jetstream.StreamConfig) []Diff {
	var out []Diff
	add := func(field string, h, w any, kind DiffKind, why string) *Diff {
		out = append(out, Diff{Field: field, Have: fmt.Sprint(h), Want: fmt.Sprint(w), Kind: kind, Why: why})
		return &out[len(out)-1]
	}
	if hs, ws := sorted(have.Subjects), sorted(want.Subjects); !slices.Equal(hs, ws) {
		add("subjects", hs, ws, DiffLossy, "the stream must capture exactly its own subjects: more capture other subjects' messages, fewer leave writes unanswered")
	}
	if have.Storage != want.Storage {
		kind, why := DiffBenign, ""
		if have.Storage == jetstream.MemoryStorage {
			kind, why = DiffLossy, "a restart of the server loses every message"
		}
		add("storage", have.Storage, want.Storage, kind, why).Immutable = true
	}
	if have.Retention != want.Retention {
		d := add("retention", have.Retention, want.Retention, DiffLossy, "messages are deleted once consumed")
		d.Immutable = have.Retention == jetstream.WorkQueuePolicy || want.Retention == jetstream.WorkQueuePolicy
	}
	lossyLimit := "messages beyond it are deleted, even with purges denied"
	limit("max_age", int64(have.MaxAge), int64(want.MaxAge), duration, add, lossyLimit)
	limit("max_msgs", have.MaxMsgs, want.MaxMsgs, count, add, lossyLimit)
	limit("max_bytes", have.MaxBytes, want.MaxBytes, count, add, lossyLimit)
	limit("max_msgs_per_subject", have.MaxMsgsPerSubject, want.MaxMsgsPerSubject, count, add, "only the last messages of each subject are kept: history is deleted")
	if have.MaxMsgSize != want.MaxMsgSize {
		kind, why := DiffBenign, ""
		if tighter(int64(have.MaxMsgSize), int64(want.MaxMsgSize)) {
			kind, why = DiffNeeded, "a message the configuration allows would be refused"
		}
		add("max_msg_size", count(int64(have.MaxMsgSize)), count(int64(want.MaxMsgSize)), kind, why)
	}
	if have.Discard != want.Discard {
		kind, why := DiffBenign, ""
		if have.Discard == jetstream.DiscardOld && want.Discard == jetstream.DiscardNew && (have.MaxAge > 0 || have.MaxMsgs > 0 || have.MaxBytes > 0) {
			kind, why = DiffLossy, "at a limit the oldest messages are deleted"
		}
		add("discard", have.Discard, want.Discard, kind, why)
	}
	deny := func(field string, h, w bool, what string) {
		switch {
		case h == w:
		case w:
			add(field, h, w, DiffLossy, what+" can be removed from the stream")
		default:
			add(field, h, w, DiffBenign, "").Immutable = true
		}
	}
	deny("deny_delete", have.DenyDelete, want.DenyDelete, "a message")
	if have.DenyPurge && !want.DenyPurge {
		// Archiving asks for purges; JetStream cannot allow them on an
		// existing stream, and a stream that denies them loses nothing.
		add("deny_purge", true, false, DiffBenign, "archiving needs purges, which JetStream cannot allow on an existing stream: esjet archive refuses to run on it")
	} else {
		deny("deny_purge", have.DenyPurge, want.DenyPurge, "every message")
	}
	switch {
	case have.AllowRollup == want.AllowRollup:
	case have.AllowRollup && strings.HasPrefix(want.Name, wire.KVStreamPrefix):
		// Every bucket of an older esjet allows them (nats.go's default):
		// the node warns, esjet provision turns them off.
		add("allow_rollup", true, false, DiffBenign, "")
	case have.AllowRollup:
		add("allow_rollup", true, false, DiffLossy, "a roll-up header deletes a subject's history")
	default:
		add("allow_rollup", false, true, DiffNeeded, "schedules and KV purges need roll-ups")
	}
	switch {
	case have.AllowDirect == want.AllowDirect:
	case want.AllowDirect:
		add("allow_direct", false, true, DiffNeeded, "esjet reads the last message of a subject with direct gets")
	default:
		add("allow_direct", true, false, DiffBenign, "")
	}
	if have.Duplicates != want.Duplicates {
		kind, why := DiffBenign, ""
		if have.Duplicates < want.Duplicates {
			kind, why = DiffNeeded, "a message re-sent after a crash within the configured window would be stored twice"
		}
		add("duplicate_window", have.Duplicates, want.Duplicates, kind, why)
	}
	switch {
	case have.AllowMsgSchedules == want.AllowMsgSchedules:
	case want.AllowMsgSchedules:
		add("allow_msg_schedules", false, true, DiffNeeded, "delayed commands are message schedules")
	default:
		add("allow_msg_schedules", true, false, DiffNeeded, "schedules need roll-ups and cannot be combined with sources").Immutable = true
	}
	switch {
	case have.AllowAtomicPublish == want.AllowAtomicPublish:
	case want.AllowAtomicPublish:
		add("allow_atomic", false, true, DiffNeeded, "group commit writes atomic batches")
	default:
		add("allow_atomic", true, false, DiffBenign, "")
	}
	if have.Compression != want.Compression {
		add("compression (blocks written after the next server restart)", have.Compression, want.Compression, DiffBenign, "")
	}
	if have.Description != want.Description {
		add("description", fmt.Sprintf("%q", have.Description), fmt.Sprintf("%q", want.Description), DiffBenign, "")
	}
	if have.Replicas != want.Replicas {
		add("replicas", have.Replicas, want.Replicas, DiffBenign, "")
	}
	// What makes the server write into the stream on its own, or write
	// its messages elsewhere: esjet asks for none of it but a hub's
	// sources.
	if have.Mirror != nil {
		add("mirror", have.Mirror.Name, "none", DiffLossy, "a mirror takes no writes and copies another stream's messages").Immutable = true
	}
	if hs, ws := sourceKeys(have.Sources), sourceKeys(want.Sources); !slices.Equal(hs, ws) {
		switch {
		case len(want.Sources) == 0:
			add("sources", hs, "none", DiffLossy, "the server writes other streams' messages into esjet's subjects, unguarded by any expectation").Immutable = true
		case slices.ContainsFunc(have.Sources, func(s *jetstream.StreamSource) bool { return !hubShaped(s, have.Name, want.Sources) }):
			add("sources", hs, ws, DiffLossy, "a source esjet does not make writes other messages into esjet's subjects")
		default:
			add("sources", hs, ws, DiffNeeded, "the sites the hub aggregates")
		}
	}
	if have.RePublish != nil && !republishEqual(have.RePublish, want.RePublish) {
		add("republish", have.RePublish.Source+" → "+have.RePublish.Destination, "none", DiffLossy, "the server re-publishes every stored message, possibly into esjet's subjects")
	}
	if have.SubjectTransform != nil && want.SubjectTransform == nil {
		add("subject_transform", have.SubjectTransform.Source+" → "+have.SubjectTransform.Destination, "none", DiffLossy, "messages are stored under other subjects than the ones written")
	}
	switch {
	case have.AllowMsgTTL == want.AllowMsgTTL:
	case want.AllowMsgTTL:
		add("allow_msg_ttl", false, true, DiffNeeded, "settled dead letters expire by per-message TTLs")
	default:
		add("allow_msg_ttl", true, false, DiffLossy, "a message can carry its own expiry").Immutable = true
	}
	if have.NoAck && !want.NoAck {
		add("no_ack", true, false, DiffNeeded, "esjet waits for the stream's acknowledgement of every write")
	}
	if have.Sealed {
		add("sealed", true, false, DiffNeeded, "a sealed stream takes no writes").Immutable = true
	}
	if have.AllowMsgCounter && !want.AllowMsgCounter {
		add("allow_msg_counter", true, false, DiffNeeded, "a counter stream takes only counter increments").Immutable = true
	}
	if have.PersistMode != want.PersistMode {
		d := add("persist_mode", have.PersistMode, want.PersistMode, DiffBenign, "")
		d.Immutable = true
		if have.PersistMode == jetstream.AsyncPersistMode {
			d.Kind, d.Why = DiffLossy, "writes are acknowledged before they are stored"
		}
	}
	return out
}

// limit adds a difference in a limit where zero or less means none: one
// tighter than wanted is lossy, a looser one benign.
func limit(field string, have, want int64, show func(int64) string, add func(string, any, any, DiffKind, string) *Diff, why string) {
	if have == want || (have <= 0 && want <= 0) {
		return
	}
	if tighter(have, want) {
		add(field, show(have), show(want), DiffLossy, why)
		return
	}
	add(field, show(have), show(want), DiffBenign, "")
}

// tighter reports whether limit have (zero or less: none) is below want.
func tighter(have, want int64) bool { return have > 0 && (want <= 0 || have < want) }

func count(n int64) string {
	if n <= 0 {
		return "unlimited"
	}
	return fmt.Sprint(n)
}

func duration(n int64) string {
	if n <= 0 {
		return "unlimited"
	}
	return time.Duration(n).String()
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

func republishEqual(a, b *jetstream.RePublish) bool {
	return b != nil && a.Source == b.Source && a.Destination == b.Destination && a.HeadersOnly == b.HeadersOnly
}

// hubShaped reports whether source s of stream is one a hub makes
// (HubStreamConfigs): the same stream and filter as the wanted sources, from
// some site's domain or staging account, with no transform that changes a
// subject; or a site's stream of the same name, read directly, as a hub
// built before staging did (DirectSiteSource: the hub moves it to staging).
func hubShaped(s *jetstream.StreamSource, stream string, want []*jetstream.StreamSource) bool {
	if s.External == nil || !strings.HasPrefix(s.External.APIPrefix, "$JS.") && !strings.HasPrefix(s.External.APIPrefix, "esjet-edge.") {
		return false
	}
	for _, t := range s.SubjectTransforms {
		if t.Source != t.Destination {
			return false
		}
	}
	if s.Name == stream && strings.HasPrefix(s.External.APIPrefix, "$JS.") {
		return true
	}
	return slices.ContainsFunc(want, func(w *jetstream.StreamSource) bool {
		return w.Name == s.Name && w.FilterSubject == s.FilterSubject
	})
}

// refusals are the differences a node does not run on.
func refusals(diffs []Diff) (refuse, warn []Diff) {
	for _, d := range diffs {
		if d.Kind == DiffBenign {
			warn = append(warn, d)
		} else {
			refuse = append(refuse, d)
		}
	}
	return refuse, warn
}

// fields renders diffs as "field: have → want".
func fields(diffs []Diff) []string {
	out := make([]string, len(diffs))
	for i, d := range diffs {
		out[i] = d.String()
	}
	return out
}
