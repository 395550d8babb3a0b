package e2e

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func TestNodeStartsProvisionsAndStopsCleanlyOnSIGTERM(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	n := startNode(t, dir, "--namespace", "shop")

	// Ready means JetStream answers and the streams exist.
	resp, err := http.Get("http://" + n.httpAddr + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	var ready map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&ready)
	resp.Body.Close()
	if resp.StatusCode != 200 || ready["status"] != "ready" {
		t.Fatalf("readyz = %d %v", resp.StatusCode, ready)
	}
	nc, err := nats.Connect(n.natsURL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx := t.Context()
	st, err := js.Stream(ctx, "SHOP_EVENTS")
	if err != nil {
		t.Fatalf("events stream: %v", err)
	}
	cfg := st.CachedInfo().Config
	if !cfg.DenyDelete || !cfg.DenyPurge || cfg.AllowRollup || cfg.Storage != jetstream.FileStorage || cfg.Subjects[0] != "shop.evt.>" {
		t.Fatalf("SHOP_EVENTS config = %+v", cfg)
	}
	// Write through JetStream so the restart below has something to keep.
	if _, err := js.Publish(ctx, "shop.outbox.ping", []byte("hi"), jetstream.WithMsgID("ping-1")); err != nil {
		t.Fatal(err)
	}

	// `esjet streams` against the running node.
	out := runCLI(t, dir, "streams", "--namespace", "shop", "--listen", n.natsListen, "--json")
	var reports []struct {
		Name     string
		Exists   bool
		Messages uint64
	}
	if err := json.Unmarshal([]byte(out), &reports); err != nil {
		t.Fatalf("streams --json: %v\n%s", err, out)
	}
	names := map[string]uint64{}
	for _, r := range reports {
		if !r.Exists {
			t.Errorf("stream %s missing", r.Name)
		}
		names[r.Name] = r.Messages
	}
	for _, want := range []string{"SHOP_EVENTS", "SHOP_OUTBOX", "SHOP_DLQ", "KV_shop_snapshots", "KV_shop_receipts"} {
		if _, ok := names[want]; !ok {
			t.Errorf("streams output lacks %s: %v", want, names)
		}
	}
	if names["SHOP_OUTBOX"] != 1 {
		t.Errorf("SHOP_OUTBOX messages = %d, want 1", names["SHOP_OUTBOX"])
	}
	table := runCLI(t, dir, "streams", "--namespace", "shop", "--listen", n.natsListen)
	if !strings.Contains(table, "SHOP_EVENTS") || !strings.Contains(table, "event log") {
		t.Errorf("streams table:\n%s", table)
	}
	nc.Close()

	// SIGTERM: drain, shut down, exit 0.
	n.stop(t, syscall.SIGTERM)
	if !strings.Contains(n.stderr.String(), "msg=stopped") {
		t.Errorf("stderr lacks the clean stop line:\n%s", n.stderr.String())
	}

	// Restart on the same data dir: the message survived and provisioning
	// changes nothing.
	n2 := startNode(t, dir, "--namespace", "shop")
	if strings.Contains(n2.stderr.String(), "msg=provisioned") {
		t.Errorf("second start changed streams:\n%s", n2.stderr.String())
	}
	nc2, err := nats.Connect(n2.natsURL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc2.Close()
	js2, _ := jetstream.New(nc2)
	st2, err := js2.Stream(ctx, "SHOP_OUTBOX")
	if err != nil || st2.CachedInfo().State.Msgs != 1 {
		t.Fatalf("after restart SHOP_OUTBOX = %v, %v", st2, err)
	}
	nc2.Close()
	n2.stop(t, syscall.SIGINT)
}

func TestNonLoopbackListenWithoutAuthIsRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	stdout, stderr, code := runCLIFail(t, dir, "--listen", "0.0.0.0:4222")
	if code != 1 {
		t.Fatalf("exit code %d, want 1\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	for _, want := range []string{"nats.embedded.listen", "0.0.0.0:4222", "auth", "TLS", "127.0.0.1"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "data")); !os.IsNotExist(err) {
		t.Errorf("a refused start created the data dir (stat err %v)", err)
	}
}

func TestInvalidConfigurationReportsEveryProblem(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfgFile := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(cfgFile, []byte("namespace: Bad Name\nstreams:\n  replicas: 2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, stderr, code := runCLIFailEnv(t, dir, []string{"ESJET_NATS_EMBEDDED_SYNC=sometimes"}, "--config", cfgFile, "--http", "nope")
	if code != 1 {
		t.Fatalf("exit code %d, want 1:\n%s", code, stderr)
	}
	for _, want := range []string{"namespace", "streams.replicas", "nats.embedded.sync", "http.listen", "4 problem"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
}

func TestVersionNamesTheEmbeddedServer(t *testing.T) {
	t.Parallel()
	out := runCLI(t, t.TempDir(), "version")
	if !strings.Contains(out, "esjet ") || !strings.Contains(out, "nats-server 2.") {
		t.Fatalf("version output:\n%s", out)
	}
}

func TestStreamsWithoutARunningNodeSaysSo(t *testing.T) {
	t.Parallel()
	_, stderr, code := runCLIFail(t, t.TempDir(), "streams", "--listen", freeAddr(t))
	if code != 1 || !strings.Contains(stderr, "esjet run") {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
}
