package consumer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/wire"
)

// Versioned commands: a command's payload has a schema version
// (wire.HeaderCommandSchema, 1 when absent), and a kind's workers
// understand versions up to KindConfig.Schema. A worker that receives a
// newer one — an older build, in a rolling upgrade — never runs it: it
// leaves it for a worker that understands it.
//
// Leaving it must not cost an attempt, yet the only way to hand a command
// back is a nak, and a worker's attempt is JetStream's delivery count. So
// the fleet counts the deliveries it left alone, per command, in KV
// <ns>_workers (wire.DeferKey, a [wire.Deferral] taken by compare-and-set),
// and a delivery's attempt is the delivery count minus that. The count is
// written before the nak: a worker killed in between costs no attempt
// either (the redelivery after AckWait is the delivery it counted). A
// deferral is naked after a backoff that grows with the deferrals (the
// kind's BackoffInitial × 2^n, capped at BackoffMax), so a fleet of old
// workers only looks at a newer command every BackoffMax, and the server
// never gives up on it (MaxDeliver is unlimited). The record is removed
// when a worker that understands the command finishes it (done or
// dead-lettered); until then it says how many commands wait for a newer
// worker (Stats.Deferred per node, [Control.Waiting] across the fleet).

// deferNewer leaves d, of a schema newer than this worker understands, for
// a worker that understands it: it counts the deferral, then naks it
// after a backoff. A count that cannot be written is tried again a few
// times; if it still fails the nak goes out anyway (that delivery counts
// as an attempt, logged).
func (w *Worker) deferNewer(ctx context.Context, log *slog.Logger, m jetstream.Msg, d Delivery) {
	w.deferred.Add(1)
	n, err := w.countDeferral(ctx, d)
	if err != nil {
		log.Error("deferral not counted: this delivery will count as an attempt", "schema", d.Schema, "understands", w.cfg.Schema, "error", err)
	}
	delay := w.backoff(n + 1)
	if n <= 1 {
		log.Warn("command of a newer schema than this worker understands: left for a newer worker, counting no attempt",
			"schema", d.Schema, "understands", w.cfg.Schema, "delay", delay)
	}
	_ = m.NakWithDelay(delay)
}

// countDeferral adds one to d's deferral record and returns the new count.
func (w *Worker) countDeferral(ctx context.Context, d Delivery) (int, error) {
	if w.control == nil {
		return 0, errors.New("no workers' control bucket")
	}
	key := wire.DeferKey(d.Kind, d.CommandID)
	var last error
	for try := range 5 {
		if try > 0 {
			time.Sleep(time.Duration(try) * 50 * time.Millisecond)
		}
		kctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		n, err := w.tryCountDeferral(kctx, key, d)
		cancel()
		if err == nil {
			return n, nil
		}
		last = err
	}
	return 0, last
}

func (w *Worker) tryCountDeferral(ctx context.Context, key string, d Delivery) (int, error) {
	rec := wire.Deferral{CommandID: d.CommandID, Kind: d.Kind, Schema: d.Schema}
	rev, err := readRecord(ctx, w.control, key, &rec)
	if err != nil {
		return 0, err
	}
	rec.Deferred++
	rec.Node, rec.Understands, rec.At = w.cfg.Node, w.cfg.Schema, time.Now().UTC().Format(time.RFC3339Nano)
	if err := writeRecord(ctx, w.control, key, rev, rec); err != nil {
		return 0, err
	}
	return rec.Deferred, nil
}

// uncounted reads how many deliveries of d the fleet gave back without an
// attempt: left for a newer worker (its deferral record) and handed back
// unrun by stopping workers (its hand-back record); 0 and 0 when none
// did. Only a redelivery can have any.
func (w *Worker) uncounted(ctx context.Context, d Delivery) (deferred, handedBack int, err error) {
	if w.control == nil || d.Attempt <= 1 {
		return 0, 0, nil
	}
	kctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var def wire.Deferral
	if _, err := readRecord(kctx, w.control, wire.DeferKey(d.Kind, d.CommandID), &def); err != nil {
		return 0, 0, err
	}
	var hb wire.HandBack
	if _, err := readRecord(kctx, w.control, wire.HandBackKey(d.Kind, d.CommandID), &hb); err != nil {
		return 0, 0, err
	}
	return def.Deferred, hb.HandedBack, nil
}

// readRecord reads key of the workers' bucket kv into v: its revision, 0
// (and v untouched) when there is none.
func readRecord(ctx context.Context, kv jetstream.KeyValue, key string, v any) (uint64, error) {
	e, err := kv.Get(ctx, key)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("read %s: %w", key, err)
	}
	if err := json.Unmarshal(e.Value(), v); err != nil {
		return 0, fmt.Errorf("record %s is not JSON: %w", key, err)
	}
	return e.Revision(), nil
}

// handBack gives d back unrun because the worker is stopping (it waited
// for its rate limit, its concurrency key, a readable receipt or an
// unavailable target): it counts the hand-back in d's hand-back record,
// then naks, so that the redelivery's attempt is the same — a fleet's
// restarts must not dead-letter a command that never failed. A count that
// cannot be written within two seconds (the stop is waiting) is left: the
// nak goes out, and that delivery counts as an attempt (logged).
func (w *Worker) handBack(ctx context.Context, log *slog.Logger, m jetstream.Msg, d Delivery) {
	if err := w.countHandBack(ctx, d); err != nil {
		log.Warn("hand-back not counted: the next delivery counts it as an attempt", "error", err)
	}
	_ = m.Nak()
}

func (w *Worker) countHandBack(ctx context.Context, d Delivery) error {
	if w.control == nil {
		return errors.New("no workers' control bucket")
	}
	key := wire.HandBackKey(d.Kind, d.CommandID)
	var last error
	for try := range 3 {
		if try > 0 {
			time.Sleep(50 * time.Millisecond)
		}
		kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second/3)
		last = w.tryCountHandBack(kctx, key, d)
		cancel()
		if last == nil {
			return nil
		}
	}
	return last
}

func (w *Worker) tryCountHandBack(ctx context.Context, key string, d Delivery) error {
	rec := wire.HandBack{CommandID: d.CommandID, Kind: d.Kind}
	rev, err := readRecord(ctx, w.control, key, &rec)
	if err != nil {
		return err
	}
	rec.HandedBack++
	rec.Node, rec.At = w.cfg.Node, time.Now().UTC().Format(time.RFC3339Nano)
	return writeRecord(ctx, w.control, key, rev, rec)
}

// writeRecord writes v at key of the workers' bucket kv by compare-and-set:
// created when rev is 0 (the record was not there), else updated from rev;
// a lost race is an error isWrongLast recognises.
func writeRecord(ctx context.Context, kv jetstream.KeyValue, key string, rev uint64, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if rev == 0 {
		_, err = kv.Create(ctx, key, b)
	} else {
		_, err = kv.Update(ctx, key, b, rev)
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", key, err)
	}
	return nil
}

// settleDeferral removes d's deferral and hand-back records once d is
// finished (done or dead-lettered). Best effort: a deferral record left
// behind counts one command too many as waiting, nothing else.
func (w *Worker) settleDeferral(ctx context.Context, log *slog.Logger, d Delivery) {
	if w.control == nil {
		return
	}
	for _, r := range []struct {
		n   int
		key string
	}{{d.Deferred, wire.DeferKey(d.Kind, d.CommandID)}, {d.HandedBack, wire.HandBackKey(d.Kind, d.CommandID)}} {
		if r.n == 0 {
			continue
		}
		kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		if err := w.control.Purge(kctx, r.key, jetstream.PurgeTTL(time.Second)); err != nil {
			log.Warn("record not removed", "key", r.key, "error", err)
		}
		cancel()
	}
}
