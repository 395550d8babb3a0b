package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/broker"
	"github.com/esjet/esjet/internal/natstest"
)

// TestServerServesJetStreamUntilContextEnds runs `esjet server` in-process
// on a free port: ready line, a JetStream stream created and written over
// TCP, clean return when the context ends.
func TestServerServesJetStreamUntilContextEnds(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var stdout, stderr natstest.Buffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"server", "--name", "unit", "--listen", "127.0.0.1:0", "--store-dir", filepath.Join(dir, "store"), "--sync", "interval", "--max-store", "64MiB"}, nil, &stdout, &stderr)
	}()
	re := regexp.MustCompile(`nats server ready: name (\S+), client (nats://\S+), cluster none`)
	m := waitForLine(t, &stdout, &stderr, done, re)
	if m[1] != "unit" {
		t.Fatalf("ready line names %q: %s", m[1], stdout.String())
	}
	url := m[2]
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	// --max-store bounds the server: a stream reserving more is refused.
	_, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: "BIG", Subjects: []string{"big.>"}, MaxBytes: 128 << 20})
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) || apiErr.ErrorCode != 10047 && apiErr.ErrorCode != 10023 {
		t.Errorf("a 128MiB stream under --max-store 64MiB: %v, want insufficient resources", err)
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "UNIT", Subjects: []string{"unit.>"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, "unit.x", []byte("hello")); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stderr.String(), "component=nats-server") {
		t.Errorf("nats-server's log does not reach stderr:\n%s", stderr.String())
	}
	nc.Close()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("server after cancel: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("server still running 30s after cancel")
	}
}

// TestServerRefusesAStoreDirInUse: a second `esjet server` on the store dir
// of a running one (on another port) refuses to start and names the first.
func TestServerRefusesAStoreDirInUse(t *testing.T) {
	store := filepath.Join(t.TempDir(), "store")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var stdout, stderr natstest.Buffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"server", "--listen", "127.0.0.1:0", "--store-dir", store}, nil, &stdout, &stderr)
	}()
	m := waitForLine(t, &stdout, &stderr, done, regexp.MustCompile(`nats server ready: name \S+, client (nats://[^\s,]+)`))

	var out2, err2 natstest.Buffer
	err := run(t.Context(), []string{"server", "--listen", "127.0.0.1:0", "--store-dir", store}, nil, &out2, &err2)
	if !errors.Is(err, broker.ErrDataDirLocked) || !strings.Contains(err.Error(), "esjet server pid "+strconv.Itoa(os.Getpid())) || !strings.Contains(err.Error(), m[1]) {
		t.Fatalf("second server on the same store dir: %v, want refused naming pid %d and %s", err, os.Getpid(), m[1])
	}
	nc, err := nats.Connect(m[1]) // the first still serves
	if err != nil {
		t.Fatal(err)
	}
	nc.Close()
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("first server after cancel: %v", err)
	}
}

// TestServerRefusesRemoteListenersAndBadFlags: a non-loopback listener
// needs --allow-remote; a cluster needs a name, a fixed port and valid
// routes; every problem is reported at once.
func TestServerRefusesRemoteListenersAndBadFlags(t *testing.T) {
	var stdout, stderr natstest.Buffer
	err := run(t.Context(), []string{"server", "--listen", "0.0.0.0:4222", "--cluster-listen", "127.0.0.1:0", "--routes", "bogus", "--sync", "sometimes", "--max-store", "lots"}, nil, &stdout, &stderr)
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"--allow-remote", "--cluster-name", "--name", "fixed port", "nats-route://host:port", `--sync "sometimes"`, "--max-store"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %s:\n%v", want, err)
		}
	}
	if strings.Contains(stdout.String(), "ready") {
		t.Errorf("printed a ready line: %s", stdout.String())
	}
}

// TestServerAllowRemoteWarns: with --allow-remote a wildcard listener is
// accepted, with a warning on stderr.
func TestServerAllowRemoteWarns(t *testing.T) {
	f := &serverFlags{listen: "0.0.0.0:0", storeDir: t.TempDir(), sync: "always", maxPayload: "8MiB", allowRemote: true}
	opts, warnings, err := serverOptionsFromFlags(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "without authentication") {
		t.Fatalf("warnings %q", warnings)
	}
	if opts.Host != "0.0.0.0" || !opts.SyncAlways {
		t.Fatalf("options %+v", opts)
	}
}

// TestServerClusterOfThreeInProcess starts three `esjet server` members in
// one process and waits until every one printed its ready line, which
// requires JetStream (a meta leader) to answer; then an R3 stream works.
func TestServerClusterOfThreeInProcess(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var cports []string
	for range 3 {
		cports = append(cports, natstest.Addr(t))
	}
	var routes []string
	for _, a := range cports {
		routes = append(routes, "nats-route://"+a)
	}
	type member struct {
		stdout, stderr natstest.Buffer
		done           chan error
	}
	ms := make([]*member, 3)
	for i := range ms {
		ms[i] = &member{done: make(chan error, 1)}
	}
	for i, m := range ms {
		args := []string{"server", "--name", "m" + string(rune('1'+i)), "--listen", "127.0.0.1:0",
			"--store-dir", filepath.Join(dir, string(rune('a'+i))), "--sync", "interval",
			"--cluster-name", "unit", "--cluster-listen", cports[i], "--routes", strings.Join(routes, ",")}
		go func() { m.done <- run(ctx, args, nil, &m.stdout, &m.stderr) }()
	}
	re := regexp.MustCompile(`nats server ready: name m\d, client (nats://\S+), cluster unit nats-route://`)
	var urls []string
	deadline := time.Now().Add(30 * time.Second)
	for _, m := range ms {
		for {
			if mm := re.FindStringSubmatch(m.stdout.String()); mm != nil {
				urls = append(urls, mm[1])
				break
			}
			select {
			case err := <-m.done:
				t.Fatalf("member returned before ready: %v\n%s", err, m.stderr.String())
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("member not ready:\n%s", m.stderr.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	nc, err := nats.Connect(strings.Join(urls, ","))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	sctx, scancel := context.WithTimeout(ctx, 20*time.Second)
	defer scancel()
	// Ready means JetStream answers; placing three replicas may take a
	// moment more, until the meta leader has heard from every member.
	for {
		_, err := js.CreateStream(sctx, jetstream.StreamConfig{Name: "R3", Subjects: []string{"r3.>"}, Replicas: 3})
		if err == nil {
			break
		}
		if sctx.Err() != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, err := js.Publish(sctx, "r3.x", []byte("hello")); err != nil {
		t.Fatal(err)
	}
	nc.Close()
	cancel()
	for _, m := range ms {
		select {
		case err := <-m.done:
			if err != nil {
				t.Fatalf("member after cancel: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("member still running 30s after cancel")
		}
	}
}
