package ops

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/esjet/esjet/config"
	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/wire"
	"github.com/nats-io/nats.go/jetstream"
)

// DeadLetter is one entry of the DLQ, as the wire contract reads it.
type DeadLetter = wire.DeadLetter

// Filter selects dead letters in [DLQ.List]. The zero value selects all.
type Filter struct {
	Kind string // one command kind; "" means every kind
	// ErrorContains keeps entries whose error contains this text, ignoring
	// case; "" keeps all.
	ErrorContains string
	OlderThan     time.Duration // dead at least this long ago; 0: no bound
	NewerThan     time.Duration // dead at most this long ago; 0: no bound
}

// DeadLetterDetail is one dead letter with what happened to its command in
// the DLQ before.
type DeadLetterDetail struct {
	DeadLetter
	// History are the command's audit records, oldest first (earlier
	// dead letters retried or discarded).
	History []AuditRecord `json:"history"`
	// OtherSeqs are other dead letters of the same command still in the DLQ.
	OtherSeqs []uint64 `json:"other_seqs,omitempty"`
	// Settled is the audit record that settled the dead letter (retried or
	// discarded), when it is no longer a dead letter. The DeadLetter then
	// holds only what that record kept (command id, kind, DLQ sequence,
	// error, attempts).
	Settled *AuditRecord `json:"settled,omitempty"`
}

// DLQ reads and acts on one namespace's dead letters. It is safe for
// concurrent use; two operators acting on one entry at once leave one
// re-drive and one audit record when they do it inside the streams' dedup
// windows, and at worst a repeated (harmless) record outside them.
type DLQ struct {
	js    jetstream.JetStream
	names streams.Names
	batch int
	now   func() time.Time
	// settledMaxAge is how long a settled letter's copy stays.
	settledMaxAge time.Duration
	// reads counts the DLQ messages read (a listing costs what it shows).
	reads atomic.Int64
}

// OpenDLQ returns the DLQ of namespace ns. A letter it settles stays, whole,
// for config.Default()'s streams.dlq_settled_max_age: see
// [DLQ.WithSettledMaxAge]. It does no I/O.
func OpenDLQ(js jetstream.JetStream, ns string) *DLQ {
	return &DLQ{js: js, names: streams.NamesFor(ns), batch: 1000, now: time.Now,
		settledMaxAge: config.Default().Streams.DLQSettledMaxAge.Std()}
}

// WithSettledMaxAge sets how long a letter it settles stays in the DLQ,
// whole, before it expires (streams.dlq_settled_max_age); its audit record
// stays. Ages under a second (JetStream's shortest TTL) keep the default.
// It returns d.
func (d *DLQ) WithSettledMaxAge(age time.Duration) *DLQ {
	if age >= time.Second {
		d.settledMaxAge = age
	}
	return d
}

// List returns the dead letters that pass f, oldest first.
func (d *DLQ) List(ctx context.Context, f Filter) ([]DeadLetter, error) {
	// One subject per open letter: the scan reads the open letters (and
	// the marks of the ones settled in the last second or two), never the
	// settled copies or the audit trail.
	rng := streams.ScanRange{Filter: wire.DeadLetterFilter(d.names.Namespace)}
	if f.Kind != "" {
		filter, err := wire.DeadLetterFilterFor(d.names.Namespace, f.Kind)
		if err != nil {
			return nil, err
		}
		rng.Filter = filter
	}
	if f.OlderThan < 0 || f.NewerThan < 0 {
		return nil, fmt.Errorf("dlq list: ages must not be negative (older than %s, newer than %s)", f.OlderThan, f.NewerThan)
	}
	now := d.now()
	if f.NewerThan > 0 {
		// Stored time and Esjet-Dead-At come from two clocks: start early,
		// filter exactly below.
		rng.Since = now.Add(-f.NewerThan - clockSkew)
	}
	text := strings.ToLower(f.ErrorContains)
	out := []DeadLetter{}
	err := d.scan(ctx, rng, func(m *jetstream.RawStreamMsg) error {
		dl := wire.DecodeDeadLetter(m)
		age := now.Sub(dl.DeadAt)
		switch {
		case wire.IsSettleMark(m.Header):
		case f.OlderThan > 0 && age < f.OlderThan:
		case f.NewerThan > 0 && age > f.NewerThan:
		case text != "" && !strings.Contains(strings.ToLower(dl.Error), text):
		default:
			out = append(out, dl)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("dlq list: %w", err)
	}
	return out, nil
}

// Get finds one dead letter: by DLQ stream sequence when idOrSeq is a
// number, else by command id (the newest entry of that command). It
// returns an error wrapping [ErrDeadLetterNotFound] when there is none,
// saying what became of it when the audit trail knows.
func (d *DLQ) Get(ctx context.Context, idOrSeq string) (DeadLetter, error) {
	dl, _, err := d.get(ctx, idOrSeq)
	return dl, err
}

// Show is [DLQ.Get] with the command's audit history. A dead letter that
// was retried or discarded is no longer a dead letter, but its audit trail is:
// Show then returns what the trail knows, with Settled set to the record
// that removed it. It returns an error wrapping [ErrDeadLetterNotFound]
// only when neither the DLQ nor the trail knows idOrSeq.
func (d *DLQ) Show(ctx context.Context, idOrSeq string) (DeadLetterDetail, error) {
	dl, others, err := d.get(ctx, idOrSeq)
	if errors.Is(err, ErrDeadLetterNotFound) {
		det, ok, serr := d.settled(ctx, idOrSeq)
		if serr != nil {
			return DeadLetterDetail{}, serr
		}
		if ok {
			return det, nil
		}
	}
	if err != nil {
		return DeadLetterDetail{}, err
	}
	hist, err := d.History(ctx, dl.ID, dl.Kind)
	if err != nil {
		return DeadLetterDetail{}, err
	}
	return DeadLetterDetail{DeadLetter: dl, History: hist, OtherSeqs: others}, nil
}

// settled finds a settled dead letter: by the DLQ sequence it had when
// idOrSeq is a number (one read of its audit record), else by command id
// (the audit trail). The letter is whole while its settled copy stays
// (streams.dlq_settled_max_age), then what its audit record kept.
func (d *DLQ) settled(ctx context.Context, idOrSeq string) (DeadLetterDetail, bool, error) {
	filter, match := wire.AuditFilter(d.names.Namespace), func(a AuditRecord) bool { return a.CommandID == idOrSeq }
	if seq, err := strconv.ParseUint(idOrSeq, 10, 64); err == nil {
		filter, match = wire.AuditSeqFilter(d.names.Namespace, seq), func(a AuditRecord) bool { return a.DLQSeq == seq }
	}
	recs, err := d.audits(ctx, filter, match)
	if err != nil || len(recs) == 0 {
		return DeadLetterDetail{}, false, err
	}
	last := recs[len(recs)-1]
	hist, err := d.History(ctx, last.CommandID, last.Kind)
	if err != nil {
		return DeadLetterDetail{}, false, err
	}
	dl := DeadLetter{Seq: last.DLQSeq, ID: last.CommandID, Kind: last.Kind, Error: last.Error, Attempts: last.Attempts,
		Payload: json.RawMessage("null")}
	if st, err := d.stream(ctx); err == nil {
		m, err := st.GetLastMsgForSubject(ctx, wire.SettledSubject(d.names.Namespace, last.Kind, last.DLQSeq))
		switch {
		case err == nil:
			d.reads.Add(1)
			dl, _ = wire.DecodeSettled(m)
		case !errors.Is(err, jetstream.ErrMsgNotFound):
			return DeadLetterDetail{}, false, fmt.Errorf("dlq: settled seq %d: %w", last.DLQSeq, err)
		}
	}
	return DeadLetterDetail{DeadLetter: dl, History: hist, Settled: &last}, true, nil
}

// History returns command id's audit records, oldest first. kind narrows
// the scan; "" scans every kind.
func (d *DLQ) History(ctx context.Context, id, kind string) ([]AuditRecord, error) {
	filter := wire.AuditFilter(d.names.Namespace)
	if kind != "" && wire.ValidateToken("command kind", kind) == nil {
		filter = wire.AuditKindFilter(d.names.Namespace, kind)
	}
	return d.audits(ctx, filter, func(a AuditRecord) bool { return a.CommandID == id })
}

func (d *DLQ) get(ctx context.Context, idOrSeq string) (DeadLetter, []uint64, error) {
	if seq, err := strconv.ParseUint(idOrSeq, 10, 64); err == nil {
		dl, err := d.bySeq(ctx, seq)
		return dl, nil, err
	}
	id := idOrSeq
	if _, err := wire.ParseCommandID(id); err != nil {
		return DeadLetter{}, nil, fmt.Errorf("%w (or a DLQ sequence number)", err)
	}
	var found []DeadLetter
	err := d.scan(ctx, streams.ScanRange{Filter: wire.DeadLetterFilter(d.names.Namespace)}, func(m *jetstream.RawStreamMsg) error {
		if m.Header.Get(wire.HeaderCommandID) == id && !wire.IsSettleMark(m.Header) {
			found = append(found, wire.DecodeDeadLetter(m))
		}
		return nil
	})
	if err != nil {
		return DeadLetter{}, nil, fmt.Errorf("dlq: find %s: %w", id, err)
	}
	if len(found) == 0 {
		return DeadLetter{}, nil, d.notFound(ctx, "command "+id, wire.AuditFilter(d.names.Namespace), func(a AuditRecord) bool { return a.CommandID == id })
	}
	newest := found[len(found)-1]
	var others []uint64
	for _, dl := range found[:len(found)-1] {
		others = append(others, dl.Seq)
	}
	return newest, others, nil
}

func (d *DLQ) bySeq(ctx context.Context, seq uint64) (DeadLetter, error) {
	m, err := d.letterAt(ctx, seq)
	if err != nil {
		return DeadLetter{}, err
	}
	return wire.DecodeDeadLetter(m), nil
}

// letterAt reads the open dead letter at DLQ sequence seq. A settled one
// is gone from its subject (the DLQ keeps one message per subject, and its
// mark replaced it): the error then says what became of it.
func (d *DLQ) letterAt(ctx context.Context, seq uint64) (*jetstream.RawStreamMsg, error) {
	st, err := d.stream(ctx)
	if err != nil {
		return nil, err
	}
	m, err := st.GetMsg(ctx, seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, d.notFoundSeq(ctx, seq)
	}
	if err != nil {
		return nil, fmt.Errorf("dlq: seq %d: %w", seq, err)
	}
	d.reads.Add(1)
	if !wire.IsDeadLetterSubject(d.names.Namespace, m.Subject) || wire.IsSettleMark(m.Header) {
		if _, ok := wire.KindOfAudit(d.names.Namespace, m.Subject); ok || wire.IsSettleMark(m.Header) {
			return nil, fmt.Errorf("%w: seq %d of %s is %s (an audit record or a settle mark), not a dead letter; `esjet dlq ls` lists the dead letters", ErrDeadLetterNotFound, seq, d.names.DLQ, m.Subject)
		}
		return nil, fmt.Errorf("%w: seq %d of %s is %s, not a dead letter; `esjet dlq ls` lists the dead letters", ErrDeadLetterNotFound, seq, d.names.DLQ, m.Subject)
	}
	return m, nil
}

// notFoundSeq is ErrDeadLetterNotFound for the letter once at seq, saying
// what became of it when its audit record knows.
func (d *DLQ) notFoundSeq(ctx context.Context, seq uint64) error {
	return d.notFound(ctx, fmt.Sprintf("seq %d", seq), wire.AuditSeqFilter(d.names.Namespace, seq), func(a AuditRecord) bool { return a.DLQSeq == seq })
}

// notFound is ErrDeadLetterNotFound for what, with the last audit record
// on filter that matches when there is one.
func (d *DLQ) notFound(ctx context.Context, what, filter string, match func(AuditRecord) bool) error {
	recs, err := d.audits(ctx, filter, match)
	if err != nil || len(recs) == 0 {
		return fmt.Errorf("%w: no dead letter for %s in %s", ErrDeadLetterNotFound, what, d.names.DLQ)
	}
	a := recs[len(recs)-1]
	return fmt.Errorf("%w: no dead letter for %s in %s; it was %s by %s at %s (audit seq %d)",
		ErrDeadLetterNotFound, what, d.names.DLQ, a.Action, a.By, a.At.Format(time.RFC3339), a.Seq)
}

// provisionHint is what to do about a stream that is not there; nothing
// for any other failure (a refused request, a timeout).
func provisionHint(err error) string {
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return " (start the node once to provision it)"
	}
	return ""
}

func (d *DLQ) stream(ctx context.Context) (jetstream.Stream, error) {
	st, err := d.js.Stream(ctx, d.names.DLQ)
	if err != nil {
		return nil, fmt.Errorf("dlq %s: %w%s", d.names.DLQ, err, provisionHint(err))
	}
	return st, nil
}

func (d *DLQ) scan(ctx context.Context, rng streams.ScanRange, fn func(*jetstream.RawStreamMsg) error) error {
	if _, err := d.stream(ctx); err != nil {
		return err
	}
	sc := streams.NewScanner(d.js, d.names.DLQ, d.batch)
	defer sc.Close()
	_, err := sc.Scan(ctx, rng, func(m *jetstream.RawStreamMsg) error {
		d.reads.Add(1)
		return fn(m)
	})
	return err
}
