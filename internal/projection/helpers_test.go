package projection

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/natstest"
	"github.com/esjet/esjet/internal/streams"
)

// env is a provisioned namespace on a test server.
type env struct {
	js  jetstream.JetStream
	log *streams.Log
	ns  string
	mu  sync.Mutex
	pos map[string]streams.Position
}

func newEnv(t *testing.T) *env { return newEnvB(t) }

func newEnvB(t testing.TB) *env {
	t.Helper()
	s := natstest.RunServer(t)
	_, js := natstest.Connect(t, s)
	ns := natstest.Namespace(t)
	if _, err := streams.Provision(context.Background(), js, ns, streams.ProvisionConfig{Replicas: 1}, nil); err != nil {
		t.Fatal(err)
	}
	l, err := streams.Open(context.Background(), js, ns, streams.Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return &env{js: js, log: l, ns: ns, pos: map[string]streams.Position{}}
}

// append records events of the given types on typ/id and returns the record.
func (e *env) append(t *testing.T, typ, id string, types ...string) streams.Record {
	t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	d := streams.Decision{ID: uuid.Must(uuid.NewV7()).String(), AggregateType: typ, AggregateID: id}
	for _, et := range types {
		d.Events = append(d.Events, streams.Event{Type: et, Data: json.RawMessage(`{"n":1}`)})
	}
	rec, err := e.log.Append(t.Context(), d, e.pos[typ+"/"+id])
	if err != nil {
		t.Fatalf("append %s/%s: %v", typ, id, err)
	}
	e.pos[typ+"/"+id] = rec.Position()
	return rec
}

func testConfig() Config {
	return Config{Heartbeat: 100 * time.Millisecond, LeaseTTL: 1500 * time.Millisecond, RetryBackoff: 5 * time.Millisecond}
}

// run starts a runner of defs until the test ends (or stop is called).
func (e *env) run(t *testing.T, cfg Config, defs ...Definition) (stop func()) {
	t.Helper()
	r, err := NewRunner(t.Context(), e.js, e.log, defs, cfg, testLogger())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = r.Run(ctx)
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			<-done
		})
	}
	t.Cleanup(stop)
	return stop
}

// counter counts events per aggregate id: not idempotent, so an event
// applied twice shows.
func counter(name string) Definition {
	return Definition{Name: name, Handle: func(ctx context.Context, tx *Tx, e Event) error {
		var n int
		if _, err := tx.Get(e.AggregateID, &n); err != nil {
			return err
		}
		return tx.Put(e.AggregateID, n+1)
	}}
}

// doc reads one document of the active generation (0 when absent).
func (e *env) count(t *testing.T, view, key string) int {
	t.Helper()
	d, err := NewViews(e.js, e.ns, 0).Get(t.Context(), view, key, Wait{})
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(string(d.Value))
	return n
}

// checkpoint reads a partition's checkpoint of the active generation.
func (e *env) checkpoint(t *testing.T, view string, gen, part int) Checkpoint {
	t.Helper()
	kv, err := e.js.KeyValue(t.Context(), ViewBucket(e.ns, view, gen))
	if err != nil {
		return Checkpoint{}
	}
	cp, err := readCheckpoint(t.Context(), kv, part)
	if err != nil {
		t.Fatal(err)
	}
	return cp
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second) // generous: the machine is shared
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within 30s: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

var _ = fmt.Sprint

func testLogger() *slog.Logger {
	if os.Getenv("PROJECTION_DEBUG") == "" {
		return nil
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
}
