package main

import (
	"bytes"
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/esjet/esjet/internal/natstest"
)

// A mistyped flag gets the nearest one; a wrong number of arguments gets
// the command's usage line.
func TestMistakesOnTheCommandLineSayTheRemedy(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--dta-dir", "x"}, []string{"unknown flag: --dta-dir", "did you mean --data-dir?"}},
		{[]string{"state", "trip", "--namepsace", "x"}, []string{"did you mean --namespace?"}},
		{[]string{"state", "trip"}, []string{"accepts 2 arg(s), received 1", "usage: esjet state <type> <id>"}},
		{[]string{"events"}, []string{"usage: esjet events <type> <id>"}},
		{[]string{"send", "trip"}, []string{"usage: esjet send <type> <id> <command> [json]"}},
	} {
		var stdout, stderr bytes.Buffer
		err := run(t.Context(), tc.args, nil, &stdout, &stderr)
		for _, want := range tc.want {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("esjet %s: %v; want it to say %q", strings.Join(tc.args, " "), err, want)
			}
		}
	}
	var stdout, stderr bytes.Buffer
	if err := run(t.Context(), []string{"--xyzzy"}, nil, &stdout, &stderr); err == nil || strings.Contains(err.Error(), "did you mean") {
		t.Errorf("esjet --xyzzy: %v; want an unknown flag without a suggestion", err)
	}
}

// An address another process listens on names the flag, the variable and
// the config key that move the node's.
func TestAPortInUseSaysHowToMoveTheNode(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	taken := l.Addr().String()
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--listen", taken, "--http", "none"}, []string{"--listen HOST:PORT", "ESJET_NATS_EMBEDDED_LISTEN", "nats.embedded.listen", "already listens on " + taken}},
		{[]string{"--listen", "none", "--http", taken}, []string{"--http HOST:PORT", "ESJET_HTTP_LISTEN", "http.listen", "already listens on " + taken}},
	} {
		var stdout, stderr bytes.Buffer
		args := append([]string{"run", "--data-dir", t.TempDir(), "--namespace", "clash"}, tc.args...)
		err := run(t.Context(), args, []string{"ESJET_DEMO_SERVICES=false"}, &stdout, &stderr)
		for _, want := range tc.want {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("esjet %s: %v; want it to say %q", strings.Join(args, " "), err, want)
			}
		}
	}
}

// `esjet run` with its HTTP address in use fails before it starts a server
// or provisions a stream: no data dir is left behind.
func TestAnHTTPPortInUseLeavesNoDataDir(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	data := filepath.Join(t.TempDir(), "data")
	var stdout, stderr bytes.Buffer
	err = run(t.Context(), []string{"run", "--data-dir", data, "--namespace", "clash", "--listen", natstest.Addr(t), "--http", l.Addr().String()},
		[]string{"ESJET_DEMO_SERVICES=false"}, &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), "--http HOST:PORT") {
		t.Errorf("esjet run with its HTTP port in use: %v; want the remedy naming --http", err)
	}
	if _, err := os.Stat(data); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("data dir after the refused start: %v; want none", err)
	}
}

// `esjet server` on an address in use says which flag moves it.
func TestServerOnAPortInUseNamesListen(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var stdout, stderr bytes.Buffer
	err = run(t.Context(), []string{"server", "--listen", l.Addr().String(), "--store-dir", t.TempDir()}, nil, &stdout, &stderr)
	for _, want := range []string{"already listens on " + l.Addr().String(), "--listen HOST:PORT"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("esjet server on a port in use: %v; want it to say %q", err, want)
		}
	}
}
