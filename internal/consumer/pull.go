package consumer

import (
	"context"
	"sync"
)

// Pulling: the pool's places, the pull that fills the free ones, and the
// hand-off of a finished call's records to a place of their own.
//
// A place in the pool is a handler's: it is taken when a command is pulled
// (its lease starts then, so its call must start at once) and given back
// when the call is over. What follows a successful call — the receipt, the
// report to the aggregate, the ack — waits mostly for a group commit round,
// and holding the pool's place through it would leave the pool idle while
// the receipts wait: the pool would run at pool ÷ (call + round) commands a
// second however fast the handler. So the records move to a place among
// records (recordsFor) and the pool's place pulls the next command. The
// handler's concurrency stays at most the pool; what the node holds
// unacknowledged is at most pool + records, all of it done or being done.
//
// A pool of one keeps its place through the records: its commands run one
// after another end to end (a kind served one at a time stays that way),
// and the next command's receipt read, which waits for any write in flight
// on the receipts stream, would only wait for the last one's receipt
// instead (measured: 1.2k commands/s with the hand-off against 1.4–2.4k/s
// without, with a no-op handler; from a pool of two on the hand-off wins).

// recordsFor is how many finished calls may be recording at once beside a
// pool of n: enough for a full group commit round (512) beyond the pool, at
// most half of the consumer's MaxAckPending; none for a pool of one.
func recordsFor(n int) int {
	if n <= 1 {
		return 0
	}
	return min(max(2*n, 512), 5_000)
}

// place is one delivery's hold on the pool, then on the records. held, if
// set (a kind with a concurrency key), bounds the deliveries the node holds
// outside the records: in the pool or waiting for their key.
type place struct {
	free, records, held chan struct{}
	mu                  sync.Mutex
	state               int // 0: in the pool; 1: in the records; 2: released; 3: waiting outside the pool
}

// yield gives the pool's place back while the delivery waits for its key.
func (p *place) yield() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.state == 0 {
		p.free <- struct{}{}
		p.state = 3
	}
}

// retake is the channel to take a place in the pool from, after a yield;
// taken must be called with what it gave.
func (p *place) retake() <-chan struct{} { return p.free }

// taken records that the delivery holds a place in the pool again.
func (p *place) taken() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.state = 0
}

// unhold gives back the delivery's hold on the node's deliveries (once).
func (p *place) unhold() {
	if p.held != nil {
		<-p.held
		p.held = nil
	}
}

// handOff gives the pool's place back and takes one among the records (it
// waits while they are all taken: the records then pace the pool). Without
// records (a pool of one) the place is kept.
func (p *place) handOff() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.state != 0 || p.records == nil {
		return
	}
	p.records <- struct{}{}
	p.free <- struct{}{}
	p.state = 1
	p.unhold()
}

// release gives back whichever place the delivery holds.
func (p *place) release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch p.state {
	case 0:
		p.free <- struct{}{}
	case 1:
		<-p.records
	}
	p.state = 2
	p.unhold()
}

// Abandon ends the calls in flight once Run's ctx has ended and a
// shutdown cannot wait for them any longer: each handler's context is
// cancelled and, unless its call still returns a result, its command is
// handed back (nak, no attempt counted) for another node or this one after
// its restart. What a call returns is recorded as usual.
func (w *Worker) Abandon() { w.abandonCall() }

// InFlight is how many commands the worker holds now: being called,
// waiting for their turn, or having their outcome recorded. A stopping
// worker with none is only waiting for its idle pulls to run out.
func (w *Worker) InFlight() int { return int(w.inFlight.Load()) }

// Run pulls and handles commands until ctx ends, then stops pulling, lets
// the handlers in flight finish (each bounded by its timeout, or cut short
// by [Worker.Abandon]) and their records be written, and returns. Its idle
// pulls are not cut short but run out (at most 2s): a command the server
// sends one of them meanwhile is run like one that came just before the
// stop, rather than dropped unacknowledged until AckWait (waitOne).
func (w *Worker) Run(ctx context.Context) error {
	free := make(chan struct{}, w.cfg.Workers)
	for range w.cfg.Workers {
		free <- struct{}{}
	}
	var records chan struct{}
	if n := recordsFor(w.cfg.Workers); n > 0 {
		records = make(chan struct{}, n)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	handleCtx := context.WithoutCancel(ctx) // in-flight work finishes after ctx ends
	// With a concurrency key, deliveries waiting for their key give their
	// pool place back; held bounds them (see keyWaitersMax). It is taken
	// before a place in the pool, never while holding one: a waiter that
	// holds it only ever waits for a place in the pool.
	var held chan struct{}
	if w.keys != nil {
		held = make(chan struct{}, w.cfg.Workers+keyWaitersMax)
		wctx, stopWatch := context.WithCancel(ctx)
		var watcher sync.WaitGroup
		watcher.Go(func() {
			if err := w.keys.watch(wctx); err != nil {
				w.logger.Warn("not watching the concurrency keys; waiters try again at each lease renewal", "error", err)
			}
		})
		defer func() { stopWatch(); watcher.Wait() }()
	}
	// start runs a pulled message in a place of its own (the place and the
	// hold the pull took); giveBack returns a place the pull did not use.
	start := func(p pulled) {
		pl := &place{free: free, records: records, held: held}
		w.inFlight.Add(1)
		wg.Go(func() {
			defer w.inFlight.Add(-1)
			defer pl.release()
			w.handle(handleCtx, ctx.Done(), p.m, newLease(p.sent, w.cfg.AckWait, w.now), pl)
		})
	}
	giveBack := func() {
		free <- struct{}{}
		if held != nil {
			<-held
		}
	}
	for {
		if held != nil {
			select {
			case <-ctx.Done():
				return nil
			case held <- struct{}{}:
			}
		}
		select {
		case <-ctx.Done():
			if held != nil {
				<-held
			}
			return nil
		case <-free:
		}
		// A paused kind pulls nothing (its commands wait in the stream,
		// undelivered) until it is resumed.
		if !w.waitUnpaused(ctx) {
			free <- struct{}{}
			if held != nil {
				<-held
			}
			return nil
		}
		// Pull as many as are free right now, no more: a pulled message's
		// lease starts at once, so it must start at once.
		n := 1
	more:
		for n < w.cfg.Workers {
			if held != nil {
				select {
				case held <- struct{}{}:
				default:
					break more
				}
			}
			select {
			case <-free:
				n++
			default:
				if held != nil {
					<-held
				}
				break more
			}
		}
		w.pull(ctx, n, &wg, start, giveBack)
	}
}
