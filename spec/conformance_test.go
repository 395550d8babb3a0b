package spec_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/esjet/esjet/internal/api"
	"github.com/esjet/esjet/internal/consumer"
	"github.com/esjet/esjet/internal/wire"
	"github.com/esjet/esjet/receiver"
	"github.com/esjet/esjet/spec"
)

// conformanceBucket is the KV bucket every language's receiver scenarios
// share (keys are prefixed with each run's token).
const conformanceBucket = "esjet_conformance"

type step = map[string]any

type apiCases struct {
	Cases []struct {
		Name  string `json:"name"`
		Steps []step `json:"steps"`
	} `json:"cases"`
}

type receiverCases struct {
	Scenarios []struct {
		Name  string `json:"name"`
		Steps []step `json:"steps"`
	} `json:"scenarios"`
}

func readJSON(t *testing.T, name string, v any) {
	t.Helper()
	data, err := fs.ReadFile(spec.Files, name)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

// subst replaces {run} in strings and a string "${name}" by saved[name].
func subst(v any, run string, saved map[string]any) any {
	switch x := v.(type) {
	case string:
		if strings.HasPrefix(x, "${") && strings.HasSuffix(x, "}") {
			if s, ok := saved[x[2:len(x)-1]]; ok {
				return s
			}
		}
		return strings.ReplaceAll(x, "{run}", run)
	case map[string]any:
		out := map[string]any{}
		for k, e := range x {
			out[k] = subst(e, run, saved)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = subst(e, run, saved)
		}
		return out
	}
	return v
}

// match is the cases' subset match: want's keys present in got with
// matching values, arrays of equal length, "*" for any present value.
func match(at string, want, got any) error {
	if want == "*" {
		return nil
	}
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return fmt.Errorf("%s: want an object, got %v", at, got)
		}
		for k, wv := range w {
			gv, ok := g[k]
			if !ok {
				return fmt.Errorf("%s.%s: missing", at, k)
			}
			if err := match(at+"."+k, wv, gv); err != nil {
				return err
			}
		}
		return nil
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return fmt.Errorf("%s: want %d items, got %v", at, len(w), got)
		}
		for i := range w {
			if err := match(fmt.Sprintf("%s[%d]", at, i), w[i], g[i]); err != nil {
				return err
			}
		}
		return nil
	}
	if !reflect.DeepEqual(want, got) {
		return fmt.Errorf("%s: want %v, got %v", at, want, got)
	}
	return nil
}

func getPath(v any, p string) any {
	for _, k := range strings.Split(p, ".") {
		m, _ := v.(map[string]any)
		v = m[k]
	}
	return v
}

// check compares a reply (or an API error) with a step's expect.
func check(t *testing.T, expect map[string]any, reply []byte, code string, status int, errVersion any) error {
	t.Helper()
	if want, ok := expect["error"]; ok {
		if code != want || (expect["status"] != nil && float64(status) != expect["status"]) {
			return fmt.Errorf("want error %v (%v), got %q (%d): %s", want, expect["status"], code, status, reply)
		}
		if v, ok := expect["version"]; ok && !reflect.DeepEqual(v, errVersion) {
			return fmt.Errorf("want the error's version %v, got %v", v, errVersion)
		}
		return nil
	}
	if code != "" {
		return fmt.Errorf("want a reply, got error %q (%d): %s", code, status, reply)
	}
	if s, ok := expect["schema"].(string); ok {
		if err := validate(t, s, reply); err != nil {
			return err
		}
	}
	var got any
	if err := json.Unmarshal(reply, &got); err != nil {
		return err
	}
	if m, ok := expect["match"]; ok {
		if err := match("reply", m, got); err != nil {
			return err
		}
	}
	for _, k := range asList(expect["absent"]) {
		if _, ok := got.(map[string]any)[k.(string)]; ok {
			return fmt.Errorf("reply has %q, want it absent: %s", k, reply)
		}
	}
	if c, ok := expect["contains"].(map[string]any); ok {
		for k, item := range c {
			found := false
			for _, e := range asList(getPath(got, k)) {
				if match(k, item, e) == nil {
					found = true
				}
			}
			if !found {
				return fmt.Errorf("reply's %s has no item matching %v", k, item)
			}
		}
	}
	return nil
}

func asList(v any) []any { l, _ := v.([]any); return l }

// goRequest sends one step to the node over NATS, as the spec says: the
// reference client the other languages are held to.
func goRequest(ctx context.Context, nc *nats.Conn, s step) (body []byte, code string, status int, version any, err error) {
	str := func(k string) string { v, _ := s[k].(string); return v }
	page := func(extra map[string]any) []byte {
		b := map[string]any{}
		for _, k := range []string{"after", "limit", "key", "wait"} {
			if v, ok := s[k]; ok {
				b[k] = v
			}
		}
		if len(b) == 0 {
			return nil
		}
		data, _ := json.Marshal(b)
		return data
	}
	var subject string
	var data []byte
	switch op := str("op"); op {
	case "send":
		if ev, ok := s["expected_version"]; ok {
			// A send at an expected version is a one-command multi request.
			multi := step{"op": "multi", "idempotency_key": s["idempotency_key"], "body": map[string]any{"commands": []any{map[string]any{
				"type": s["type"], "id": s["id"], "command": s["command"], "payload": s["payload"], "expected_version": ev}}}}
			body, code, status, version, err := goRequest(ctx, nc, multi)
			if err != nil || code != "" {
				return body, code, status, version, err
			}
			var res struct {
				Results []json.RawMessage `json:"results"`
			}
			if err := json.Unmarshal(body, &res); err != nil || len(res.Results) != 1 {
				return body, "", 0, nil, fmt.Errorf("multi of one command answered %s", body)
			}
			return res.Results[0], "", 0, nil, nil
		}
		subject = strings.Join([]string{str("type"), str("id"), str("command")}, ".")
		data, _ = json.Marshal(s["payload"])
	case "state":
		subject = str("type") + "." + str("id") + ".state"
	case "history":
		subject, data = str("type")+"."+str("id")+".events", page(nil)
	case "raw_history":
		subject, data = "raw.events."+str("type")+"."+str("id"), page(nil)
	case "raw_append":
		subject = "raw.append." + str("type") + "." + str("id")
		data, _ = json.Marshal(s["body"])
	case "multi":
		subject = "multi"
		data, _ = json.Marshal(s["body"])
	case "types", "log":
		subject, data = op, page(nil)
	case "view_get":
		subject, data = "views."+str("view")+".get", page(nil)
	default:
		return nil, "", 0, nil, fmt.Errorf("unknown op %q", op)
	}
	m := nats.NewMsg(wire.APIPrefix("demo") + "." + subject)
	m.Data = data
	if k := str("idempotency_key"); k != "" {
		m.Header.Set(api.HeaderIdempotencyKey, k)
	}
	resp, err := nc.RequestMsgWithContext(ctx, m)
	if err != nil {
		return nil, "", 0, nil, err
	}
	if st := resp.Header.Get(micro.ErrorCodeHeader); st != "" {
		status, _ = strconv.Atoi(st)
		var e struct {
			Error struct {
				Code    string `json:"code"`
				Version any    `json:"version"`
			} `json:"error"`
		}
		if err := json.Unmarshal(resp.Data, &e); err != nil || e.Error.Code == "" {
			return resp.Data, "", status, nil, fmt.Errorf("error reply %d without a code: %s", status, resp.Data)
		}
		return resp.Data, e.Error.Code, status, e.Error.Version, nil
	}
	return resp.Data, "", 0, nil, nil
}

func runAPICasesGo(t *testing.T, nc *nats.Conn, run string) {
	var cs apiCases
	readJSON(t, "conformance/api.json", &cs)
	if len(cs.Cases) == 0 {
		t.Fatal("api.json has no cases")
	}
	for _, c := range cs.Cases {
		t.Run(c.Name, func(t *testing.T) {
			saved := map[string]any{}
			for i, raw := range c.Steps {
				s := subst(raw, run, saved).(map[string]any)
				ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
				body, code, status, ver, err := goRequest(ctx, nc, s)
				cancel()
				if err != nil {
					t.Fatalf("step %d (%s): %v", i+1, s["op"], err)
				}
				if err := check(t, s["expect"].(map[string]any), body, code, status, ver); err != nil {
					t.Fatalf("step %d (%s): %v", i+1, s["op"], err)
				}
				if sv, ok := s["save"].(map[string]any); ok {
					var got any
					_ = json.Unmarshal(body, &got)
					for name, p := range sv {
						saved[name] = getPath(got, p.(string))
					}
				}
			}
		})
	}
}

// serveGoReceiver answers target requests on subject with the Go receiver,
// as demo/services does: the reply a worker expects (target-reply.json).
func serveGoReceiver(t *testing.T, nc *nats.Conn, rcv *receiver.Receiver, subject string, effect func() (json.RawMessage, error)) {
	sub, err := nc.Subscribe(subject, func(m *nats.Msg) {
		reply := func(v any) { data, _ := json.Marshal(v); _ = m.Respond(data) }
		key := m.Header.Get(consumer.HeaderIdempotencyKey)
		if key == "" {
			reply(map[string]any{"error": "missing Idempotency-Key header", "retryable": false})
			return
		}
		fence, err := receiver.ParseFence(m.Header.Get(receiver.HeaderFence))
		if err != nil {
			reply(map[string]any{"error": err.Error(), "retryable": false})
			return
		}
		res, _, err := rcv.DoFenced(context.Background(), key, fence, m.Data, func(context.Context) (json.RawMessage, error) { return effect() })
		var f *effectFailure
		switch {
		case err == nil, errors.Is(err, receiver.ErrNotRecorded) && res != nil:
			if res == nil {
				res = json.RawMessage("null")
			}
			reply(map[string]any{"result": res})
		case errors.As(err, &f):
			reply(map[string]any{"error": f.msg, "retryable": f.retryable})
		case errors.Is(err, receiver.ErrStale):
			reply(map[string]any{"error": err.Error(), "stale": true})
		case errors.Is(err, receiver.ErrConflict), errors.Is(err, receiver.ErrInvalidKey):
			reply(map[string]any{"error": err.Error(), "retryable": false})
		default:
			reply(map[string]any{"error": err.Error(), "retryable": true, "retry_after_ms": 500})
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
}

type effectFailure struct {
	msg       string
	retryable bool
}

func (e *effectFailure) Error() string { return e.msg }

// deliver sends a step's delivery as a worker would.
func deliver(ctx context.Context, nc *nats.Conn, subject string, s step) ([]byte, error) {
	m := nats.NewMsg(subject)
	m.Data, _ = json.Marshal(s["body"])
	if k, _ := s["key"].(string); k != "" {
		m.Header.Set(consumer.HeaderIdempotencyKey, k)
		m.Header.Set(wire.HeaderCommandID, k)
	}
	if f, _ := s["fence"].(float64); f != 0 {
		m.Header.Set(consumer.HeaderFence, strconv.FormatUint(uint64(f), 10))
	}
	m.Header.Set(consumer.HeaderAttempt, fmt.Sprint(s["attempt"]))
	resp, err := nc.RequestMsgWithContext(ctx, m)
	if err != nil {
		return nil, err
	}
	return resp.Data, nil
}

func runReceiverCasesGo(t *testing.T, nc *nats.Conn, js jetstream.JetStream, run string) {
	var rc receiverCases
	readJSON(t, "conformance/receiver.json", &rc)
	rcv, err := receiver.New(t.Context(), js, receiver.Config{Bucket: conformanceBucket, Lease: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	for i, sc := range rc.Scenarios {
		t.Run(sc.Name, func(t *testing.T) {
			subject := fmt.Sprintf("conformance.%s.%d", run, i)
			var mu sync.Mutex
			runs, mode := 0, ""
			serveGoReceiver(t, nc, rcv, subject, func() (json.RawMessage, error) {
				mu.Lock()
				defer mu.Unlock()
				runs++
				switch mode {
				case "retryable", "terminal":
					return nil, &effectFailure{msg: "effect failed (" + mode + ")", retryable: mode == "retryable"}
				}
				return json.RawMessage(fmt.Sprintf(`{"runs":%d}`, runs)), nil
			})
			for j, raw := range sc.Steps {
				s := subst(raw, fmt.Sprintf("%s-%d", run, i), nil).(map[string]any)
				mu.Lock()
				mode = s["effect"].(string)
				mu.Unlock()
				ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
				body, err := deliver(ctx, nc, subject, s)
				cancel()
				if err != nil {
					t.Fatalf("step %d: %v", j+1, err)
				}
				exp := s["expect"].(map[string]any)
				if err := validate(t, "target-reply.json", body); err != nil {
					t.Fatalf("step %d: %v", j+1, err)
				}
				if err := check(t, map[string]any{"match": exp["reply"], "absent": exp["absent"]}, body, "", 0, nil); err != nil {
					t.Fatalf("step %d: %v", j+1, err)
				}
				mu.Lock()
				got := runs
				mu.Unlock()
				if float64(got) != exp["runs"] {
					t.Fatalf("step %d: the effect ran %d times, want %v", j+1, got, exp["runs"])
				}
			}
		})
	}
}

// TestConformance starts one node and runs the conformance cases in every
// language against it: Go here, TypeScript (clients/ts) and Python
// (clients/python) as child processes.
func TestConformance(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the conformance suite builds and runs the esjet binary")
	}
	n := startNode(t)
	nc, err := nats.Connect(n.natsURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	run := fmt.Sprintf("go%d", time.Now().UnixNano()%1_000_000_000)
	t.Run("go/api", func(t *testing.T) { runAPICasesGo(t, nc, run) })
	t.Run("go/receiver", func(t *testing.T) { runReceiverCasesGo(t, nc, js, run) })
	t.Run("typescript", func(t *testing.T) { runTypeScript(t, n) })
	t.Run("python", func(t *testing.T) { runPython(t, n) })
	// Whatever language wrote them, the receivers' records are the spec's.
	t.Run("records", func(t *testing.T) {
		kv, err := js.KeyValue(t.Context(), conformanceBucket)
		if err != nil {
			t.Fatal(err)
		}
		keys, err := kv.Keys(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			e, err := kv.Get(t.Context(), k)
			if err != nil {
				t.Fatal(err)
			}
			if err := validate(t, "receiver-record.json", e.Value()); err != nil {
				t.Errorf("key %s: %v", k, err)
			}
		}
		if len(keys) < 5 {
			t.Errorf("%d records in %s, want the scenarios' keys", len(keys), conformanceBucket)
		}
	})
}
