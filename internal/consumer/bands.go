package consumer

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/wire"
)

// Priorities: a kind's commands are in three bands, each a subject of its
// own (wire.BandSubject: normal on <ns>.outbox.<kind> as before priorities,
// high and low on <ns>.outbox.<kind>.high|low) with a durable consumer of
// its own (wire.BandConsumerName). A node's pull shares its free places
// among the bands by smooth weighted round robin, high 4, normal 2, low 1:
// while every band has commands waiting, of every 7 a node pulls 4 are
// high, 2 normal and 1 low, so a higher band runs first and none starves.
// A band found empty gives its turns to the others (higher first) and is
// asked again after bandRecheck; the normal and the high band, found
// empty, keep a place waiting for their next command while the pool has
// room (see pull).

// bandWeights are the bands' shares, in the order of wire.Priorities.
var bandWeights = map[string]int{wire.PriorityHigh: 4, wire.PriorityNormal: 2, wire.PriorityLow: 1}

// bandRecheck is how long a band found empty is left out of the shares:
// a command arriving in it waits at most this long while other bands keep
// the pool busy.
const bandRecheck = 50 * time.Millisecond

// band is one priority band of a kind on this node.
type band struct {
	priority   string
	cons       jetstream.Consumer
	weight     int
	credit     int       // smooth weighted round robin (Run's goroutine only)
	emptyUntil time.Time // found empty: left out until then (Run's goroutine only)
	waiting    atomic.Bool
	seen       atomic.Int64 // when it last brought a command (Unix ns)
}

// bandInUse is how long after its last command a band other than normal
// keeps a place waiting for the next (see pull): a kind that never has
// high commands gives no place to waiting for them.
const bandInUse = 10 * time.Minute

// inUse reports whether b is worth keeping a place for.
func (b *band) inUse(now time.Time) bool {
	return b.priority == wire.PriorityNormal || now.Sub(time.Unix(0, b.seen.Load())) < bandInUse
}

// BandConsumerConfig is the durable consumer of kind's workers for band
// priority, shared by every node.
func BandConsumerConfig(ns string, cfg KindConfig, priority string) jetstream.ConsumerConfig {
	cc := ConsumerConfig(ns, cfg)
	if priority != wire.PriorityNormal {
		cc.Durable = wire.BandConsumerName(cfg.Kind, priority)
		cc.Description = "esjet workers for " + cfg.Kind + ", " + priority + " priority"
		cc.FilterSubject = wire.BandSubject(ns, cfg.Kind, priority)
	}
	return cc
}

// pulled is a message and when the pull that brought it was sent (its
// lease runs at least until then plus AckWait).
type pulled struct {
	m    jetstream.Msg
	sent time.Time
}

// split shares n pulls among the bands not found empty (all of them if
// every band was): smooth weighted round robin, so the shares interleave
// and carry over from one pull to the next.
func (w *Worker) split(n int, now time.Time) []int {
	q := make([]int, len(w.bands))
	var eligible []int
	total := 0
	for i, b := range w.bands {
		if !now.Before(b.emptyUntil) && !b.waiting.Load() {
			eligible = append(eligible, i)
			total += b.weight
		}
	}
	if len(eligible) == 0 {
		for i, b := range w.bands {
			if !b.waiting.Load() {
				eligible = append(eligible, i)
				total += b.weight
			}
		}
	}
	if len(eligible) == 0 {
		return q // every band has a wait that takes its next command
	}
	for range n {
		for _, i := range eligible {
			w.bands[i].credit += w.bands[i].weight
		}
		best := eligible[0] // ties go to the higher band
		for _, i := range eligible[1:] {
			if w.bands[i].credit > w.bands[best].credit {
				best = i
			}
		}
		w.bands[best].credit -= total
		q[best]++
	}
	return q
}

// fetchNoWait takes up to n messages that are there now, sharing the pulls
// among the bands (split), then offering what a band left to the others,
// highest first.
func (w *Worker) fetchNoWait(n int) []pulled {
	now := w.now()
	quota := w.split(n, now)
	var out []pulled
	asked := make([]bool, len(w.bands))
	for i, b := range w.bands {
		if quota[i] == 0 {
			continue
		}
		got := w.fetchBand(b, quota[i])
		asked[i] = true
		if len(got) < quota[i] {
			b.emptyUntil = now.Add(bandRecheck)
		}
		out = append(out, got...)
	}
	for i, b := range w.bands {
		left := n - len(out)
		if left == 0 {
			break
		}
		if asked[i] && now.Before(b.emptyUntil) || b.waiting.Load() {
			continue // just found empty, or its wait takes its next command
		}
		got := w.fetchBand(b, left)
		if len(got) < left {
			b.emptyUntil = now.Add(bandRecheck)
		}
		out = append(out, got...)
	}
	return out
}

// fetchBand takes up to n messages of one band that are there now.
func (w *Worker) fetchBand(b *band, n int) []pulled {
	sent := w.now()
	batch, err := b.cons.FetchNoWait(n)
	if err != nil {
		return nil
	}
	var out []pulled
	for m := range batch.Messages() {
		out = append(out, pulled{m, sent})
	}
	if len(out) > 0 {
		b.seen.Store(time.Now().UnixNano())
	}
	return out
}

// waitOrder is the bands an idle node waits on, one free place each:
// normal (most commands are), then high. Low is not waited on: an idle
// node finds a low command at its next look, within a wait (at most 2 s),
// and no place sits in a wait for a band that can wait.
func (w *Worker) waitOrder() []*band {
	out := make([]*band, 0, len(w.bands))
	for _, p := range []string{wire.PriorityNormal, wire.PriorityHigh} {
		for _, b := range w.bands {
			if b.priority == p {
				out = append(out, b)
			}
		}
	}
	return out
}

// waitOne waits for the next message of band b, up to idleWait. The wait
// is not cut short when ctx ends: the pull is open on the server until it
// expires (or the server hears that nobody reads its reply subject, which
// may come later than a command: across a route, a leaf link, or simply
// after a publish already on its way), and a message the server sends it
// meanwhile would be dropped by a client that stopped reading (nats.go's
// Fetch unsubscribes when its context ends), unacknowledged until AckWait.
// So a stopping worker lets its idle pulls run out and runs what they
// bring, like a command that came a moment before the stop. A worker
// already stopping opens no new pull.
func (w *Worker) waitOne(ctx context.Context, b *band) (pulled, bool) {
	if ctx.Err() != nil {
		return pulled{}, false
	}
	sent := w.now()
	batch, err := b.cons.Fetch(1, jetstream.FetchMaxWait(w.idleWait()))
	if err != nil {
		if ctx.Err() == nil {
			w.logger.Debug("fetch", "band", b.priority, "error", err)
			time.Sleep(100 * time.Millisecond)
		}
		return pulled{}, false
	}
	for m := range batch.Messages() {
		b.seen.Store(time.Now().UnixNano())
		return pulled{m, sent}, true
	}
	return pulled{}, false
}

// idleWait is how long an idle pull waits for a command: 2s, and at most a
// quarter of AckWait, which is how early the lease's start may be counted.
// It bounds, too, how long a stopping worker with nothing in flight takes
// to return (waitOne). With FetchMaxWait the server ends the pull (408)
// when it expires; the client gives up a second later if that is lost.
func (w *Worker) idleWait() time.Duration {
	return min(2*time.Second, max(w.cfg.AckWait/4, 10*time.Millisecond))
}

// pull fills n free places. First, while its pool has room beside them,
// it keeps one place waiting on each band of waitOrder found empty (normal,
// and high if it had a command within bandInUse), so a command arriving
// there starts at once even while a lower
// band's backlog keeps the rest of the pool busy: what priority means when
// the higher band is live traffic and the lower one a bulk re-drive. Then
// it takes what the bands hold now (fetchNoWait). With nothing in any band
// it waits on the bands of waitOrder with the places it has. Each wait, in
// a goroutine of its own, holds one place and starts its message or gives
// the place back; places left over are given back. When there is nothing
// to fetch and every band of waitOrder is waited on already, it returns
// when one of the waits ends.
//
// A wait holds its place because a message's lease starts when it is
// delivered: a node pulls only what a free place will start now.
func (w *Worker) pull(ctx context.Context, n int, wg *sync.WaitGroup, start func(pulled), giveBack func()) {
	now := w.now()
	for _, b := range w.waitOrder() {
		if n == 0 || int(w.waits.Load())+1 >= w.cfg.Workers {
			break // the pool's last place is for the bands that have work
		}
		if now.Before(b.emptyUntil) && b.inUse(now) && b.waiting.CompareAndSwap(false, true) {
			w.wait(ctx, wg, b, start, giveBack)
			n--
		}
	}
	if n == 0 {
		return
	}
	got := w.fetchNoWait(n)
	for _, p := range got {
		start(p)
	}
	if len(got) > 0 || ctx.Err() != nil {
		for range n - len(got) {
			giveBack()
		}
		return
	}
	launched := 0
	for _, b := range w.waitOrder() {
		if launched == n {
			break
		}
		if !b.waiting.CompareAndSwap(false, true) {
			continue
		}
		launched++
		w.wait(ctx, wg, b, start, giveBack)
	}
	for range n - launched {
		giveBack()
	}
	if launched == 0 {
		select {
		case <-ctx.Done():
		case <-w.waitEnded:
		}
	}
}

// wait waits for band b's next command (b.waiting is set) in a goroutine
// holding one place: it starts the command or gives the place back.
func (w *Worker) wait(ctx context.Context, wg *sync.WaitGroup, b *band, start func(pulled), giveBack func()) {
	w.waits.Add(1)
	wg.Go(func() {
		p, ok := w.waitOne(ctx, b)
		b.waiting.Store(false)
		w.waits.Add(-1)
		if ok {
			start(p)
		} else {
			giveBack()
		}
		select {
		case w.waitEnded <- struct{}{}:
		default:
		}
	})
}
