package consumer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/failpoint"
)

// One attempt at a delivery: the calls to the handler under the lease,
// again while the target is unavailable, and the pause between attempts.

// attempt calls the handler once under lease l, unless the lease may be
// gone (a pause ate it, before the first call or between two calls to an
// unavailable target; then it returns errLeaseLost without calling). It
// keeps the lease alive while the handler runs, cancelling it if it can no
// longer vouch for the lease, and while the target is unavailable it calls
// again with backoff, for up to the kind's timeout or AckWait, whichever
// is shorter, without counting another attempt — unless stop is closed:
// then it returns errStopping.
func (w *Worker) attempt(ctx context.Context, stop <-chan struct{}, log *slog.Logger, m jetstream.Msg, d Delivery, l *lease) (json.RawMessage, error) {
	nc := w.js.Conn()
	if !l.confirm(ctx, nc, m) {
		return nil, fmt.Errorf("%w: %s since it was last confirmed, AckWait %s", errLeaseLost, l.age().Round(time.Millisecond), w.cfg.AckWait)
	}
	held, lose := context.WithCancelCause(ctx)
	defer lose(nil)
	keepCtx, stopKeeping := context.WithCancel(ctx)
	var keeper sync.WaitGroup
	keeper.Go(func() { l.keep(keepCtx, nc, m, func() { lose(errLeaseLost) }) })
	defer func() { stopKeeping(); keeper.Wait() }()

	hctx, cancel := context.WithTimeout(held, w.cfg.Timeout)
	defer cancel()
	defer context.AfterFunc(w.abandoned, cancel)()
	// An unavailable target is called again for at most one lease period:
	// a restart is ridden out without counting an attempt, and a command
	// this node cannot deliver (its route leads nowhere) goes back to the
	// stream for another node's workers before long.
	unavailableUntil := time.Now().Add(min(w.cfg.Timeout, w.cfg.AckWait))
	for n := 1; ; n++ {
		if n > 1 && l.left() <= 0 {
			// A pause during the wait ate the lease: the keeper may not
			// have noticed yet, so look before calling again.
			return nil, fmt.Errorf("%w: %s since it was last confirmed, AckWait %s", errLeaseLost, l.age().Round(time.Millisecond), w.cfg.AckWait)
		}
		failpoint.Hit(failpoint.WorkerBeforeCall)
		result, err := w.call(hctx, d)
		if err == nil {
			return result, nil // done, whatever became of the lease
		}
		if w.abandoned.Err() != nil {
			// The shutdown could not wait for the call: nothing is known
			// to have been applied; hand it back.
			return nil, fmt.Errorf("%w (the call was abandoned at shutdown: %w)", errStopping, err)
		}
		if cause := context.Cause(held); errors.Is(cause, errLeaseLost) {
			return nil, fmt.Errorf("%w (the call: %w)", cause, err)
		}
		if v, _ := classify(err); v != unavailable {
			return nil, err
		}
		wait := min(w.backoff(n), time.Until(unavailableUntil))
		if wait <= 0 {
			return nil, err // counted: the nak's backoff follows
		}
		if n == 1 {
			log.Info("target unavailable; calling again before counting the attempt", "error", err, "for", min(w.cfg.Timeout, w.cfg.AckWait))
		}
		t := time.NewTimer(wait)
		select {
		case <-stop:
			t.Stop()
			if cause := context.Cause(held); errors.Is(cause, errLeaseLost) {
				return nil, cause // not ours to hand back
			}
			return nil, fmt.Errorf("%w (the target: %w)", errStopping, err)
		case <-hctx.Done():
			t.Stop()
			if cause := context.Cause(held); errors.Is(cause, errLeaseLost) {
				return nil, cause
			}
			return nil, err
		case <-t.C:
		}
	}
}

// call runs the handler once, turning a panic into an error.
func (w *Worker) call(ctx context.Context, d Delivery) (result json.RawMessage, err error) {
	defer func() {
		if p := recover(); p != nil {
			result, err = nil, fmt.Errorf("handler panicked: %v", p)
		}
	}()
	return w.cfg.Handler.Handle(ctx, d)
}

// backoff is the delay before attempt+1.
func (w *Worker) backoff(attempt int) time.Duration {
	d := w.cfg.BackoffInitial << min(max(attempt-1, 0), 20)
	d = min(d, w.cfg.BackoffMax)
	jitter := time.Duration(rand.Int64N(int64(d)/5+1)) - d/10
	return max(d+jitter, time.Millisecond)
}
