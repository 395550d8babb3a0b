package esjet_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/esjet/esjet"
	"github.com/esjet/esjet/esjettest"
)

// counterAt is the example's counter whose "added" event is at schema
// version v: each version renames the amount's field ("by", "by2", "by3"…).
func counterAt(v int) *esjet.Definition {
	field := func(v int) string {
		if v == 1 {
			return "by"
		}
		return "by" + string(rune('0'+v))
	}
	def := esjet.Define("counter", 1, func(s Counter, e esjet.Event) Counter {
		var d map[string]int
		_ = e.Decode(&d)
		s.N += d[field(v)]
		return s
	})
	esjet.On(def, "add", func(s Counter, c Add) (esjet.Decision, error) {
		return esjet.Emit("added", map[string]int{field(v): c.By}), nil
	})
	for from := 1; from < v; from++ {
		esjet.Upcast(def, "added", from, func(data json.RawMessage) (json.RawMessage, error) {
			var d map[string]int
			if err := json.Unmarshal(data, &d); err != nil {
				return nil, err
			}
			return json.Marshal(map[string]int{field(from + 1): d[field(from)]})
		})
	}
	return def.Definition()
}

func startNode(t *testing.T, cfg esjet.Config, def *esjet.Definition) *esjet.Node {
	t.Helper()
	n, err := esjet.Start(t.Context(), esjet.Options{Config: cfg, Aggregates: []*esjet.Definition{def}})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func closeNode(t *testing.T, n *esjet.Node) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := n.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestSchemaEvolution: a node of a later build reads events of every older
// version through the chain of upcasters, and records the current one; a
// node of an earlier build refuses the aggregate that holds an event newer
// than it knows (schema_too_new, listed by readiness) and serves the others.
func TestSchemaEvolution(t *testing.T) {
	cfg := esjettest.Config(t)
	ctx := t.Context()

	n := startNode(t, cfg, counterAt(1))
	for _, id := range []string{"c1", "c2"} {
		if _, err := n.Send(ctx, "counter", id, "add", Add{By: 2}); err != nil {
			t.Fatal(err)
		}
	}
	closeNode(t, n)

	n = startNode(t, cfg, counterAt(3))
	if _, err := n.Send(ctx, "counter", "c1", "add", Add{By: 5}); err != nil {
		t.Fatal(err)
	}
	st, _, err := n.State(ctx, "counter", "c1")
	if err != nil || st.(Counter).N != 7 {
		t.Fatalf("state of c1 (schema 1 and 3 events) on the v3 node: %+v, %v; want N 7", st, err)
	}
	h, err := n.Events(ctx, "counter", "c1")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range h.Events {
		if b, _ := json.Marshal(e.Data); e.Schema != 3 || !strings.Contains(string(b), `"by3"`) {
			t.Fatalf("history of c1 on the v3 node shows %s schema %d %s; want schema 3 with by3", e.Type, e.Schema, b)
		}
	}
	closeNode(t, n)

	n = startNode(t, cfg, counterAt(2)) // an older build: knows "added" up to 2
	defer closeNode(t, n)
	_, err = n.Send(ctx, "counter", "c1", "add", Add{By: 1})
	var se *esjet.SchemaError
	if !errors.Is(err, esjet.ErrSchemaTooNew) || !errors.As(err, &se) || se.Schema != 3 || se.Known != 2 {
		t.Fatalf("a command on c1 (holds a schema 3 event) on a v2 node: %v; want a SchemaError 3 > 2", err)
	}
	if _, err := n.Send(ctx, "counter", "c2", "add", Add{By: 1}); err != nil {
		t.Fatalf("c2 holds no newer event and must be served: %v", err)
	}
	st, _, err = n.State(ctx, "counter", "c2")
	if err != nil || st.(Counter).N != 3 {
		t.Fatalf("state of c2 on the v2 node: %+v, %v; want N 3", st, err)
	}

	code, body := httpGet(t, "http://"+n.HTTPAddr()+"/v1/counter/c1/events")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, `"schema_too_new"`) {
		t.Fatalf("GET c1's events on the v2 node: %d %s; want 503 schema_too_new", code, body)
	}
	code, body = httpGet(t, "http://"+n.HTTPAddr()+"/readyz")
	if code != http.StatusOK || !strings.Contains(body, `"refused"`) || !strings.Contains(body, "counter.c1") {
		t.Fatalf("readyz on the v2 node: %d %s; want ready, naming the refused c1", code, body)
	}
	code, body = httpGet(t, "http://"+n.HTTPAddr()+"/console/api/overview")
	if code != http.StatusOK || !strings.Contains(body, `"refused":[{`) || !strings.Contains(body, "counter.c1") {
		t.Fatalf("the console's overview on the v2 node: %d %s; want it to list the refused c1", code, body)
	}
}

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestRawTypeTransforms: a raw type's steps from the configuration apply
// to its history (rename, default, remove, chained), and an event of a
// version beyond them is refused (503 schema_too_new) without touching
// another raw aggregate.
func TestRawTypeTransforms(t *testing.T) {
	cfg := esjettest.Config(t)
	cfg.Aggregates.Raw = map[string]esjet.RawType{"invoice": {Events: map[string]esjet.RawEvent{"issued": {Upcast: []esjet.Transform{
		{Rename: map[string]string{"amt": "amount"}, Default: map[string]any{"currency": "EUR"}},
		{Remove: []string{"legacy"}},
	}}}}}
	n := esjettest.StartWith(t, cfg)
	base := "http://" + n.HTTPAddr() + "/v1/raw/invoice/"
	for _, c := range []struct{ id, body string }{
		{"i1", `{"expected_version":0,"events":[{"type":"issued","schema":1,"data":{"amt":12,"legacy":true}}]}`},
		{"i2", `{"expected_version":0,"events":[{"type":"issued","schema":4,"data":{"x":1}}]}`},
	} {
		resp, err := http.Post(base+c.id+"/events", "application/json", strings.NewReader(c.body))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("raw append to %s: %d %s", c.id, resp.StatusCode, b)
		}
	}
	code, body := httpGet(t, base+"i1/events")
	if code != http.StatusOK || !strings.Contains(body, `"schema":3`) || !strings.Contains(body, `"stored_schema":1`) ||
		!strings.Contains(body, `"data":{"amount":12,"currency":"EUR"}`) {
		t.Fatalf("history of i1: %d %s; want issued at schema 3 (stored 1) as {amount, currency}", code, body)
	}
	code, body = httpGet(t, base+"i2/events")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, `"schema_too_new"`) {
		t.Fatalf("history of i2 (schema 4, the configuration knows 3): %d %s; want 503 schema_too_new", code, body)
	}

	// Data the steps cannot read (not a JSON object) is refused at the
	// write: stored, it would fail every read of i3, and stop the log's
	// readers and the views at it.
	for _, data := range []string{`[1,2]`, `"str"`, `7`} {
		resp, err := http.Post(base+"i3/events", "application/json",
			strings.NewReader(`{"expected_version":0,"events":[{"type":"issued","schema":1,"data":`+data+`}]}`))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), `"invalid_events"`) || !strings.Contains(string(b), "JSON object") {
			t.Fatalf("raw append of issued with data %s: %d %s; want 400 invalid_events asking for a JSON object", data, resp.StatusCode, b)
		}
	}
	if code, body := httpGet(t, base+"i3/events"); code != http.StatusNotFound {
		t.Fatalf("history of i3 after refused appends: %d %s; want 404 (nothing written)", code, body)
	}
	if _, _, err := n.ReadLog(t.Context(), 0, 100); err != nil {
		t.Fatalf("the log after refused appends: %v", err)
	}
}

// Version 2 of the counter's "added" event names its field "amount"; one
// function turns a stored version 1 into it, one line registers it.
func ExampleUpcast() {
	def := esjet.Define("counter", 1, func(s Counter, e esjet.Event) Counter {
		var a struct{ Amount int }
		_ = e.Decode(&a)
		s.N += a.Amount
		return s
	})
	esjet.Upcast(def, "added", 1, func(data json.RawMessage) (json.RawMessage, error) {
		var v1 struct{ By int }
		if err := json.Unmarshal(data, &v1); err != nil {
			return nil, err
		}
		return json.Marshal(map[string]int{"amount": v1.By})
	})
	fmt.Println("added is at schema", def.Definition().EventSchema("added"))
	// Output: added is at schema 2
}
