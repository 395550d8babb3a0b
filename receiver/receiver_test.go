package receiver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/esjet/esjet/internal/natstest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// newReceiver starts a server and a receiver on a bucket of its own.
func newReceiver(t *testing.T, cfg Config) (*Receiver, jetstream.KeyValue) {
	t.Helper()
	s := natstest.RunServer(t)
	_, js := natstest.Connect(t, s)
	if cfg.Bucket == "" {
		cfg.Bucket = natstest.Namespace(t) + "_receipts"
	}
	r, err := New(t.Context(), js, cfg)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(t.Context(), cfg.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	return r, kv
}

// counter is an effect that counts its runs and returns {"run": n}.
type counter struct{ n atomic.Int64 }

func (c *counter) effect(delay time.Duration) func(context.Context) (json.RawMessage, error) {
	return func(ctx context.Context) (json.RawMessage, error) {
		n := c.n.Add(1)
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return json.RawMessage(fmt.Sprintf(`{"run":%d}`, n)), nil
	}
}

func TestConcurrentDeliveriesOfOneKeyRunTheEffectOnce(t *testing.T) {
	r, _ := newReceiver(t, Config{})
	var c counter
	type out struct {
		res      json.RawMessage
		replayed bool
		err      error
	}
	outs := make([]out, 8)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range outs {
		wg.Go(func() {
			<-start
			res, replayed, err := r.Do(t.Context(), "trip:t1:4:0", []byte(`{"amount":7}`), c.effect(100*time.Millisecond))
			outs[i] = out{res, replayed, err}
		})
	}
	close(start)
	wg.Wait()
	if n := c.n.Load(); n != 1 {
		t.Fatalf("effect ran %d times, want 1", n)
	}
	fresh := 0
	for i, o := range outs {
		if o.err != nil {
			t.Fatalf("delivery %d: %v", i, o.err)
		}
		if string(o.res) != `{"run":1}` {
			t.Fatalf("delivery %d: result %s, want {\"run\":1}", i, o.res)
		}
		if !o.replayed {
			fresh++
		}
	}
	if fresh != 1 {
		t.Fatalf("%d deliveries report a fresh run, want 1", fresh)
	}
}

func TestSameKeyAndParamsLaterReplaysTheResult(t *testing.T) {
	r, _ := newReceiver(t, Config{})
	var c counter
	first, replayed, err := r.Do(t.Context(), "k1", []byte(`{"a":1}`), c.effect(0))
	if err != nil || replayed {
		t.Fatalf("first: replayed=%v err=%v", replayed, err)
	}
	again, replayed, err := r.Do(t.Context(), "k1", []byte(`{"a":1}`), c.effect(0))
	if err != nil || !replayed || string(again) != string(first) {
		t.Fatalf("second: %s replayed=%v err=%v, want %s replayed", again, replayed, err, first)
	}
	if n := c.n.Load(); n != 1 {
		t.Fatalf("effect ran %d times, want 1", n)
	}
	// A nil result is remembered as nil.
	res, _, err := r.Do(t.Context(), "k2", nil, func(context.Context) (json.RawMessage, error) { return nil, nil })
	if err != nil || res != nil {
		t.Fatalf("nil result: %s %v", res, err)
	}
	res, replayed, err = r.Do(t.Context(), "k2", nil, c.effect(0))
	if err != nil || !replayed || res != nil {
		t.Fatalf("nil result replayed: %s %v %v", res, replayed, err)
	}
}

func TestSameKeyWithDifferentParamsIsAConflict(t *testing.T) {
	r, _ := newReceiver(t, Config{})
	var c counter
	if _, _, err := r.Do(t.Context(), "trip:t1:4:0", []byte(`{"a":1}`), c.effect(0)); err != nil {
		t.Fatal(err)
	}
	_, _, err := r.Do(t.Context(), "trip:t1:4:0", []byte(`{"a":2}`), c.effect(0))
	if !errors.Is(err, ErrConflict) {
		t.Fatalf("err = %v, want ErrConflict", err)
	}
	if want := `"trip:t1:4:0"`; !regexp.MustCompile(regexp.QuoteMeta(want)).MatchString(err.Error()) {
		t.Fatalf("error %q does not name the key", err)
	}
	if n := c.n.Load(); n != 1 {
		t.Fatalf("effect ran %d times, want 1", n)
	}
}

func TestConflictIsReportedWhileTheFirstDeliveryRuns(t *testing.T) {
	r, _ := newReceiver(t, Config{})
	release := make(chan struct{})
	running := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, _, err := r.Do(t.Context(), "k", []byte("a"), func(context.Context) (json.RawMessage, error) {
			close(running)
			<-release
			return json.RawMessage(`1`), nil
		})
		done <- err
	}()
	<-running
	_, _, err := r.Do(t.Context(), "k", []byte("b"), func(context.Context) (json.RawMessage, error) {
		t.Error("effect ran for conflicting params")
		return nil, nil
	})
	close(release)
	if !errors.Is(err, ErrConflict) {
		t.Fatalf("err = %v, want ErrConflict", err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestAFailedEffectDoesNotConsumeTheKey(t *testing.T) {
	r, kv := newReceiver(t, Config{})
	boom := errors.New("supplier busy")
	var runs int
	_, _, err := r.Do(t.Context(), "k", []byte("p"), func(context.Context) (json.RawMessage, error) {
		runs++
		return nil, boom
	})
	if err != boom {
		t.Fatalf("err = %v, want the effect's error unchanged", err)
	}
	if _, err := kv.Get(t.Context(), encodeKey("k")); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatalf("claim after a failed effect: %v, want it deleted", err)
	}
	res, replayed, err := r.Do(t.Context(), "k", []byte("p"), func(context.Context) (json.RawMessage, error) {
		runs++
		return json.RawMessage(`"ok"`), nil
	})
	if err != nil || replayed || string(res) != `"ok"` || runs != 2 {
		t.Fatalf("retry: %s replayed=%v err=%v runs=%d, want a second run", res, replayed, err, runs)
	}
}

func TestAPanickingEffectReleasesItsClaim(t *testing.T) {
	r, kv := newReceiver(t, Config{})
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("panic swallowed")
			}
		}()
		_, _, _ = r.Do(t.Context(), "k", nil, func(context.Context) (json.RawMessage, error) { panic("boom") })
	}()
	if _, err := kv.Get(t.Context(), encodeKey("k")); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatalf("claim after a panic: %v, want it deleted", err)
	}
}

// crashedClaim writes the claim a crashed owner leaves behind.
func crashedClaim(t *testing.T, kv jetstream.KeyValue, key string, params []byte) {
	t.Helper()
	if _, err := kv.Create(t.Context(), encodeKey(key), claim{digest: digestOf(params), owner: "crashed-host:1/x"}.value()); err != nil {
		t.Fatal(err)
	}
}

func TestAStaleClaimIsTakenOverByOneDelivery(t *testing.T) {
	r, kv := newReceiver(t, Config{Lease: 300 * time.Millisecond})
	params := []byte(`{"x":1}`)
	crashedClaim(t, kv, "trip:t9:2:0", params)
	var c counter
	var wg sync.WaitGroup
	results := make([]string, 4)
	begin := time.Now()
	for i := range results {
		wg.Go(func() {
			res, _, err := r.Do(t.Context(), "trip:t9:2:0", params, c.effect(50*time.Millisecond))
			if err != nil {
				t.Error(err)
			}
			results[i] = string(res)
		})
	}
	wg.Wait()
	if n := c.n.Load(); n != 1 {
		t.Fatalf("effect ran %d times after the takeover, want 1", n)
	}
	for i, res := range results {
		if res != `{"run":1}` {
			t.Fatalf("delivery %d: %s", i, res)
		}
	}
	if el := time.Since(begin); el < 200*time.Millisecond {
		t.Fatalf("took over after %s, before the lease of 300ms", el)
	}
}

func TestAFreshClaimMakesAWaiterReturnErrInProgressWhenItsContextEnds(t *testing.T) {
	r, kv := newReceiver(t, Config{Lease: time.Hour})
	crashedClaim(t, kv, "k", nil)
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	_, _, err := r.Do(ctx, "k", nil, func(context.Context) (json.RawMessage, error) {
		t.Error("effect ran under another's fresh claim")
		return nil, nil
	})
	if !errors.Is(err, ErrInProgress) {
		t.Fatalf("err = %v, want ErrInProgress", err)
	}
}

func TestALongEffectRenewsItsClaim(t *testing.T) {
	// A lease long enough that renewals every lease/3 keep the claim on a
	// machine so busy a 100ms timer fires late (300ms was taken over there).
	r, _ := newReceiver(t, Config{Lease: 1500 * time.Millisecond})
	var c counter
	first := make(chan error, 1)
	go func() {
		_, _, err := r.Do(t.Context(), "k", nil, c.effect(4*time.Second))
		first <- err
	}()
	natstest.Eventually(t, 5*time.Second, func() bool { return c.n.Load() == 1 })
	time.Sleep(2500 * time.Millisecond) // past the lease: only renewals keep the claim
	res, replayed, err := r.Do(t.Context(), "k", nil, c.effect(0))
	if err != nil || !replayed || string(res) != `{"run":1}` {
		t.Fatalf("second delivery: %s replayed=%v err=%v", res, replayed, err)
	}
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if n := c.n.Load(); n != 1 {
		t.Fatalf("effect ran %d times, want 1", n)
	}
}

func TestTheResultIsRecordedEvenIfTheCallersContextEndsAfterTheEffect(t *testing.T) {
	r, _ := newReceiver(t, Config{})
	ctx, cancel := context.WithCancel(t.Context())
	res, _, err := r.Do(ctx, "k", nil, func(context.Context) (json.RawMessage, error) {
		cancel()
		return json.RawMessage(`7`), nil
	})
	if err != nil || string(res) != "7" {
		t.Fatalf("%s %v", res, err)
	}
	res, replayed, err := r.Do(t.Context(), "k", nil, func(context.Context) (json.RawMessage, error) { return json.RawMessage(`8`), nil })
	if err != nil || !replayed || string(res) != "7" {
		t.Fatalf("replay: %s %v %v", res, replayed, err)
	}
}

func TestNewIsIdempotentAndSetsRetention(t *testing.T) {
	s := natstest.RunServer(t)
	_, js := natstest.Connect(t, s)
	cfg := Config{Bucket: "idem_receipts", Retention: time.Hour}
	for range 2 {
		if _, err := New(t.Context(), js, cfg); err != nil {
			t.Fatal(err)
		}
	}
	kv, err := js.KeyValue(t.Context(), cfg.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	st, err := kv.Status(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if st.TTL() != time.Hour {
		t.Fatalf("bucket TTL = %s, want 1h", st.TTL())
	}
	r, err := New(t.Context(), js, Config{Bucket: "defaults_receipts"})
	if err != nil {
		t.Fatal(err)
	}
	if c := r.Config(); c.Retention != DefaultRetention || c.Lease != DefaultLease || c.Replicas != 1 {
		t.Fatalf("defaults: %+v", c)
	}
}

func TestConfigValidateReportsEveryProblem(t *testing.T) {
	err := Config{Bucket: "a.b", Retention: -1, Lease: -1, Replicas: 9}.Validate()
	if err == nil {
		t.Fatal("no error")
	}
	if n := len(err.(interface{ Unwrap() []error }).Unwrap()); n != 4 {
		t.Fatalf("%d problems, want 4: %v", n, err)
	}
	if err := (Config{Bucket: "x", Retention: time.Minute, Lease: time.Hour}).Validate(); err == nil {
		t.Fatal("lease longer than retention accepted")
	}
}

func TestDoRejectsEmptyAndOverlongKeys(t *testing.T) {
	r, _ := newReceiver(t, Config{})
	for _, key := range []string{"", string(make([]byte, MaxKeyLen+1))} {
		if _, _, err := r.Do(t.Context(), key, nil, nil); !errors.Is(err, ErrInvalidKey) {
			t.Fatalf("key of %d bytes: %v", len(key), err)
		}
	}
}

var kvKey = regexp.MustCompile(`^[-/_=.a-zA-Z0-9]+$`)

func TestEncodeKeyIsAValidKVKeyAndInjective(t *testing.T) {
	seen := map[string]string{}
	for _, key := range []string{"trip:t1:4:0", "trip=3At1=3A4=3A0", "a.b", "a..b", ".", "*", ">", "é", "a b", "A-b_c", "=", "=3D"} {
		enc := encodeKey(key)
		if !kvKey.MatchString(enc) {
			t.Fatalf("%q → %q is not a valid KV key", key, enc)
		}
		if prev, ok := seen[enc]; ok {
			t.Fatalf("%q and %q both encode to %q", prev, key, enc)
		}
		seen[enc] = key
	}
	if got := encodeKey("trip:t1:4:0"); got != "trip=3At1=3A4=3A0" {
		t.Fatalf("encodeKey = %q", got)
	}
}

func TestATinyLeaseStillWorks(t *testing.T) {
	r, _ := newReceiver(t, Config{Lease: time.Nanosecond})
	var c counter
	if _, _, err := r.Do(t.Context(), "k", nil, c.effect(5*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if res, replayed, err := r.Do(t.Context(), "k", nil, c.effect(0)); err != nil || !replayed || string(res) != `{"run":1}` {
		t.Fatalf("%s %v %v", res, replayed, err)
	}
}
