package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/natstest"
)

// clWatch follows a cluster through a fault: when each of the namespace's
// streams, and the relay's consumer, has a leader other than the faulty
// server again, and when OUTBOX grows again (the relay publishing). The
// figures say which part of a fail-over took the time.
type clWatch struct {
	down string
	t0   time.Time

	mu      sync.Mutex
	leaders map[string]time.Duration // "DEMO_EVENTS", "DEMO_OUTBOX", "relay": when a healthy leader was first seen
	grew    time.Duration            // when OUTBOX's last sequence first passed base
	base    uint64

	stop chan struct{}
	done chan struct{}
}

// clWatchNames are what clWatch follows: the two streams and the relay's
// durable consumer on EVENTS.
var clWatchNames = []string{"DEMO_EVENTS", "DEMO_OUTBOX", "relay"}

// clStartWatch reads OUTBOX's last sequence now (through urls, before the
// fault) and then, from t0 on, polls through survivors (the other members)
// until stopped.
func clStartWatch(t *testing.T, urls, survivors, down string) *clWatch {
	t.Helper()
	w := &clWatch{down: down, leaders: map[string]time.Duration{}, stop: make(chan struct{}), done: make(chan struct{})}
	_, js := clConnect(t, urls)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	if st, err := js.Stream(ctx, "DEMO_OUTBOX"); err == nil {
		w.base = st.CachedInfo().State.LastSeq
	}
	cancel()
	_, sjs := clConnect(t, survivors)
	w.t0 = time.Now()
	go w.run(t.Context(), sjs)
	t.Cleanup(w.end)
	return w
}

func (w *clWatch) run(ctx context.Context, js jetstream.JetStream) {
	defer close(w.done)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		w.poll(ctx, js)
		select {
		case <-w.stop:
			return
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (w *clWatch) poll(ctx context.Context, js jetstream.JetStream) {
	w.mu.Lock()
	todo := map[string]bool{}
	for _, n := range clWatchNames {
		if _, ok := w.leaders[n]; !ok {
			todo[n] = true
		}
	}
	grown := w.grew != 0
	w.mu.Unlock()
	var wg sync.WaitGroup
	healthy := func(c *jetstream.ClusterInfo) bool { return c != nil && c.Leader != "" && c.Leader != w.down }
	for _, name := range clWatchNames {
		if !todo[name] && (name != "DEMO_OUTBOX" || grown) {
			continue
		}
		wg.Go(func() {
			pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			defer cancel()
			var ok bool
			var last uint64
			if name == "relay" {
				c, err := js.Consumer(pctx, "DEMO_EVENTS", "esjet-relay")
				ok = err == nil && healthy(c.CachedInfo().Cluster)
			} else if st, err := js.Stream(pctx, name); err == nil {
				info := st.CachedInfo()
				ok, last = healthy(info.Cluster), info.State.LastSeq
			}
			at := time.Since(w.t0)
			w.mu.Lock()
			defer w.mu.Unlock()
			if _, seen := w.leaders[name]; ok && !seen {
				w.leaders[name] = at
			}
			if name == "DEMO_OUTBOX" && last > w.base && w.grew == 0 {
				w.grew = at
			}
		})
	}
	wg.Wait()
}

func (w *clWatch) end() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	<-w.done
}

// report stops the watch and says what it saw; a part never seen is "none".
func (w *clWatch) report() string {
	w.end()
	w.mu.Lock()
	defer w.mu.Unlock()
	at := func(d time.Duration, seen bool) string {
		if !seen {
			return "none"
		}
		return d.Round(time.Millisecond).String()
	}
	var parts []string
	for _, n := range clWatchNames {
		d, ok := w.leaders[n]
		parts = append(parts, fmt.Sprintf("%s leader %s", n, at(d, ok)))
	}
	parts = append(parts, "OUTBOX grows "+at(w.grew, w.grew != 0))
	return strings.Join(parts, ", ")
}

// clServerLogs is every start of every server's log, for a failed test.
func clServerLogs(servers []*clServer) string {
	var b strings.Builder
	for _, s := range servers {
		for i, l := range s.logs {
			fmt.Fprintf(&b, "--- server %s, start %d:\n%s\n", s.name, i+1, l.String())
		}
	}
	return b.String()
}

// clLeaderLines is what the servers logged about leaders of the
// namespace's streams and the relay's consumer, for the test's log.
func clLeaderLines(servers []*clServer) string {
	var b strings.Builder
	for _, s := range servers {
		for i, l := range s.logs {
			for _, line := range strings.Split(l.String(), "\n") {
				if strings.Contains(line, "leader") && (strings.Contains(line, "DEMO_") || strings.Contains(line, "esjet-relay") || strings.Contains(line, "meta")) {
					fmt.Fprintf(&b, "%s#%d %s\n", s.name, i+1, line)
				}
			}
		}
	}
	return b.String()
}

// clAddr returns a free loopback address reserved for the test, below the
// kernel's ephemeral range (natstest.Addr). A server killed and restarted
// on its address must find the port still free: a port from the ephemeral
// range can meanwhile be taken by any outgoing connection or ":0" listener
// on a busy machine, and the restart then fails with "address already in
// use".
func clAddr(t *testing.T) string {
	t.Helper()
	return natstest.Addr(t)
}

// clRelayTrouble summarises a node's relay warnings: how many, the first
// and the last (their times are the log's), for the test's log.
func clRelayTrouble(n *node) string {
	var lines []string
	for _, line := range strings.Split(n.stderr.String(), "\n") {
		if strings.Contains(line, "relay") && (strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR")) {
			lines = append(lines, line)
		}
	}
	switch len(lines) {
	case 0:
		return "no relay warnings"
	case 1:
		return "1 relay warning: " + lines[0]
	}
	return fmt.Sprintf("%d relay warnings, first: %s\nlast: %s", len(lines), lines[0], lines[len(lines)-1])
}
