package spec_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"path"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v5"

	"github.com/esjet/esjet/internal/aggregate"
	"github.com/esjet/esjet/internal/api"
	"github.com/esjet/esjet/internal/projection"
	"github.com/esjet/esjet/spec"
)

// The schemas are checked with santhosh-tekuri/jsonschema: pure Go, no
// dependencies of its own, draft 2020-12, and it passes the official
// JSON-Schema-Test-Suite — the same schemas other languages validate with
// their own tools, so a hand-written subset checker would be a second,
// weaker reading of them. Tests only: the node never validates with it.

const schemaBase = "https://esjet.dev/spec/v1/"

var (
	schemasOnce sync.Once
	schemas     map[string]*jsonschema.Schema
	schemasErr  error
)

// schema returns the compiled schema of file name (e.g. "result.json").
func schema(t testing.TB, name string) *jsonschema.Schema {
	t.Helper()
	schemasOnce.Do(func() {
		c := jsonschema.NewCompiler()
		c.Draft = jsonschema.Draft2020
		c.AssertFormat = true
		entries, err := fs.ReadDir(spec.Files, "schemas")
		if err != nil {
			schemasErr = err
			return
		}
		for _, e := range entries {
			data, _ := fs.ReadFile(spec.Files, "schemas/"+e.Name())
			if err := c.AddResource(schemaBase+e.Name(), bytes.NewReader(data)); err != nil {
				schemasErr = fmt.Errorf("%s: %w", e.Name(), err)
				return
			}
		}
		schemas = map[string]*jsonschema.Schema{}
		for _, e := range entries {
			s, err := c.Compile(schemaBase + e.Name())
			if err != nil {
				schemasErr = fmt.Errorf("%s: %w", e.Name(), err)
				return
			}
			schemas[e.Name()] = s
		}
	})
	if schemasErr != nil {
		t.Fatalf("compile schemas: %v", schemasErr)
	}
	s, ok := schemas[name]
	if !ok {
		t.Fatalf("no schema %s in spec/schemas", name)
	}
	return s
}

// validate checks data (JSON) against schema name.
func validate(t testing.TB, name string, data []byte) error {
	t.Helper()
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		return fmt.Errorf("not JSON: %w: %s", err, data)
	}
	if err := schema(t, name).Validate(v); err != nil {
		return fmt.Errorf("%s: %w\n%s", name, err, data)
	}
	return nil
}

func TestSchemasCompile(t *testing.T) {
	entries, err := fs.ReadDir(spec.Files, "schemas")
	if err != nil || len(entries) < 10 {
		t.Fatalf("schemas: %d files, %v", len(entries), err)
	}
	for _, e := range entries {
		data, _ := fs.ReadFile(spec.Files, "schemas/"+e.Name())
		var head struct {
			ID string `json:"$id"`
		}
		if err := json.Unmarshal(data, &head); err != nil || head.ID != schemaBase+e.Name() {
			t.Errorf("%s: $id %q, want %q (%v)", e.Name(), head.ID, schemaBase+e.Name(), err)
		}
		schema(t, e.Name())
	}
}

// examples returns spec/examples/<name>/*.json by file name.
func examples(t *testing.T, name string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	entries, err := fs.ReadDir(spec.Files, "examples/"+name)
	if err != nil {
		t.Fatalf("examples of %s: %v", name, err)
	}
	for _, e := range entries {
		out[e.Name()], _ = fs.ReadFile(spec.Files, path.Join("examples", name, e.Name()))
	}
	return out
}

func TestExamplesMatchTheirSchemas(t *testing.T) {
	dirs, err := fs.ReadDir(spec.Files, "examples")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		for file, data := range examples(t, d.Name()) {
			if err := validate(t, d.Name()+".json", data); err != nil {
				t.Errorf("examples/%s/%s: %v", d.Name(), file, err)
			}
		}
	}
	// A schema can fail: a result without its events does not pass.
	if err := validate(t, "result.json", []byte(`{"aggregate_type":"t","aggregate_id":"i","version":1,"commands":[]}`)); err == nil {
		t.Error("result.json accepts a result without events")
	}
}

// strict decodes data into v refusing unknown fields, as the node reads a
// request body.
func strict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// TestExamplesDecodeIntoGoTypes decodes every example into the Go type that
// reads or writes it, refusing unknown fields: a field the spec has and Go
// lacks (or names otherwise) fails here.
func TestExamplesDecodeIntoGoTypes(t *testing.T) {
	types := map[string]func() any{
		"error": func() any {
			return &struct {
				Error *api.Error `json:"error"`
			}{}
		},
		"result":        func() any { return &aggregate.Result{} },
		"state":         func() any { return &aggregate.State{} },
		"history":       func() any { return &api.History{} },
		"raw-append":    func() any { return &aggregate.RawAppend{} },
		"multi-request": func() any { return &api.MultiRequest{} },
		"multi-result":  func() any { return &api.MultiResult{} },
		"log-page":      func() any { return &api.LogPage{} },
		"view-doc":      func() any { return &projection.Doc{} },
		"types":         func() any { return &[]api.TypeInfo{} },
	}
	for name, newV := range types {
		for file, data := range examples(t, name) {
			v := newV()
			if err := strict(data, v); err != nil {
				t.Errorf("examples/%s/%s does not decode into %T: %v", name, file, v, err)
				continue
			}
			// Round trip: what Go writes back still matches the schema.
			back, _ := json.Marshal(v)
			if name != "raw-append" { // RawAppend's type and id are path tokens, not fields
				if err := validate(t, name+".json", back); err != nil {
					t.Errorf("examples/%s/%s re-encoded by Go: %v", name, file, err)
				}
			}
		}
	}
}

// specIndex is spec.json.
type specIndex struct {
	Version    string `json:"version"`
	Operations []struct {
		Op      string `json:"op"`
		NATS    string `json:"nats"`
		HTTP    string `json:"http"`
		Request string `json:"request"`
		Reply   string `json:"reply"`
	} `json:"operations"`
	RequestHeaders map[string]string `json:"request_headers"`
	TargetHeaders  []string          `json:"target_headers"`
	Errors         map[string]int    `json:"errors"`
}

func index(t *testing.T) specIndex {
	t.Helper()
	data, err := fs.ReadFile(spec.Files, "spec.json")
	if err != nil {
		t.Fatal(err)
	}
	var ix specIndex
	if err := strict(data, &struct {
		*specIndex
		Spec                  string            `json:"spec"`
		SubjectPrefix         string            `json:"subject_prefix"`
		ReplyHeaders          map[string]string `json:"reply_headers"`
		DomainRejectionStatus int               `json:"domain_rejection_status"`
		RetryWithSameKey      []string          `json:"retry_with_same_key"`
	}{specIndex: &ix}); err != nil {
		t.Fatalf("spec.json: %v", err)
	}
	return ix
}

func TestSpecOperationsAreTheAPIsRoutes(t *testing.T) {
	ix := index(t)
	var nats, http []string
	for _, op := range ix.Operations {
		if op.NATS != "" {
			nats = append(nats, op.NATS)
		}
		if op.HTTP != "" {
			http = append(http, op.HTTP)
		}
		for _, s := range []string{op.Request, op.Reply} {
			if strings.HasSuffix(s, ".json") {
				schema(t, s)
			}
		}
	}
	sameSet(t, "NATS subjects (spec.json vs api.NATSRoutes)", expand(nats), expand(api.NATSRoutes))
	sameSet(t, "HTTP routes (spec.json vs api.HTTPRoutes)", http, api.HTTPRoutes)
}

func TestSpecRequestHeadersAreTheAPIsHeaders(t *testing.T) {
	ix := index(t)
	var names []string
	for k := range ix.RequestHeaders {
		names = append(names, k)
	}
	sameSet(t, "request headers (spec.json vs internal/api)", names, []string{
		api.HeaderIdempotencyKey, api.HeaderCorrelationID, api.HeaderCausationID, api.HeaderTraceParent,
		api.HeaderAfterVersion, api.HeaderAfterPosition, api.HeaderLimit,
	})
	if !strings.HasPrefix(ix.Version, "1.") {
		t.Errorf("spec version %q: this Go code speaks 1.x", ix.Version)
	}
}

func sameSet(t *testing.T, what string, got, want []string) {
	t.Helper()
	g, w := map[string]bool{}, map[string]bool{}
	for _, s := range got {
		g[s] = true
	}
	for _, s := range want {
		w[s] = true
		if !g[s] {
			t.Errorf("%s: the spec lacks %q", what, s)
		}
	}
	for _, s := range got {
		if !w[s] {
			t.Errorf("%s: the spec has %q, the Go code does not", what, s)
		}
	}
}

// expand writes a subject whose last token offers alternatives
// (views.<name>.<get|list|parked>) as one subject each.
func expand(subjects []string) []string {
	var out []string
	for _, s := range subjects {
		i := strings.LastIndex(s, ".<")
		if i < 0 || !strings.Contains(s[i:], "|") {
			out = append(out, s)
			continue
		}
		for _, alt := range strings.Split(strings.Trim(s[i+2:], "<>"), "|") {
			out = append(out, s[:i+1]+alt)
		}
	}
	return out
}
