package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/esjet/esjet/internal/bench"
)

// TestBenchJSON runs a tiny `esjet bench` in-process (embedded node on a
// temporary directory) and checks the JSON report: the phases asked for,
// each with throughput, and the paired ones with a ratio.
func TestBenchJSON(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a node and runs three phases")
	}
	var stdout, stderr bytes.Buffer
	err := run(t.Context(), []string{"bench", "--count", "200", "--phases", "append,micro,e2e", "--json", "--no-progress"}, nil, &stdout, &stderr)
	if err != nil {
		t.Fatalf("bench: %v\n%s", err, stderr.String())
	}
	var rep bench.Report
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("not a JSON report: %v\n%s", err, stdout.String())
	}
	if !rep.Server.Embedded || rep.Server.Namespace != "bench" || rep.Params.Count != 200 {
		t.Errorf("server %+v params %+v", rep.Server, rep.Params)
	}
	got := map[string]bench.Phase{}
	for _, p := range rep.Phases {
		got[p.Name] = p
	}
	if len(rep.Phases) != 3 {
		t.Errorf("%d phases, want 3: %+v", len(rep.Phases), rep.Phases)
	}
	for _, name := range []string{"append", "micro", "e2e"} {
		p, ok := got[name]
		if !ok {
			t.Errorf("phase %s missing", name)
			continue
		}
		if p.Error != "" || p.Errors != 0 {
			t.Errorf("%s: %d error(s): %s", name, p.Errors, p.Error)
		}
		if p.Esjet.Ops != 200 || p.Esjet.OpsPerSec <= 0 || p.Esjet.Latency == nil || p.Esjet.Latency.P50MS <= 0 {
			t.Errorf("%s: esjet side %+v", name, p.Esjet)
		}
		if name == "e2e" {
			if p.Raw != nil || p.Ratio != 0 {
				t.Errorf("e2e has a raw pair: %+v", p.Raw)
			}
			continue
		}
		if p.Raw == nil || p.Raw.Ops != 200 || p.Ratio <= 0 || p.RatioOf != "throughput" {
			t.Errorf("%s: raw %+v ratio %g (%s)", name, p.Raw, p.Ratio, p.RatioOf)
		}
	}
}

func TestBenchRejectsBadFlags(t *testing.T) {
	// A refused run leaves the file --heapprofile names as it was.
	kept := filepath.Join(t.TempDir(), "kept.prof")
	if err := os.WriteFile(kept, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if b, err := os.ReadFile(kept); err != nil || string(b) != "keep" {
			t.Errorf("a refused run wrote over %s: %q, %v", kept, b, err)
		}
	})
	for _, args := range [][]string{
		{"bench", "--phases", "append,warp"},
		{"bench", "--phases", ""},
		{"bench", "--phases", " , "},
		{"bench", "--skew", "pareto"},
		{"bench", "--workers", "0"},
		{"bench", "--count", "10", "--duration", "1s"},
		{"bench", "--phases", "append", "--heapprofile", kept},
		{"bench", "--phases", "scale", "--heapprofile", filepath.Join(t.TempDir(), "no-such-dir", "heap.prof")},
		{"bench", "--nodes", "1", "--heapprofile", filepath.Join(t.TempDir(), "heap.prof")},
	} {
		var stdout, stderr bytes.Buffer
		if err := run(t.Context(), args, nil, &stdout, &stderr); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
}
