package consumer

import (
	"context"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// The worker's side of the flow control ([Control]): it stops pulling while
// its kind is paused, and a delivery waits for its concurrency key's slot
// (keylimit.go), then its rate limit's token, right before its call,
// holding its lease and counting no attempt.

// waitUnpaused blocks while the kind is paused; false when ctx ended first.
// A paused kind's workers pull nothing: what is in flight finishes, what
// waits in the stream stays there untouched (no delivery, no attempt), and
// the next pull after the resume takes up where the last one stopped.
func (w *Worker) waitUnpaused(ctx context.Context) bool {
	ctl := w.cfg.Control
	if ctl == nil {
		return ctx.Err() == nil
	}
	for {
		rec, changed := ctl.Pause(w.cfg.Kind)
		if !rec.Paused {
			if w.paused.Swap(false) {
				for _, b := range w.bands {
					b.emptyUntil = time.Time{} // ask every band again
				}
			}
			return ctx.Err() == nil
		}
		if !w.paused.Load() && !w.idleWaitsEnded(ctx) {
			return false
		}
		if !w.paused.Swap(true) {
			w.logger.Info("paused: pulling nothing until the kind is resumed", "by", rec.By, "at", rec.At, "reason", rec.Reason)
		}
		select {
		case <-ctx.Done():
			return false
		case <-changed:
		}
	}
}

// idleWaitsEnded waits until no band has an idle wait outstanding (one
// may still start a command that arrives meanwhile); false when ctx ended
// first.
func (w *Worker) idleWaitsEnded(ctx context.Context) bool {
	for {
		waiting := false
		for _, b := range w.bands {
			waiting = waiting || b.waiting.Load()
		}
		if !waiting {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-w.waitEnded:
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// waitRate takes the delivery's token from the kind's rate limit and waits
// until it may call, renewing the lease meanwhile. A limit that cannot be
// read or written (the server does not answer) is tried again with
// backoff: a command never calls past the limit, and never counts an
// attempt for waiting. false when the delivery was dealt with here: given
// back because the worker is stopping, or left to its next delivery because
// the lease ran out.
func (w *Worker) waitRate(ctx context.Context, stop <-chan struct{}, log *slog.Logger, m jetstream.Msg, l *lease, d Delivery) bool {
	if w.cfg.Rate <= 0 || w.cfg.Control == nil {
		return true
	}
	w.rateWaiting.Add(1)
	defer w.rateWaiting.Add(-1)
	var at time.Time
	for try := 1; ; try++ {
		var err error
		at, err = w.cfg.Control.reserve(ctx, w.cfg.Kind, w.cfg.Rate, w.cfg.Burst)
		if err == nil {
			break
		}
		log.Warn("rate limit not readable; trying again before the command runs", "error", err, "try", try)
		if !w.holdUntil(ctx, stop, log, m, l, d, time.Now().Add(min(w.backoff(try), max(w.cfg.AckWait/3, time.Millisecond)))) {
			return false
		}
	}
	if wait := time.Until(at); wait > 0 {
		w.rateWaits.Add(1)
		log.Debug("waiting for the rate limit", "wait", wait)
	}
	return w.holdUntil(ctx, stop, log, m, l, d, at)
}

// holdUntil waits until t holding the delivery: its lease renewed every
// third of AckWait. false when the delivery was dealt with (see waitRate).
func (w *Worker) holdUntil(ctx context.Context, stop <-chan struct{}, log *slog.Logger, m jetstream.Msg, l *lease, d Delivery, t time.Time) bool {
	for {
		wait := time.Until(t)
		if wait <= 0 {
			return true
		}
		timer := time.NewTimer(min(wait, max(w.cfg.AckWait/3, 10*time.Millisecond)))
		select {
		case <-stop:
			timer.Stop()
			w.handBack(ctx, log, m, d)
			return false
		case <-timer.C:
		}
		if time.Until(t) > 0 && !l.renew(ctx, w.js.Conn(), m) {
			w.stale.Add(1)
			log.Warn("the lease ran out while the command waited for its turn; it waits for its next delivery")
			return false
		}
	}
}

// waitKey takes a slot of the delivery's concurrency key value, waiting
// while they are all taken: it holds its lease meanwhile but gives its
// place in the pool back, and takes one again before it tries once more
// (woken by a release of the key, or at each renewal of its lease). nil
// when the delivery was dealt with here (see holdFor).
func (w *Worker) waitKey(ctx context.Context, stop <-chan struct{}, log *slog.Logger, m jetstream.Msg, l *lease, p *place, d Delivery, value string) *keySlot {
	waiting := false
	defer func() {
		if waiting {
			w.keyWaiting.Add(-1)
		}
	}()
	for try := 1; ; try++ {
		wake := w.keys.wakeup(value)
		slot, err := w.keys.tryAcquire(ctx, value, d.CommandID)
		if slot != nil {
			return slot
		}
		if err != nil {
			// Not known whether the key is free: never call without it.
			log.Warn("concurrency key not readable; trying again before the command runs", "error", err, "try", try)
		}
		if !waiting {
			waiting = true
			w.keyWaits.Add(1)
			w.keyWaiting.Add(1)
			log.Debug("waiting for its concurrency key", "key", value)
		}
		p.yield()
		if _, ok := w.holdFor(ctx, stop, log, m, l, d, wake); !ok {
			return nil
		}
		for {
			fired, ok := w.holdFor(ctx, stop, log, m, l, d, p.retake())
			if !ok {
				return nil
			}
			if fired {
				p.taken()
				break
			}
		}
	}
}

// releaseKey gives the slot back; a failure leaves it to its TTL.
func (w *Worker) releaseKey(ctx context.Context, log *slog.Logger, s *keySlot) {
	if err := s.release(ctx); err != nil {
		log.Warn("concurrency key not released; it frees when its TTL runs out", "key", s.key, "ttl", s.k.ttl, "error", err)
	}
}

// holdFor waits for ch up to a third of AckWait, holding the delivery:
// fired when ch fired first; otherwise the lease was renewed. ok is false
// when the delivery was dealt with: given back (nak) because the worker is
// stopping, or left to its next delivery because the lease ran out.
func (w *Worker) holdFor(ctx context.Context, stop <-chan struct{}, log *slog.Logger, m jetstream.Msg, l *lease, d Delivery, ch <-chan struct{}) (fired, ok bool) {
	t := time.NewTimer(max(w.cfg.AckWait/3, 10*time.Millisecond))
	defer t.Stop()
	select {
	case <-ch:
		return true, true
	case <-stop:
		w.handBack(ctx, log, m, d)
		return false, false
	case <-t.C:
	}
	if !l.renew(ctx, w.js.Conn(), m) {
		w.stale.Add(1)
		log.Warn("the lease ran out while the command waited for its turn; it waits for its next delivery")
		return false, false
	}
	return false, true
}
