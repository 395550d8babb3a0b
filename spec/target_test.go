package spec_test

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/esjet/esjet/internal/consumer"
	"github.com/esjet/esjet/internal/natstest"
	"github.com/esjet/esjet/receiver"
	"github.com/esjet/esjet/spec"
)

// TestErrorCodesAreInTheSpec reads the API's codes (the Code… constants
// of internal/api/codes.go) and the statuses it answers them with (Status:
// beside Code: in internal/api) and wants each in spec.json with the same
// status, so a new code cannot ship without its spec line.
func TestErrorCodesAreInTheSpec(t *testing.T) {
	ix := index(t)
	statuses := map[string]int{"http.StatusForbidden": 403, "http.StatusConflict": 409, "http.StatusNotFound": 404,
		"http.StatusMethodNotAllowed": 405, "http.StatusRequestEntityTooLarge": 413, "http.StatusUnsupportedMediaType": 415,
		"http.StatusUnauthorized": 401, "http.StatusInsufficientStorage": 507, "http.StatusBadRequest": 400,
		"http.StatusInternalServerError": 500, "http.StatusServiceUnavailable": 503, "http.StatusGatewayTimeout": 504,
		"http.StatusTooManyRequests": 429, "http.StatusRequestTimeout": 408, "http.StatusPreconditionFailed": 412,
		"http.StatusUnprocessableEntity": 422}
	src, err := os.ReadFile("../internal/api/codes.go")
	if err != nil {
		t.Fatal(err)
	}
	codes := map[string]string{}
	for _, m := range regexp.MustCompile(`(Code\w+)\s*=\s*"([a-z_]+)"`).FindAllStringSubmatch(string(src), -1) {
		codes[m[1]] = m[2]
		if _, ok := ix.Errors[m[2]]; !ok {
			t.Errorf("internal/api/codes.go has code %q (%s), which spec/spec.json does not list", m[2], m[1])
		}
	}
	if len(codes) < 20 {
		t.Fatalf("found %d codes in internal/api/codes.go: the pattern no longer matches how the API writes them; update this test", len(codes))
	}
	files, _ := filepath.Glob("../internal/api/*.go")
	pat := regexp.MustCompile(`Status:\s*([0-9]+|http\.\w+),\s*Code:\s*(Code\w+)`)
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range pat.FindAllStringSubmatch(string(src), -1) {
			st, err := strconv.Atoi(m[1])
			if err != nil {
				st = statuses[m[1]]
			}
			code, ok := codes[m[2]]
			if !ok {
				t.Errorf("%s answers %s, which internal/api/codes.go does not define", filepath.Base(f), m[2])
				continue
			}
			if code == "unknown_command" && st == 404 && filepath.Base(f) == "errtable.go" {
				continue // an operator's unknown ops action (ops.ErrUnknownCommand): 404, the aggregate's 400 is the spec's
			}
			if got := ix.Errors[code]; st != 0 && got != st {
				t.Errorf("%s answers code %q with status %d, spec/spec.json says %d", filepath.Base(f), code, st, got)
			}
		}
	}
}

// TestTargetRequestMatchesTheSpec captures what a worker's NATS target
// sends and validates its headers.
func TestTargetRequestMatchesTheSpec(t *testing.T) {
	s := natstest.RunServer(t)
	nc, _ := natstest.Connect(t, s)
	got := make(chan nats.Header, 1)
	sub, err := nc.Subscribe("svc.hotels", func(m *nats.Msg) {
		got <- m.Header
		_ = m.Respond([]byte(`{"result":{"ok":true}}`))
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	d := consumer.Delivery{CommandID: "trip:t1:2:1", Kind: "book_hotel", Payload: json.RawMessage(`{"room":"double"}`),
		Attempt: 3, Fence: 9, AggregateType: "trip", AggregateID: "t1", AggregateVersion: 2, CorrelationID: "c-1", Schema: 2,
		TraceParent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
	res, err := consumer.NATSTarget{Conn: nc, Subject: "svc.hotels"}.Handle(t.Context(), d)
	if err != nil || string(res) != `{"ok":true}` {
		t.Fatalf("Handle = %s, %v", res, err)
	}
	h := <-got
	flat := map[string]string{}
	for k, v := range h {
		if len(v) != 1 {
			t.Errorf("header %s has %d values, the spec says one", k, len(v))
		}
		flat[k] = v[0]
	}
	data, _ := json.Marshal(flat)
	if err := validate(t, "target-request.json", data); err != nil {
		t.Error(err)
	}
	if flat["Esjet-Fence"] != "9" || flat["Idempotency-Key"] != d.CommandID {
		t.Errorf("fence/key = %q/%q", flat["Esjet-Fence"], flat["Idempotency-Key"])
	}
	sameSet(t, "target headers (spec.json vs what the worker sent)", index(t).TargetHeaders, keys(flat))
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestTargetReplyExamplesMeanWhatTheSpecSays answers a worker's NATS
// target with each spec example and checks how the worker takes it: the
// example's file name is the outcome (done…, failed, try_again, stale).
func TestTargetReplyExamplesMeanWhatTheSpecSays(t *testing.T) {
	s := natstest.RunServer(t)
	nc, _ := natstest.Connect(t, s)
	for file, data := range examples(t, "target-reply") {
		sub, err := nc.Subscribe("svc.reply", func(m *nats.Msg) { _ = m.Respond(data) })
		if err != nil {
			t.Fatal(err)
		}
		_, herr := consumer.NATSTarget{Conn: nc, Subject: "svc.reply"}.Handle(t.Context(), consumer.Delivery{CommandID: "a:b:1:0", Kind: "k", Attempt: 1, Fence: 1})
		_ = sub.Unsubscribe()
		var re *consumer.RetryableError
		var te *consumer.TerminalError
		var se *consumer.FencedError
		want := strings.TrimSuffix(file, ".json")
		var got string
		switch {
		case herr == nil:
			got = "done"
		case errors.As(herr, &se):
			got = "stale"
		case errors.As(herr, &re):
			got = "try_again"
			if strings.Contains(string(data), "retry_after_ms") && re.After != 500*time.Millisecond {
				t.Errorf("%s: retry after %s, want 500ms", file, re.After)
			}
		case errors.As(herr, &te):
			got = "failed"
		default:
			got = herr.Error()
		}
		if !strings.HasPrefix(want, got) {
			t.Errorf("examples/target-reply/%s: the worker took it as %s (%v)", file, got, herr)
		}
	}
}

// keyVectors is conformance/receiver-keys.json.
type keyVectors struct {
	Keys []struct {
		Key    string `json:"key"`
		Stored string `json:"stored"`
	} `json:"keys"`
	Digests []struct {
		Body   string `json:"body"`
		Digest string `json:"digest"`
	} `json:"digests"`
}

// TestReceiverSpeaksTheSpecsRecords runs the Go receiver and reads its
// bucket: keys are stored as the spec encodes them, records match
// receiver-record.json, and a record written as the spec's example (by a
// receiver in another language) is replayed by Go without running the
// effect.
func TestReceiverSpeaksTheSpecsRecords(t *testing.T) {
	s := natstest.RunServer(t)
	_, js := natstest.Connect(t, s)
	ctx := t.Context()
	rcv, err := receiver.New(ctx, js, receiver.Config{Bucket: "spec_rcv", Lease: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(ctx, "spec_rcv")
	if err != nil {
		t.Fatal(err)
	}
	var vec keyVectors
	data, _ := fs.ReadFile(spec.Files, "conformance/receiver-keys.json")
	if err := json.Unmarshal(data, &vec); err != nil || len(vec.Keys) == 0 || len(vec.Digests) == 0 {
		t.Fatalf("receiver-keys.json: %v", err)
	}
	body := []byte(vec.Digests[0].Body)
	ok := func(context.Context) (json.RawMessage, error) { return json.RawMessage(`{"n":1}`), nil }
	for _, v := range vec.Keys {
		if _, _, err := rcv.DoFenced(ctx, v.Key, 3, body, ok); err != nil {
			t.Fatal(err)
		}
		e, err := kv.Get(ctx, v.Stored)
		if err != nil {
			t.Errorf("key %q: not stored as %q: %v", v.Key, v.Stored, err)
			continue
		}
		if err := validate(t, "receiver-record.json", e.Value()); err != nil {
			t.Errorf("key %q: %v", v.Key, err)
		}
		var rec struct{ Digest string }
		_ = json.Unmarshal(e.Value(), &rec)
		if rec.Digest != vec.Digests[0].Digest {
			t.Errorf("digest of %q = %s, the spec says %s", body, rec.Digest, vec.Digests[0].Digest)
		}
	}
	// A failed fenced attempt leaves a released record.
	_, _, err = rcv.DoFenced(ctx, "released-1", 4, body, func(context.Context) (json.RawMessage, error) { return nil, errors.New("no") })
	if err == nil {
		t.Fatal("a failing effect succeeded")
	}
	e, err := kv.Get(ctx, "released-1")
	if err != nil {
		t.Fatal(err)
	}
	if err := validate(t, "receiver-record.json", e.Value()); err != nil || !strings.Contains(string(e.Value()), `"released"`) {
		t.Errorf("released record %s: %v", e.Value(), err)
	}
	// The spec's done example, written by "another language", replays.
	done := examples(t, "receiver-record")["done.json"]
	if _, err := kv.Create(ctx, "from-elsewhere", done); err != nil {
		t.Fatal(err)
	}
	res, replayed, err := rcv.DoFenced(ctx, "from-elsewhere", 7, body, func(context.Context) (json.RawMessage, error) {
		t.Error("the effect ran for a key the spec's record says is done")
		return nil, nil
	})
	if err != nil || !replayed || string(res) != `{"booking_ref":"HT-1"}` {
		t.Errorf("replay of the spec's record = %s, %v, %v", res, replayed, err)
	}
	// …and a lower fence on a running record is refused as stale.
	if _, err := kv.Create(ctx, "running-elsewhere", examples(t, "receiver-record")["running.json"]); err != nil {
		t.Fatal(err)
	}
	_, _, err = rcv.DoFenced(ctx, "running-elsewhere", 6, body, ok)
	if !errors.Is(err, receiver.ErrStale) {
		t.Errorf("fence 6 against the spec's running record with fence 7: %v, want ErrStale", err)
	}
}
