package bench

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/aggregate"
	"github.com/esjet/esjet/internal/api"
	"github.com/esjet/esjet/internal/bench/raw"
	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/wire"
)

// The append phase: commands through the Go API on the node's own
// connection, beside raw conditional appends of the same message on that
// connection. micro.go is the same pairing over TCP.

var depositBody = []byte(`{"amount":1}`)

// opTimeout bounds one operation that has no deadline of its own.
const opTimeout = 30 * time.Second

// setupRaw provisions the raw side's namespace (<ns>_raw, configured like
// the node's) and takes the sample message from a real esjet append: the
// raw appends publish a copy of it (same data, same headers, a fresh
// Nats-Msg-Id) to one subject per aggregate.
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
	// A direct get may be answered by an R3 follower that has not stored
	// the sample yet: not found is asked again, for a few seconds.
	var sample *jetstream.RawStreamMsg
	for deadline := time.Now().Add(5 * time.Second); ; {
		sample, err = st.GetMsg(ctx, res.Seq)
		if err == nil || !errors.Is(err, jetstream.ErrMsgNotFound) || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("sample message: %w", err)
	}
	subjects := make([]string, len(e.ids))
	for a, id := range e.ids {
		subjects[a] = wire.NamesFor(rawNS).TypePrefix("acct") + id
	}
	e.raw = raw.NewAppender(subjects, sample.Data, sample.Header)
	if e.node.Log().GroupCommitting() {
		grouped := make([]string, len(e.ids))
		for a, id := range e.ids {
			grouped[a] = wire.NamesFor(rawNS).TypePrefix("acctg") + id
		}
		e.rawGroup = raw.NewGroupAppender(e.nodeJS, grouped, sample.Data, sample.Header, opTimeout)
	}
	return nil
}

func classifyEsjet(err error) Outcome {
	if errors.Is(err, aggregate.ErrConflict) {
		return Conflict
	}
	return Failed
}

func classifyRaw(err error) Outcome {
	if raw.IsConflict(err) {
		return Conflict
	}
	return Failed
}

func (e *env) goAPISend(ctx context.Context, a int) error {
	_, err := e.node.API().Send(ctx, "acct", e.ids[a], "deposit", depositBody, api.Meta{})
	return err
}

// rawSend appends the sample message to aggregate a's raw subject on js.
func (e *env) rawSend(js jetstream.JetStream) func(ctx context.Context, a int) error {
	return func(ctx context.Context, a int) error {
		_, err := e.raw.Append(ctx, js, a)
		return err
	}
}

// pairedCommands is the append and micro phases: a warm-up sweep of every
// aggregate on both sides, then interleaved rounds.
func (e *env) pairedCommands(ctx context.Context, name string, progress func(float64),
	es func(context.Context, int) error, rawJS jetstream.JetStream, sqliteOp func(context.Context, int) error) ([]Phase, error) {
	rawOp := e.rawSend(rawJS)
	warm := len(e.ids)
	if e.opts.Count > 0 {
		warm = min(warm, e.opts.Count)
	}
	ops := []func(context.Context, int) error{es, rawOp}
	if sqliteOp != nil {
		ops = append(ops, sqliteOp)
	}
	// The append phase under group commit also runs raw JetStream's own
	// group commit: the ceiling esjet's batches are measured against.
	var groupOp func(context.Context, int) error
	if name == PhaseAppend && e.rawGroup != nil && e.opts.Workers > 1 { // one writer forms no batch
		groupOp = func(ctx context.Context, a int) error {
			_, err := e.rawGroup.Append(ctx, a)
			return err
		}
		ops = append(ops, groupOp)
	}
	for _, op := range ops {
		res := RunOps(ctx, Spec{Workers: e.opts.Workers, Ops: warm, Classify: classifyEsjet}, sweep(op))
		if res.Errors > 0 {
			return nil, fmt.Errorf("warm-up: %w", res.FirstErr)
		}
	}
	esPicked, err := e.picked(es)
	if err != nil {
		return nil, err
	}
	// The raw side's waits are counted by the picker too: the appender's
	// own lock would count the same ones.
	rawPicked, err := e.picked(rawOp)
	if err != nil {
		return nil, err
	}
	before := e.node.Repository().Stats().Conflicts
	gcBefore := e.node.Log().CommitStats()
	p := e.planFor(len(ops))
	sides := []func(ctx context.Context, i int) Result{
		func(ctx context.Context, i int) Result {
			return RunOps(ctx, p.spec(i, e.opts.Workers, e.opts.Rate, classifyEsjet, nil), esPicked)
		},
		func(ctx context.Context, i int) Result {
			return RunOps(ctx, p.spec(i, e.opts.Workers, e.opts.Rate, classifyRaw, nil), rawPicked)
		},
	}
	if sqliteOp != nil {
		sqPicked, err := e.picked(sqliteOp)
		if err != nil {
			return nil, err
		}
		sides = append(sides, func(ctx context.Context, i int) Result {
			return RunOps(ctx, p.spec(i, e.opts.Workers, e.opts.Rate, classifyRaw, nil), sqPicked)
		})
	}
	var groupBefore [2]int
	if groupOp != nil {
		grPicked, err := e.picked(groupOp)
		if err != nil {
			return nil, err
		}
		sides = append(sides, func(ctx context.Context, i int) Result {
			return RunOps(ctx, p.spec(i, e.opts.Workers, e.opts.Rate, classifyRaw, nil), grPicked)
		})
		groupBefore[0], groupBefore[1] = e.rawGroup.Batches()
	}
	res := interleave(ctx, p, progress, sides...)
	ph := Phase{Name: name, Description: describe[name], Unit: "command"}
	ph.pair(&res[0], &res[1])
	if sqliteOp != nil {
		ph.withSQLite(&res[2])
	}
	if groupOp != nil {
		b, n := e.rawGroup.Batches()
		ph.withRawGroup(&res[len(res)-1], b-groupBefore[0], n-groupBefore[1])
	}
	ph.VersionConflicts = e.node.Repository().Stats().Conflicts - before
	gc := e.node.Log().CommitStats()
	ph.Batches, ph.Batched = gc.Batches-gcBefore.Batches, gc.Batched-gcBefore.Batched
	return []Phase{ph}, nil
}

func (e *env) appendPhase(ctx context.Context, progress func(float64)) ([]Phase, error) {
	var sq func(context.Context, int) error
	if e.sqlite != nil {
		sq = func(ctx context.Context, a int) error { return e.sqlite.decide(ctx, sqliteID(a)) }
	}
	return e.pairedCommands(ctx, PhaseAppend, progress, e.goAPISend, e.nodeJS, sq)
}
