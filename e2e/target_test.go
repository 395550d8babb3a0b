package e2e

// Where the load generator sends: the node it follows while that node
// runs, a port the test holds while it is down. A dead node's port is free
// for any process on the machine to bind, and on a busy machine one does:
// restart-after-outbox-dedup-window once reported lost=14 because the load
// generator, retrying at the killed node's address, took the 200s of
// whatever had bound that port for a moment (another test's HTTP server)
// for acknowledgements. Those trips had never reached the node; the log was
// whole. Reproduced by binding short-lived 127.0.0.1:0 listeners that
// answer 200 while the scenario ran: lost=24, every lost trip acknowledged
// by the squatter between the kill and the restart.

import (
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/esjet/esjet/internal/natstest"
)

// addrOf is a load generator's view of a node that may be replaced.
type addrOf struct {
	v    atomic.Pointer[string]
	down *string
}

// follow points a at n's HTTP address until n's process exits, then at a
// port the test holds, which drops every connection (a client sees it as
// a node that is down) until the next follow.
func (a *addrOf) follow(t *testing.T, n *node) {
	t.Helper()
	if a.down == nil {
		a.down = downAddr(t)
	}
	live := n.httpAddr
	a.v.Store(&live)
	go func() {
		<-n.exited
		a.v.CompareAndSwap(&live, a.down)
	}()
}

func (a *addrOf) get() string { return *a.v.Load() }

// downAddr listens on a port of the test's own for the rest of the test
// and closes every connection it accepts.
func downAddr(t *testing.T) *string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()
	addr := ln.Addr().String()
	return &addr
}

// tripAnswerer answers request_trip as a node does (the body names the
// trip), 200 for the first limit trips (0: all) and 503 after, and
// records which trips it acknowledged.
type tripAnswerer struct {
	limit int
	mu    sync.Mutex
	acked map[string]bool
}

func (f *tripAnswerer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/v1/trip/"), "/request_trip")
	f.mu.Lock()
	if f.limit > 0 && len(f.acked) >= f.limit && !f.acked[id] {
		f.mu.Unlock()
		http.Error(w, "busy", http.StatusServiceUnavailable)
		return
	}
	if f.acked == nil {
		f.acked = map[string]bool{}
	}
	f.acked[id] = true
	f.mu.Unlock()
	_ = json.NewEncoder(w).Encode(map[string]any{"aggregate_type": "trip", "aggregate_id": id, "version": 1})
}

func (f *tripAnswerer) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.acked)
}

func (f *tripAnswerer) has(id string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.acked[id]
}

// fakeNode serves h as a running node would, without a process: closing
// exited is its death.
func fakeNode(t *testing.T, h http.Handler) (*node, *httptest.Server) {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &node{httpAddr: strings.TrimPrefix(srv.URL, "http://"), exited: make(chan struct{})}, srv
}

// TestLoadDoesNotTrustADeadNodesPort: node A acknowledges two trips and
// dies; another process binds A's port and answers every request_trip
// with 200, as a foreign node would; node B replaces A. No request reaches
// the squatter, and every acknowledged trip was acknowledged by A or B.
func TestLoadDoesNotTrustADeadNodesPort(t *testing.T) {
	t.Parallel()
	a := &tripAnswerer{limit: 2}
	na, srvA := fakeNode(t, a)
	var addr addrOf
	addr.follow(t, na)
	load := startLoad(t, addr.get, 8, 2, 0)
	natstest.Eventually(t, 30*time.Second, func() bool { return a.count() == 2 })

	// A dies; its port is free, and taken a moment later (the clients
	// retried twice meanwhile).
	srvA.Close()
	close(na.exited)
	died := load.attempts.Load()
	natstest.Eventually(t, 10*time.Second, func() bool { return load.attempts.Load() >= died+2 })
	var squatted atomic.Int64
	var ln net.Listener
	natstest.Eventually(t, 10*time.Second, func() bool {
		var err error
		ln, err = net.Listen("tcp", na.httpAddr)
		return err == nil
	})
	squatter := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		squatted.Add(1)
		(&tripAnswerer{}).ServeHTTP(w, r)
	})}
	go func() { _ = squatter.Serve(ln) }()
	t.Cleanup(func() { _ = squatter.Close() })
	// The clients keep retrying while A is down.
	before := load.attempts.Load()
	natstest.Eventually(t, 30*time.Second, func() bool { return load.attempts.Load() >= before+6 })

	b := &tripAnswerer{}
	nb, _ := fakeNode(t, b)
	addr.follow(t, nb)
	load.wait(t)

	if n := squatted.Load(); n > 0 {
		t.Errorf("the load generator sent %d request(s) to dead node A's port, which another process holds", n)
	}
	acked := load.ackedIDs()
	if len(acked) != 8 {
		t.Errorf("%d of 8 trips acknowledged", len(acked))
	}
	for _, id := range acked {
		if !a.has(id) && !b.has(id) {
			t.Errorf("trip %s counted as acknowledged, but neither node acknowledged it", id)
		}
	}
	load.mu.Lock()
	defer load.mu.Unlock()
	if len(load.foreign) > 0 {
		t.Errorf("answers that were not a node's: %v", load.foreign)
	}
}
