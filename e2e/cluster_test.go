package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/natstest"
)

// Scenario 4: a three-server NATS cluster as separate `esjet server`
// processes, R3 streams, two esjet nodes in external mode. The EVENTS
// leader is killed with SIGKILL under load and restarted; later the new
// leader is SIGSTOPped past the election timeout and resumed. Commands
// stay in OUTBOX (no workers): the scenario proves the log and the outbox.

// clServer is one `esjet server` child process, restartable on its store.
type clServer struct {
	name       string
	clientAddr string
	args       []string
	dir        string

	cmd    *exec.Cmd
	stderr *natstest.Buffer
	exited chan struct{} // closed when the process is gone
	ready  chan struct{}
	logs   []*natstest.Buffer // every start's stderr, oldest first
}

var clCodeField = regexp.MustCompile(`"code":\s*"([^"]+)"`)

var clReadyLine = regexp.MustCompile(`nats server ready: name (\S+), client (\S+), cluster `)

func (s *clServer) url() string { return "nats://" + s.clientAddr }

// start runs the process; waitReady waits for its ready line.
func (s *clServer) start(t *testing.T) {
	t.Helper()
	cmd := exec.Command(binary, s.args...)
	cmd.Dir = s.dir
	cmd.Env = cleanEnv()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &natstest.Buffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited, ready := make(chan struct{}), make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		signalled := false
		for sc.Scan() {
			if !signalled && clReadyLine.MatchString(sc.Text()) {
				close(ready)
				signalled = true
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	s.cmd, s.stderr, s.exited, s.ready = cmd, stderr, exited, ready
	s.logs = append(s.logs, stderr)
	t.Cleanup(func() {
		// A stopped process is continued first, so nothing stays frozen.
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		<-exited
	})
}

func (s *clServer) waitReady(t *testing.T, timeout time.Duration) {
	t.Helper()
	select {
	case <-s.ready:
	case <-s.exited:
		t.Fatalf("server %s exited before ready: %v\n%s", s.name, s.cmd.ProcessState, s.stderr.String())
	case <-time.After(timeout):
		t.Fatalf("server %s not ready within %s:\n%s", s.name, timeout, s.stderr.String())
	}
}

func (s *clServer) kill9(t *testing.T) {
	t.Helper()
	_ = s.cmd.Process.Kill()
	select {
	case <-s.exited:
	case <-time.After(10 * time.Second):
		t.Fatalf("server %s did not die of SIGKILL", s.name)
	}
}

func (s *clServer) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := s.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal %v to %s: %v", sig, s.name, err)
	}
}

// clStartCluster starts three `esjet server` members on fixed loopback
// ports with full routes and waits until every one is ready and the
// cluster can place three replicas.
func clStartCluster(t *testing.T, dir string) []*clServer {
	t.Helper()
	clusterAddrs := []string{clAddr(t), clAddr(t), clAddr(t)}
	var routes []string
	for _, a := range clusterAddrs {
		routes = append(routes, "nats-route://"+a)
	}
	servers := make([]*clServer, 3)
	for i := range servers {
		name := fmt.Sprintf("cl-n%d", i+1)
		s := &clServer{name: name, clientAddr: clAddr(t), dir: dir}
		s.args = []string{"server", "--name", name, "--listen", s.clientAddr,
			"--store-dir", filepath.Join(dir, name), "--sync", "always",
			"--cluster-name", "esjet-e2e", "--cluster-listen", clusterAddrs[i],
			"--routes", strings.Join(routes, ",")}
		if os.Getenv("ESJET_E2E_SERVER_DEBUG") != "" {
			s.args = append(s.args, "--debug")
		}
		servers[i] = s
		s.start(t)
	}
	for _, s := range servers {
		s.waitReady(t, 60*time.Second)
	}
	clWaitPlacement(t, clURLs(servers))
	return servers
}

func clURLs(servers []*clServer) string {
	var urls []string
	for _, s := range servers {
		urls = append(urls, s.url())
	}
	return strings.Join(urls, ",")
}

// clWaitPlacement waits until an R3 stream can be created: ready members
// answer JetStream before the meta leader has heard from all of them.
func clWaitPlacement(t *testing.T, urls string) {
	t.Helper()
	_, js := clConnect(t, urls)
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		_, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "CL_PROBE", Subjects: []string{"cl.probe"}, Replicas: 3})
		if err == nil {
			err = js.DeleteStream(ctx, "CL_PROBE")
		}
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the cluster cannot place an R3 stream: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func clConnect(t *testing.T, urls string) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(urls, nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond),
		nats.PingInterval(time.Second), nats.MaxPingsOutstanding(2))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return nc, js
}

// clStreamLeader asks the cluster (through urls) for the stream's leader,
// polling until one is reported that satisfies ok.
func clStreamLeader(t *testing.T, urls, stream string, timeout time.Duration, ok func(string) bool) string {
	t.Helper()
	_, js := clConnect(t, urls)
	deadline := time.Now().Add(timeout)
	for {
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		st, err := js.Stream(ctx, stream)
		var leader string
		if err == nil {
			if info, err := st.Info(ctx); err == nil && info.Cluster != nil {
				leader = info.Cluster.Leader
			}
		}
		cancel()
		if leader != "" && ok(leader) {
			return leader
		}
		if time.Now().After(deadline) {
			t.Fatalf("no acceptable leader of %s within %s (last %q, %v)", stream, timeout, leader, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func clByName(t *testing.T, servers []*clServer, name string) *clServer {
	t.Helper()
	for _, s := range servers {
		if s.name == name {
			return s
		}
	}
	t.Fatalf("leader %q is none of the cluster's servers", name)
	return nil
}

// clLoad is a client population: each worker sends request_trip for new
// trips with an Idempotency-Key, to the nodes in turn, and retries an
// error or timeout with the same key (on the other node) until the trip
// is acknowledged, as a real client would.
type clLoad struct {
	prefix string
	nodes  []*node
	client *http.Client

	mu      sync.Mutex
	sent    []string
	acked   map[string]bool
	oks     []clOK
	retries int
	codes   map[string]int

	stopped  chan struct{}
	stopOnce sync.Once
	wg       sync.WaitGroup
}

type clOK struct{ start, end time.Time }

func clStartLoad(t *testing.T, prefix string, workers int, nodes ...*node) *clLoad {
	l := &clLoad{
		prefix:  prefix,
		nodes:   nodes,
		client:  &http.Client{Timeout: 20 * time.Second},
		acked:   map[string]bool{},
		codes:   map[string]int{},
		stopped: make(chan struct{}),
	}
	for w := range workers {
		l.wg.Go(func() { l.worker(t, w) })
	}
	t.Cleanup(func() {
		l.stopOnce.Do(func() { close(l.stopped) })
	})
	return l
}

func (l *clLoad) worker(t *testing.T, w int) {
	for i := 0; ; i++ {
		select {
		case <-l.stopped:
			return
		default:
		}
		id := fmt.Sprintf("%s-%d-%d", l.prefix, w, i)
		l.mu.Lock()
		l.sent = append(l.sent, id)
		l.mu.Unlock()
		// Once stopping, finish the trip in hand, within a bound.
		var giveUp time.Time
		for attempt := 0; ; attempt++ {
			if giveUp.IsZero() {
				select {
				case <-l.stopped:
					giveUp = time.Now().Add(45 * time.Second)
				default:
				}
			} else if time.Now().After(giveUp) {
				t.Logf("load: trip %s never acknowledged", id)
				return
			}
			n := l.nodes[(w+attempt)%len(l.nodes)]
			start := time.Now()
			code, outcome := l.send(n, id)
			l.mu.Lock()
			l.codes[outcome]++
			if code == http.StatusOK {
				l.acked[id] = true
				l.oks = append(l.oks, clOK{start, time.Now()})
				l.mu.Unlock()
				break
			}
			l.retries++
			l.mu.Unlock()
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// send returns the status (0 on a transport error) and an outcome label
// for the tally.
func (l *clLoad) send(n *node, id string) (int, string) {
	req, err := http.NewRequest(http.MethodPost, "http://"+n.httpAddr+"/v1/trip/"+id+"/request_trip", strings.NewReader(tripRequest))
	if err != nil {
		return 0, err.Error()
	}
	req.Header.Set("Idempotency-Key", id+"-req")
	req.Header.Set("Content-Type", "application/json")
	resp, err := l.client.Do(req)
	if err != nil {
		var ne interface{ Timeout() bool }
		if errors.As(err, &ne) && ne.Timeout() {
			return 0, "timeout"
		}
		return 0, "transport error"
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusOK {
		return 200, "200"
	}
	code := ""
	if m := clCodeField.FindSubmatch(body); m != nil {
		code = " " + string(m[1])
	}
	return resp.StatusCode, fmt.Sprintf("%d%s", resp.StatusCode, code)
}

func (l *clLoad) ackedCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.acked)
}

// firstOKAfter is when the first request started at or after t0 was
// acknowledged (zero if none yet).
func (l *clLoad) firstOKAfter(t0 time.Time) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	var first time.Time
	for _, ok := range l.oks {
		if !ok.start.Before(t0) && (first.IsZero() || ok.end.Before(first)) {
			first = ok.end
		}
	}
	return first
}

// waitRecovery waits until a request started after t0 was acknowledged and
// returns how long after t0 that was.
func (l *clLoad) waitRecovery(t *testing.T, t0 time.Time, timeout time.Duration) time.Duration {
	t.Helper()
	deadline := t0.Add(timeout)
	for {
		if first := l.firstOKAfter(t0); !first.IsZero() {
			return first.Sub(t0)
		}
		if time.Now().After(deadline) {
			t.Fatalf("no request acknowledged within %s of the fault; outcomes %v", timeout, l.tally())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (l *clLoad) waitAcked(t *testing.T, n int, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for l.ackedCount() < n {
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d trips acknowledged within %s; outcomes %v", l.ackedCount(), n, timeout, l.tally())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stop ends the load: each worker finishes the trip in hand.
func (l *clLoad) stop() {
	l.stopOnce.Do(func() { close(l.stopped) })
	l.wg.Wait()
}

func (l *clLoad) tally() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var parts []string
	for k, v := range l.codes {
		parts = append(parts, fmt.Sprintf("%s×%d", k, v))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

// clCheckLog reads every acknowledged trip's events through a node and
// returns how many lack trip_requested (lost) and how many have it more
// than once (double). A read may land on a lagging replica: a trip that
// does not look right is read again before it counts.
func clCheckLog(t *testing.T, n *node, acked map[string]bool) (lost, double int) {
	t.Helper()
	count := func(id string) int {
		var h struct {
			Events []tripEvent `json:"events"`
		}
		if code := getJSON(t, "http://"+n.httpAddr+"/v1/trip/"+id+"/events", &h); code != http.StatusOK {
			return 0
		}
		return countType(h.Events, "trip_requested")
	}
	for id := range acked {
		c := count(id)
		// A member restarted after a kill can lag for seconds under load
		// and still answer direct gets: give it 10s, not 2s.
		for try := 0; c != 1 && try < 100; try++ {
			time.Sleep(100 * time.Millisecond)
			c = count(id)
		}
		switch {
		case c == 0:
			lost++
			t.Errorf("acknowledged trip %s has no trip_requested in the log", id)
		case c > 1:
			double++
			t.Errorf("acknowledged trip %s has trip_requested %d times", id, c)
		}
	}
	return lost, double
}

// clNodeServer is the server a node's log says it connected to.
var clConnectedLine = regexp.MustCompile(`connected to nats.* server_name=(\S+)`)

func clNodeServer(n *node) string {
	if m := clConnectedLine.FindStringSubmatch(n.stderr.String()); m != nil {
		return m[1]
	}
	return "?"
}

// clInvariants drains and checks: every acknowledged trip once in the log,
// every recorded command once in OUTBOX, reconcile drift 0. It returns
// lost, double-applied, orphans and the number of recorded commands.
func clInvariants(t *testing.T, n *node, urls string, acked map[string]bool) (lost, double int, orphans uint64, recorded int) {
	t.Helper()
	lost, double = clCheckLog(t, n, acked)
	clReportMissing(t, urls)
	recorded = assertExactlyOnce(t, urls, "demo") // fails on a copy twice or missing, then reconciles
	tot, _ := reconcileNoDrift(t, urls)
	if tot.Orphans != 0 {
		t.Errorf("reconcile reports %d orphans", tot.Orphans)
	}
	if recorded < len(acked) {
		t.Errorf("%d commands recorded for %d acknowledged trips", recorded, len(acked))
	}
	return lost, double, tot.Orphans, recorded
}

// clReportMissing waits up to 20s for every recorded command to be in
// OUTBOX and names the ones that are not (assertExactlyOnce only counts
// them), with what reconcile says meanwhile.
func clReportMissing(t *testing.T, urls string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		recorded, copies, ok := commandCopies(t, urls, "demo")
		if !ok {
			if time.Now().After(deadline) {
				t.Fatal("the streams could not be read for 20s")
			}
			time.Sleep(100 * time.Millisecond)
			continue
		}
		var missing []string
		for _, id := range recorded {
			if copies[id] == 0 {
				missing = append(missing, id)
			}
		}
		if len(missing) == 0 {
			return
		}
		if time.Now().After(deadline) {
			stdout, _, code := runCLIFail(t, t.TempDir(), "reconcile", "--json", "--no-progress", "--url", urls)
			t.Errorf("%d of %d recorded commands are not in OUTBOX after 20s: %v\nreconcile (exit %d): %s", len(missing), len(recorded), missing, code, stdout)
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func clScenarioLine(t *testing.T, name string, l *clLoad, lost, double int, orphans uint64, recovery time.Duration) {
	t.Helper()
	l.mu.Lock()
	line := fmt.Sprintf("scenario=%s commands=%d acked=%d lost=%d double_applied=%d orphans=%d drift=0 redeliveries=- dup_suppressed=- recovery_ms=%d",
		name, len(l.sent), len(l.acked), lost, double, orphans, recovery.Milliseconds())
	l.mu.Unlock()
	t.Log(line)
	fmt.Println(line)
}

func TestClusterLeaderKilledAndStopped(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	began := time.Now()
	servers := clStartCluster(t, dir)
	urls := clURLs(servers)
	t.Logf("cluster of 3 ready in %s", time.Since(began).Round(time.Millisecond))

	// Decisions a relay held when its server died come back after the
	// relay's ack_wait: keep it short.
	env := append([]string{"ESJET_STREAMS_REPLICAS=3", "ESJET_OUTBOX_ACK_WAIT=2s", "ESJET_OUTBOX_FAILOVER_AFTER=2s"}, noDemo...)
	a := startNodeEnv(t, t.TempDir(), env, "--url", urls)
	b := startNodeEnv(t, t.TempDir(), env, "--url", urls)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("node a's log:\n%s\nnode b's log:\n%s\nservers' logs:\n%s", a.stderr.String(), b.stderr.String(), clServerLogs(servers))
		}
	})
	t.Logf("nodes ready in %s; a on %s, b on %s", time.Since(began).Round(time.Millisecond), clNodeServer(a), clNodeServer(b))

	// Fault A: kill -9 the EVENTS leader under load, restart it on its store.
	load := clStartLoad(t, "ka", 4, a, b)
	load.waitAcked(t, 25, 30*time.Second)
	leader := clByName(t, servers, clStreamLeader(t, urls, "DEMO_EVENTS", 10*time.Second, func(string) bool { return true }))
	var others []string
	for _, s := range servers {
		if s != leader {
			others = append(others, s.url())
		}
	}
	watchA := clStartWatch(t, urls, strings.Join(others, ","), leader.name)
	killedAt := time.Now()
	leader.kill9(t)
	recoveryA := load.waitRecovery(t, killedAt, 30*time.Second)
	newLeader := clStreamLeader(t, strings.Join(others, ","), "DEMO_EVENTS", 20*time.Second, func(l string) bool { return l != leader.name })
	t.Logf("fault A: killed leader %s; appends succeed again after %s; new leader %s", leader.name, recoveryA.Round(time.Millisecond), newLeader)
	leader.start(t)
	leader.waitReady(t, 30*time.Second)
	n := load.ackedCount()
	load.waitAcked(t, n+25, 30*time.Second)
	load.stop()
	t.Logf("fault A: load outcomes %s", load.tally())
	t.Logf("fault A: after the kill: %s", watchA.report())
	lost, double, orphans, recorded := clInvariants(t, a, urls, load.acked)
	t.Logf("fault A: %d commands recorded, each in OUTBOX once (%s so far)", recorded, time.Since(began).Round(time.Millisecond))
	clScenarioLine(t, "cluster-leader-kill", load, lost, double, orphans, recoveryA)

	// Fault B: SIGSTOP the (new) leader until another is elected, then SIGCONT.
	loadB := clStartLoad(t, "sb", 4, a, b)
	loadB.waitAcked(t, 20, 30*time.Second)
	stopped := clByName(t, servers, clStreamLeader(t, urls, "DEMO_EVENTS", 10*time.Second, func(string) bool { return true }))
	others = others[:0]
	for _, s := range servers {
		if s != stopped {
			others = append(others, s.url())
		}
	}
	watchB := clStartWatch(t, urls, strings.Join(others, ","), stopped.name)
	stoppedAt := time.Now()
	stopped.signal(t, syscall.SIGSTOP)
	elected := clStreamLeader(t, strings.Join(others, ","), "DEMO_EVENTS", 30*time.Second, func(l string) bool { return l != stopped.name })
	electedAfter := time.Since(stoppedAt)
	recoveryB := loadB.waitRecovery(t, stoppedAt, 40*time.Second)
	time.Sleep(time.Second)
	stopped.signal(t, syscall.SIGCONT)
	t.Logf("fault B: stopped leader %s for %s; %s elected after %s; appends succeed again after %s",
		stopped.name, time.Since(stoppedAt).Round(time.Millisecond), elected, electedAfter.Round(time.Millisecond), recoveryB.Round(time.Millisecond))
	n = loadB.ackedCount()
	loadB.waitAcked(t, n+20, 30*time.Second)
	loadB.stop()
	t.Logf("fault B: load outcomes %s", loadB.tally())
	all := map[string]bool{}
	for _, l := range []*clLoad{load, loadB} {
		for id := range l.acked {
			all[id] = true
		}
	}
	t.Logf("fault B: after the stop: %s", watchB.report())
	t.Logf("leader changes the servers logged:\n%s", clLeaderLines(servers))
	t.Logf("node a: %s\nnode b: %s", clRelayTrouble(a), clRelayTrouble(b))
	lost, double, orphans, recorded = clInvariants(t, b, urls, all)
	t.Logf("both faults: %d acknowledged trips, %d commands recorded, each in OUTBOX once (%s in all)", len(all), recorded, time.Since(began).Round(time.Millisecond))
	clScenarioLine(t, "cluster-leader-stop", loadB, lost, double, orphans, recoveryB)

	a.stop(t, syscall.SIGTERM)
	b.stop(t, syscall.SIGTERM)
}
