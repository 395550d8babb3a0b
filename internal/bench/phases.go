package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/aggregate"
	"github.com/esjet/esjet/internal/api"
	"github.com/esjet/esjet/internal/consumer"
	"github.com/esjet/esjet/internal/node"
	"github.com/esjet/esjet/internal/outbox"
	"github.com/esjet/esjet/internal/streams"
)

var depositBody = []byte(`{"amount":1}`)

// opTimeout bounds one operation that has no deadline of its own.
const opTimeout = 30 * time.Second

// ---- append and micro -------------------------------------------------

// rawAppender publishes a copy of a real esjet decision message (same
// data, same headers, a fresh Nats-Msg-Id) to one subject per aggregate
// with the expectation an append carries. Like esjet's repository, it
// serialises writes to one aggregate in-process (a lock per subject) and
// counts the writes that had to wait for one.
type rawAppender struct {
	subjects []string
	last     []uint64
	locks    []sync.Mutex
	data     []byte
	header   nats.Header
}

func (r *rawAppender) append(ctx context.Context, js jetstream.JetStream, a int) (waited bool, err error) {
	if !r.locks[a].TryLock() {
		waited = true
		r.locks[a].Lock()
	}
	defer r.locks[a].Unlock()
	m := &nats.Msg{Subject: r.subjects[a], Data: r.data, Header: nats.Header{}}
	for k, v := range r.header {
		m.Header[k] = v
	}
	m.Header.Set(jetstream.MsgIDHeader, uuid.NewString())
	ack, err := js.PublishMsg(ctx, m, jetstream.WithExpectLastSequencePerSubject(r.last[a]))
	if err != nil {
		return waited, err
	}
	r.last[a] = ack.Sequence
	return waited, nil
}

// setupRaw provisions the raw side's namespace (<ns>_raw, configured like
// the node's) and takes the sample message from a real esjet append.
func (e *env) setupRaw(ctx context.Context) error {
	e.ids = make([]string, e.opts.Aggregates)
	for a := range e.ids {
		e.ids[a] = "a" + strconv.Itoa(a)
	}
	rawNS := e.ns + "_raw"
	if _, err := e.provision(ctx, rawNS); err != nil {
		return err
	}
	res, err := e.node.API().Send(ctx, "acct", "sample", "deposit", depositBody, api.Meta{})
	if err != nil {
		return fmt.Errorf("sample command: %w", err)
	}
	st, err := e.nodeJS.Stream(ctx, streams.NamesFor(e.ns).Events)
	if err != nil {
		return err
	}
	sample, err := st.GetMsg(ctx, res.Seq)
	if err != nil {
		return fmt.Errorf("sample message: %w", err)
	}
	r := &rawAppender{subjects: make([]string, len(e.ids)), last: make([]uint64, len(e.ids)),
		locks: make([]sync.Mutex, len(e.ids)), data: sample.Data, header: nats.Header{}}
	for k, v := range sample.Header {
		if !strings.HasPrefix(k, "Nats-Expected") {
			r.header[k] = v
		}
	}
	for a, id := range e.ids {
		r.subjects[a] = rawNS + ".evt.acct." + id
	}
	e.raw = r
	return nil
}

func classifyEsjet(err error) Outcome {
	if errors.Is(err, aggregate.ErrConflict) {
		return Conflict
	}
	return Failed
}

func classifyRaw(err error) Outcome {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && (apiErr.ErrorCode == 10071 || apiErr.ErrorCode == 10164) {
		return Conflict
	}
	return Failed
}

// picked wraps an operation on aggregate a: each worker picks with its own
// seeded picker (the same seeds on both sides, so both see the same
// sequence of aggregates), and a pick of an aggregate that already has an
// operation in flight counts as a wait.
func (e *env) picked(op func(ctx context.Context, a int) error) (Op, error) {
	pickers := make([]Picker, e.opts.Workers)
	for w := range pickers {
		p, err := NewPicker(e.opts.Skew, len(e.ids), uint64(w)+1)
		if err != nil {
			return nil, err
		}
		pickers[w] = p
	}
	inflight := make([]atomic.Int32, len(e.ids))
	return func(ctx context.Context, w int) (bool, error) {
		a := pickers[w].Pick()
		waited := inflight[a].Add(1) > 1
		defer inflight[a].Add(-1)
		return waited, op(ctx, a)
	}, nil
}

// sweep returns an op that visits aggregates 0, 1, … once each (warm-up:
// every aggregate exists and is cached before timing).
func sweep(op func(ctx context.Context, a int) error) Op {
	var next atomic.Int64
	return func(ctx context.Context, w int) (bool, error) {
		return false, op(ctx, int(next.Add(1)-1))
	}
}

func (e *env) goAPISend(ctx context.Context, a int) error {
	_, err := e.node.API().Send(ctx, "acct", e.ids[a], "deposit", depositBody, api.Meta{})
	return err
}

func (e *env) microSend(ctx context.Context, a int) error {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	reply, err := e.tcp.RequestWithContext(ctx, api.SubjectPrefix(e.ns)+".acct."+e.ids[a]+".deposit", depositBody)
	if err != nil {
		return err
	}
	if code := reply.Header.Get("Nats-Service-Error-Code"); code != "" {
		err := fmt.Errorf("micro %s: %s", code, reply.Header.Get("Nats-Service-Error"))
		if code == "409" {
			err = fmt.Errorf("%w: %w", aggregate.ErrConflict, err)
		}
		return err
	}
	return nil
}

func (e *env) rawSend(js jetstream.JetStream) func(ctx context.Context, a int) error {
	return func(ctx context.Context, a int) error {
		_, err := e.raw.append(ctx, js, a)
		return err
	}
}

// pairedCommands is the append and micro phases: a warm-up sweep of every
// aggregate on both sides, then interleaved rounds.
func (e *env) pairedCommands(ctx context.Context, name string, progress func(float64),
	es func(context.Context, int) error, rawJS jetstream.JetStream) ([]Phase, error) {
	raw := e.rawSend(rawJS)
	warm := len(e.ids)
	if e.opts.Count > 0 {
		warm = min(warm, e.opts.Count)
	}
	for _, op := range []func(context.Context, int) error{es, raw} {
		res := RunOps(ctx, Spec{Workers: e.opts.Workers, Ops: warm, Classify: classifyEsjet}, sweep(op))
		if res.Errors > 0 {
			return nil, fmt.Errorf("warm-up: %w", res.FirstErr)
		}
	}
	esOp, err := e.picked(es)
	if err != nil {
		return nil, err
	}
	rawOp, err := e.picked(func(ctx context.Context, a int) error {
		// The raw side's own lock counts the waits; the picker's count
		// would be the same.
		return raw(ctx, a)
	})
	if err != nil {
		return nil, err
	}
	before := e.node.Repository().Stats().Conflicts
	p := e.planFor(2)
	res := interleave(ctx, p, progress,
		func(ctx context.Context, i int) Result {
			return RunOps(ctx, p.spec(i, e.opts.Workers, e.opts.Rate, classifyEsjet, nil), esOp)
		},
		func(ctx context.Context, i int) Result {
			return RunOps(ctx, p.spec(i, e.opts.Workers, e.opts.Rate, classifyRaw, nil), rawOp)
		})
	ph := Phase{Name: name, Description: describe[name], Unit: "command"}
	ph.pair(&res[0], &res[1])
	ph.VersionConflicts = e.node.Repository().Stats().Conflicts - before
	return []Phase{ph}, nil
}

func (e *env) appendPhase(ctx context.Context, progress func(float64)) ([]Phase, error) {
	return e.pairedCommands(ctx, PhaseAppend, progress, e.goAPISend, e.nodeJS)
}

func (e *env) microPhase(ctx context.Context, progress func(float64)) ([]Phase, error) {
	return e.pairedCommands(ctx, PhaseMicro, progress, e.microSend, e.tcpJS)
}

// ---- relay and effects ------------------------------------------------

// drainRounds runs round(i) until the phase's time is spent (set-up
// included, at least one round, at most 8), or once in count mode.
func (e *env) drainRounds(ctx context.Context, progress func(float64), round func(i int) error) error {
	start := time.Now()
	if e.opts.Count > 0 {
		return round(0)
	}
	stop := ticker(progress, func() float64 { return float64(time.Since(start)) / float64(e.opts.Duration) })
	defer stop()
	for i := 0; i < 8 && (i == 0 || time.Since(start) < e.opts.Duration); i++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := round(i); err != nil {
			return err
		}
	}
	return nil
}

func (e *env) drainSize() int {
	if e.opts.Count > 0 {
		return e.opts.Count
	}
	return drainBatch
}

// fillDecisions appends n decisions of one event and one reported command
// each, to n new aggregates, with 16 writers; it returns the last sequence.
func fillDecisions(ctx context.Context, log *streams.Log, n int) (uint64, error) {
	var last atomic.Uint64
	res := RunOps(ctx, Spec{Workers: 16, Ops: n}, sweep(func(ctx context.Context, i int) error {
		d := streams.Decision{ID: uuid.NewString(), AggregateType: "acct", AggregateID: "r" + strconv.Itoa(i),
			Events:   []streams.Event{{Type: "paid", Data: json.RawMessage(depositBody)}},
			Commands: []streams.Command{{Kind: "charge", Payload: json.RawMessage(depositBody), Report: true}}}
		rec, err := log.Append(ctx, d, streams.Position{})
		if err != nil {
			return err
		}
		for {
			old := last.Load()
			if rec.Seq <= old || last.CompareAndSwap(old, rec.Seq) {
				return nil
			}
		}
	}))
	if res.Errors > 0 {
		return 0, fmt.Errorf("fill: %w", res.FirstErr)
	}
	return last.Load(), nil
}

// waitFor polls done every millisecond until it is true, failing after
// stall without progress.
func waitFor(ctx context.Context, what string, progress func() int64, done func() bool) error {
	const stall = 30 * time.Second
	last, since := progress(), time.Now()
	for !done() {
		if err := ctx.Err(); err != nil {
			return err
		}
		if p := progress(); p != last {
			last, since = p, time.Now()
		} else if time.Since(since) > stall {
			return fmt.Errorf("%s: no progress for %s", what, stall)
		}
		time.Sleep(time.Millisecond)
	}
	return nil
}

func (e *env) relayPhase(ctx context.Context, progress func(float64)) ([]Phase, error) {
	var es, raw Result
	n := e.drainSize()
	err := e.drainRounds(ctx, progress, func(i int) error {
		rns := e.ns + "_r" + strconv.Itoa(i)
		defer func() {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer cancel()
			deleteNamespace(cctx, e.nodeJS, rns, e.cfg)
		}()
		log, err := e.provision(ctx, rns)
		if err != nil {
			return err
		}
		last, err := fillDecisions(ctx, log, n)
		if err != nil {
			return err
		}
		runEsjet := func() error {
			start := time.Now()
			r, err := outbox.NewRelay(ctx, e.nodeJS, rns, node.RelayConfig(e.cfg), nil)
			if err != nil {
				return err
			}
			rctx, cancel := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() { done <- r.Run(rctx) }()
			err = waitFor(ctx, "relay", func() int64 { return r.Stats().Decisions }, func() bool { return r.Stats().LastSeq >= last })
			elapsed := time.Since(start)
			cancel()
			<-done
			if err != nil {
				return err
			}
			es.Add(Result{Ops: int64(n), Elapsed: elapsed})
			return nil
		}
		runRaw := func() error {
			start := time.Now()
			if err := rawRelay(ctx, e.nodeJS, rns, last, e.cfg.Outbox.RelayBatch); err != nil {
				return fmt.Errorf("raw: %w", err)
			}
			raw.Add(Result{Ops: int64(n), Elapsed: time.Since(start)})
			return nil
		}
		if i%2 == 0 {
			return errors.Join(runEsjet(), runRaw())
		}
		return errors.Join(runRaw(), runEsjet())
	})
	ph := Phase{Name: PhaseRelay, Description: describe[PhaseRelay], Unit: "decision"}
	ph.pair(&es, &raw)
	if err != nil {
		ph.Error = err.Error()
	}
	return []Phase{ph}, nil
}

// rawRelay drains EVENTS into OUTBOX the minimal way, as the outbox
// package's benchmark does: the relay's own pipeline (Consume with
// prefetch, batches of what has arrived, async publishes, an ack per
// decision with the batch's last one confirmed) without decoding decisions
// or building command messages.
func rawRelay(ctx context.Context, js jetstream.JetStream, ns string, last uint64, batchSize int) error {
	if batchSize <= 0 {
		batchSize = 256
	}
	names := streams.NamesFor(ns)
	cons, err := js.CreateOrUpdateConsumer(ctx, names.Events, jetstream.ConsumerConfig{
		Durable: "raw-bench", AckPolicy: jetstream.AckExplicitPolicy, MaxAckPending: batchSize * 8,
	})
	if err != nil {
		return err
	}
	pub, err := jetstream.New(js.Conn(), jetstream.WithPublishAsyncMaxPending(batchSize*16))
	if err != nil {
		return err
	}
	in := make(chan jetstream.Msg, batchSize*4)
	cc, err := cons.Consume(func(m jetstream.Msg) { in <- m }, jetstream.PullMaxMessages(batchSize*2))
	if err != nil {
		return err
	}
	defer cc.Stop()
	batch := make([]jetstream.Msg, 0, batchSize)
	timeout := time.NewTimer(opTimeout)
	defer timeout.Stop()
	for {
		select {
		case m := <-in:
			batch = append(batch[:0], m)
		case <-timeout.C:
			return errors.New("no messages for 30s")
		case <-ctx.Done():
			return ctx.Err()
		}
		timeout.Reset(opTimeout)
	fill:
		for len(batch) < batchSize {
			select {
			case m := <-in:
				batch = append(batch, m)
			default:
				break fill
			}
		}
		futs := make([]jetstream.PubAckFuture, 0, len(batch))
		for _, m := range batch {
			out := nats.NewMsg(ns + ".outbox.raw")
			out.Data = m.Data()
			out.Header.Set(jetstream.MsgIDHeader, uuid.NewString())
			f, err := pub.PublishMsgAsync(out, jetstream.WithStallWait(opTimeout))
			if err != nil {
				return err
			}
			futs = append(futs, f)
		}
		for _, f := range futs {
			select {
			case <-f.Ok():
			case err := <-f.Err():
				return err
			}
		}
		for _, m := range batch[:len(batch)-1] {
			_ = m.Ack()
		}
		lastMsg := batch[len(batch)-1]
		if err := lastMsg.DoubleAck(ctx); err != nil {
			return err
		}
		if meta, _ := lastMsg.Metadata(); meta != nil && meta.Sequence.Stream >= last {
			return nil
		}
	}
}

func (e *env) effectsPhase(ctx context.Context, progress func(float64)) ([]Phase, error) {
	var es, raw Result
	n := e.drainSize()
	err := e.drainRounds(ctx, progress, func(i int) error {
		kind := "noop" + strconv.Itoa(i)
		if err := publishCommands(ctx, e.nodeJS, e.ns, kind, n); err != nil {
			return err
		}
		runEsjet := func() error {
			start := time.Now()
			w, err := consumer.NewWorker(ctx, e.nodeJS, e.ns, consumer.KindConfig{Kind: kind, Workers: e.opts.Workers,
				Handler: consumer.HandlerFunc(noop), Node: "bench"}, nil, nil)
			if err != nil {
				return err
			}
			wctx, cancel := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() { done <- w.Run(wctx) }()
			err = waitFor(ctx, "workers", func() int64 { return w.Stats().Done }, func() bool { return w.Stats().Done >= int64(n) })
			elapsed := time.Since(start)
			cancel()
			<-done
			if err != nil {
				return err
			}
			es.Add(Result{Ops: int64(n), Elapsed: elapsed})
			return nil
		}
		runRaw := func() error {
			start := time.Now()
			if err := rawFetchAck(ctx, e.nodeJS, e.ns, kind, n); err != nil {
				return fmt.Errorf("raw: %w", err)
			}
			raw.Add(Result{Ops: int64(n), Elapsed: time.Since(start)})
			return nil
		}
		if i%2 == 0 {
			return errors.Join(runEsjet(), runRaw())
		}
		return errors.Join(runRaw(), runEsjet())
	})
	ph := Phase{Name: PhaseEffects, Description: describe[PhaseEffects], Unit: "command"}
	ph.pair(&es, &raw)
	if err != nil {
		ph.Error = err.Error()
	}
	return []Phase{ph}, nil
}

// publishCommands puts n commands of kind in OUTBOX as the relay would.
func publishCommands(ctx context.Context, js jetstream.JetStream, ns, kind string, n int) error {
	// With sync always a full window waits on fsyncs longer than the
	// default stall wait (200 ms): each publish below may wait opTimeout.
	pub, err := jetstream.New(js.Conn(), jetstream.WithPublishAsyncMaxPending(4096))
	if err != nil {
		return err
	}
	for i := range n {
		id := fmt.Sprintf("acct:x%d:1:0-%s", i, kind)
		m := nats.NewMsg(outbox.CommandSubject(ns, kind))
		m.Data = depositBody
		for k, v := range map[string]string{jetstream.MsgIDHeader: id, outbox.HeaderCommandID: id,
			outbox.HeaderCommandKind: kind, outbox.HeaderAggregateType: "acct", outbox.HeaderAggregateID: "x" + strconv.Itoa(i),
			outbox.HeaderVersion: "1", outbox.HeaderReport: "false"} {
			m.Header.Set(k, v)
		}
		if _, err := pub.PublishMsgAsync(m, jetstream.WithStallWait(opTimeout)); err != nil {
			return err
		}
	}
	select {
	case <-pub.PublishAsyncComplete():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(opTimeout):
		return errors.New("publishing commands: no acks for 30s")
	}
}

// rawFetchAck drains n messages of kind with a plain durable pull consumer:
// fetch 256 at a time, ack each (fire and forget: the floor JetStream
// offers; the workers also read and write a receipt per command and wait
// for each ack's confirmation).
func rawFetchAck(ctx context.Context, js jetstream.JetStream, ns, kind string, n int) error {
	cons, err := js.CreateOrUpdateConsumer(ctx, streams.NamesFor(ns).Outbox, jetstream.ConsumerConfig{
		Durable: "raw-" + kind, FilterSubject: outbox.CommandSubject(ns, kind), AckPolicy: jetstream.AckExplicitPolicy, MaxAckPending: 10_000,
	})
	if err != nil {
		return err
	}
	got := 0
	for got < n {
		if err := ctx.Err(); err != nil {
			return err
		}
		batch, err := cons.Fetch(min(256, n-got), jetstream.FetchMaxWait(time.Second))
		if err != nil {
			return err
		}
		for m := range batch.Messages() {
			if err := m.Ack(); err != nil {
				return err
			}
			got++
		}
		if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) {
			return err
		}
	}
	return nil
}

// ---- e2e --------------------------------------------------------------

func (e *env) e2ePhase(ctx context.Context, progress func(float64)) ([]Phase, error) {
	var waiters sync.Map // aggregate id → chan struct{}
	sub, err := e.node.Broker().Conn().Subscribe(e.ns+".evt.acct.*", func(m *nats.Msg) {
		if m.Header.Get(streams.HeaderEventTypes) != "charged" {
			return
		}
		if ch, ok := waiters.LoadAndDelete(m.Header.Get(streams.HeaderAggregateID)); ok {
			close(ch.(chan struct{}))
		}
	})
	if err != nil {
		return nil, err
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		return nil, err
	}
	var seq atomic.Int64
	op := func(ctx context.Context, w int) (bool, error) {
		id := "e" + strconv.FormatInt(seq.Add(1), 10)
		ch := make(chan struct{})
		waiters.Store(id, ch)
		if _, err := e.node.API().Send(ctx, "acct", id, "pay", depositBody, api.Meta{}); err != nil {
			waiters.Delete(id)
			return false, err
		}
		t := time.NewTimer(opTimeout)
		defer t.Stop()
		select {
		case <-ch:
			return false, nil
		case <-t.C:
			waiters.Delete(id)
			return false, fmt.Errorf("%s: charged not recorded within %s", id, opTimeout)
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
	p := e.planFor(1)
	res := interleave(ctx, p, progress, func(ctx context.Context, i int) Result {
		return RunOps(ctx, p.spec(i, e.opts.Workers, e.opts.Rate, classifyEsjet, nil), op)
	})
	ph := Phase{Name: PhaseE2E, Description: describe[PhaseE2E], Unit: "round trip"}
	ph.pair(&res[0], nil)
	return []Phase{ph}, nil
}

// ---- load -------------------------------------------------------------

func (e *env) loadPhase(ctx context.Context, progress func(float64)) ([]Phase, error) {
	names := streams.NamesFor(e.ns)
	snaps, err := e.nodeJS.KeyValue(ctx, names.Snapshots)
	if err != nil {
		return nil, err
	}
	reg, err := aggregate.NewRegistry(Account())
	if err != nil {
		return nil, err
	}
	log := e.node.Log()
	newRepo := func(cache, snapEvery int) *aggregate.Repository {
		return aggregate.NewRepository(log, snaps, reg, aggregate.Config{Namespace: e.ns, CacheSize: cache, SnapshotEvery: snapEvery}, nil)
	}
	// Fill with a repository of its own that snapshots every 100 events:
	// the last snapshot is at event 1,000, whatever the config says.
	const id = "load-1000"
	filler := newRepo(0, 100)
	for range loadEvents {
		if _, err := filler.Handle(ctx, aggregate.Command{Type: "acct", ID: id, Kind: "deposit", Payload: depositBody}); err != nil {
			return nil, fmt.Errorf("fill: %w", err)
		}
	}
	withSnap, noSnap := newRepo(-1, 100), newRepo(-1, -1)
	subject, err := names.AggregateSubject("acct", id)
	if err != nil {
		return nil, err
	}
	// The raw floor: the same batched direct gets over one shared reply
	// subscription that Log.Load uses, touching only the bytes.
	scanner := streams.NewScanner(e.nodeJS, names.Events, 1000)
	defer scanner.Close()
	esLoad := func(repo *aggregate.Repository) Op {
		return func(ctx context.Context, w int) (bool, error) {
			st, err := repo.Get(ctx, "acct", id)
			if err == nil && st.Position.Version != loadEvents {
				err = fmt.Errorf("loaded version %d, want %d", st.Position.Version, loadEvents)
			}
			return false, err
		}
	}
	rawLoad := func(ctx context.Context, w int) (bool, error) {
		size := 0
		n, err := scanner.Scan(ctx, streams.ScanRange{Filter: subject}, func(m *jetstream.RawStreamMsg) error {
			size += len(m.Data)
			return nil
		})
		if err == nil && (n != loadEvents || size == 0) {
			err = fmt.Errorf("raw read %d messages, want %d", n, loadEvents)
		}
		return false, err
	}
	p := e.planFor(3)
	side := func(op Op) func(ctx context.Context, i int) Result {
		return func(ctx context.Context, i int) Result { return RunOps(ctx, p.spec(i, 1, 0, nil, nil), op) }
	}
	res := interleave(ctx, p, progress, side(esLoad(noSnap)), side(esLoad(withSnap)), side(rawLoad))
	full := Phase{Name: PhaseLoad, Description: "cold load of a 1,000-event aggregate, snapshots off (cache off) vs raw batched direct get of its messages", Unit: "load"}
	full.pair(&res[0], &res[2])
	snap := Phase{Name: PhaseLoad + "-snap", Description: "cold load of the same aggregate from its snapshot (taken at event 1,000) + tail check, vs the same raw read of all 1,000 messages", Unit: "load"}
	snap.pair(&res[1], &res[2])
	return []Phase{full, snap}, nil
}

// ---- replay -----------------------------------------------------------

func (e *env) replayPhase(ctx context.Context, progress func(float64)) ([]Phase, error) {
	names := streams.NamesFor(e.ns)
	st, err := e.nodeJS.Stream(ctx, names.Events)
	if err != nil {
		return nil, err
	}
	info, err := st.Info(ctx)
	if err != nil {
		return nil, err
	}
	if have := int(info.State.Msgs); have < replayMin {
		res := RunOps(ctx, Spec{Workers: e.opts.Workers, Ops: replayMin - have}, sweep(func(ctx context.Context, i int) error {
			_, err := e.node.API().Send(ctx, "acct", "p"+strconv.Itoa(i%max(len(e.ids), 1)), "deposit", depositBody, api.Meta{})
			return err
		}))
		if res.Errors > 0 {
			return nil, fmt.Errorf("fill: %w", res.FirstErr)
		}
		if info, err = st.Info(ctx); err != nil {
			return nil, err
		}
	}
	total := int(info.State.Msgs)
	last := info.State.LastSeq
	var es, raw Result
	esRound := func() error {
		start := time.Now()
		recs, err := e.node.Log().ReadFrom(ctx, 1, total)
		if err != nil {
			return err
		}
		if len(recs) != total {
			return fmt.Errorf("read %d decisions, want %d", len(recs), total)
		}
		es.Add(Result{Ops: int64(total), Elapsed: time.Since(start)})
		return nil
	}
	rawRound := func() error {
		start := time.Now()
		n, err := orderedRead(ctx, e.nodeJS, names, last)
		if err != nil {
			return fmt.Errorf("raw: %w", err)
		}
		if n != total {
			return fmt.Errorf("raw read %d messages, want %d", n, total)
		}
		raw.Add(Result{Ops: int64(n), Elapsed: time.Since(start)})
		return nil
	}
	err = e.drainRounds(ctx, progress, func(i int) error {
		if i%2 == 0 {
			return errors.Join(esRound(), rawRound())
		}
		return errors.Join(rawRound(), esRound())
	})
	ph := Phase{Name: PhaseReplay, Description: describe[PhaseReplay], Unit: "decision"}
	ph.pair(&es, &raw)
	if err != nil {
		ph.Error = err.Error()
	}
	return []Phase{ph}, nil
}

// orderedRead reads the event log up to sequence last with an ordered
// consumer, touching only the bytes, and returns how many messages came.
func orderedRead(ctx context.Context, js jetstream.JetStream, names streams.Names, last uint64) (int, error) {
	cons, err := js.OrderedConsumer(ctx, names.Events, jetstream.OrderedConsumerConfig{FilterSubjects: []string{names.EventsFilter()}})
	if err != nil {
		return 0, err
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(1000))
	if err != nil {
		return 0, err
	}
	defer it.Stop()
	n, size := 0, 0
	for {
		m, err := it.Next()
		if err != nil {
			return n, err
		}
		n++
		size += len(m.Data())
		meta, err := m.Metadata()
		if err != nil {
			return n, err
		}
		if meta.Sequence.Stream >= last {
			if size == 0 {
				return n, errors.New("empty messages")
			}
			return n, nil
		}
	}
}
