package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/esjet/esjet/config"
	"github.com/esjet/esjet/internal/broker"
	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/wire"
)

// The fleet run (`esjet bench --nodes 1,2,4 --url …`): for each node count
// N, N `esjet run` processes share one namespace on an existing cluster and
// serve the trip demo (its services in each process), while clients
// request the same number of trips over NATS micro. It reports, per N, how
// fast commands were accepted, commands relayed to OUTBOX and effects
// carried out (receipts written), each as a ratio to the first N.

// FleetOptions configure [RunFleet].
type FleetOptions struct {
	// Config is the validated config; it must be in external mode (the
	// nodes share a cluster). Each node count gets its own namespace,
	// <namespace>-n<N>, deleted afterwards.
	Config config.Config
	// Nodes are the node counts to run, e.g. 1, 2, 4.
	Nodes []int
	// Trips is how many trips the clients request per node count.
	Trips int
	// Clients is how many requests are in flight at once.
	Clients int
	// Binary is the esjet executable the nodes run; "" is this process's.
	Binary string
	// Log receives progress lines; nil discards them.
	Log io.Writer
}

// FleetRow is one node count's figures: each stage's throughput from the
// start of the load until that stage was done with it (the same trips
// for every node count).
type FleetRow struct {
	Nodes    int     `json:"nodes"`
	Commands float64 `json:"commands_per_s"` // request_trip accepted
	Relayed  float64 `json:"relayed_per_s"`  // commands the relay put in OUTBOX
	Effects  float64 `json:"effects_per_s"`  // receipts written by workers
	Errors   int64   `json:"retried"`        // requests refused or timed out, then retried
	// DoneMS is when the last command was relayed and the last effect
	// carried out, from the start of the load.
	DoneMS int64 `json:"done_ms"`
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// RunFleet runs the fleet benchmark and returns a row per node count.
func RunFleet(ctx context.Context, o FleetOptions) ([]FleetRow, error) {
	if o.Config.NATS.Mode != config.ModeExternal {
		return nil, errors.New("bench --nodes runs node processes on a shared cluster: give it the cluster with --url")
	}
	if o.Binary == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, err
		}
		o.Binary = exe
	}
	if o.Trips <= 0 {
		o.Trips = 2000
	}
	if o.Clients <= 0 {
		o.Clients = DefaultWorkers
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	var nss []string
	for _, n := range o.Nodes {
		nss = append(nss, fmt.Sprintf("%s-n%d", o.Config.Namespace, n))
	}
	if err := refuseExisting(ctx, o.Config, nss...); err != nil {
		return nil, err
	}
	nc, err := broker.Connect(ctx, o.Config, "esjet-bench-fleet", nats.MaxReconnects(-1))
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	var rows []FleetRow
	for i, n := range o.Nodes {
		row, err := runFleetStep(ctx, o, nc, js, nss[i], n)
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		deleteNamespace(dctx, js, nss[i], o.Config)
		cancel()
		if err != nil {
			return rows, fmt.Errorf("%d node(s): %w", n, err)
		}
		rows = append(rows, row)
	}
	return rows, nil
}

func runFleetStep(ctx context.Context, o FleetOptions, nc *nats.Conn, js jetstream.JetStream, ns string, n int) (FleetRow, error) {
	fmt.Fprintf(o.Log, "fleet: starting %d node(s) in namespace %s\n", n, ns)
	var procs []*exec.Cmd
	defer func() {
		for _, p := range procs {
			_ = p.Process.Signal(syscall.SIGTERM)
		}
		for _, p := range procs {
			_ = p.Wait()
		}
	}()
	for i := range n {
		p, err := startFleetNode(ctx, o, ns, i)
		if err != nil {
			return FleetRow{}, err
		}
		procs = append(procs, p)
	}
	names := streams.NamesFor(ns)
	counts := func() (outbox, receipts uint64) {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if st, err := js.Stream(cctx, names.Outbox); err == nil {
			outbox = st.CachedInfo().State.Msgs
		}
		if st, err := js.Stream(cctx, wire.KVStream(names.Receipts)); err == nil {
			receipts = st.CachedInfo().State.Msgs
		}
		return outbox, receipts
	}
	fmt.Fprintf(o.Log, "fleet: %d node(s) ready; %d trips with %d clients\n", n, o.Trips, o.Clients)
	out0, rc0 := counts()
	var failed atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	var seq atomic.Int64
	subject := wire.APIPrefix(ns) + ".trip."
	for range o.Clients {
		wg.Go(func() {
			for ctx.Err() == nil {
				k := seq.Add(1)
				if k > int64(o.Trips) {
					return
				}
				id := "f" + strconv.FormatInt(k, 10)
				body := fmt.Appendf(nil, `{"traveler":"%s-%s","destination":"Lisbon","budget":100000,"flight_price":40000,"hotel_price":30000}`, ns, id)
				// Retried with the same key until accepted, as a client would.
				for attempt := 0; ctx.Err() == nil; attempt++ {
					rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
					msg := nats.NewMsg(subject + id + ".request_trip")
					msg.Data = body
					msg.Header.Set("Idempotency-Key", id)
					reply, err := nc.RequestMsgWithContext(rctx, msg)
					cancel()
					if err == nil && reply.Header.Get(micro.ErrorCodeHeader) == "" {
						break
					}
					failed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	accepted := time.Since(start)
	// Each stage's end: when OUTBOX (the relay) and the receipts (the
	// workers) stopped growing for 2s.
	out, rc := counts()
	outAt, rcAt := time.Now(), time.Now()
	for time.Since(start) < 5*time.Minute {
		time.Sleep(100 * time.Millisecond)
		o2, r2 := counts()
		if o2 != out {
			out, outAt = o2, time.Now()
		}
		if r2 != rc {
			rc, rcAt = r2, time.Now()
		}
		if time.Since(outAt) >= 2*time.Second && time.Since(rcAt) >= 2*time.Second {
			break
		}
	}
	row := FleetRow{
		Nodes:    n,
		Commands: float64(o.Trips) / accepted.Seconds(),
		Relayed:  float64(out-out0) / outAt.Sub(start).Seconds(),
		Effects:  float64(rc-rc0) / rcAt.Sub(start).Seconds(),
		Errors:   failed.Load(),
		DoneMS:   later(outAt, rcAt).Sub(start).Milliseconds(),
	}
	fmt.Fprintf(o.Log, "fleet: %d node(s): %.0f commands/s, %.0f relayed/s, %.0f effects/s, %d retried, all done in %d ms\n",
		n, row.Commands, row.Relayed, row.Effects, row.Errors, row.DoneMS)
	return row, nil
}

// startFleetNode runs one `esjet run` on the cluster in namespace ns and
// returns once it printed its ready line.
func startFleetNode(ctx context.Context, o FleetOptions, ns string, i int) (*exec.Cmd, error) {
	cmd := exec.Command(o.Binary, "run", "--url", strings.Join(o.Config.NATS.External.URLs, ","), "--namespace", ns, "--http", "none", "--log-level", "warn")
	cmd.Env = append(os.Environ(),
		"ESJET_STREAMS_REPLICAS="+strconv.Itoa(o.Config.Streams.Replicas),
		"ESJET_DEMO_SERVICES=true",
	)
	cmd.Stderr = o.Log
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start node %d: %w", i, err)
	}
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		said := false
		for sc.Scan() {
			if !said && strings.Contains(sc.Text(), " ready: ") {
				said = true
				ready <- true
			}
		}
		if !said {
			ready <- false
		}
	}()
	select {
	case ok := <-ready:
		if !ok {
			_ = cmd.Wait()
			return nil, fmt.Errorf("node %d exited before it was ready", i)
		}
		return cmd, nil
	case <-time.After(60 * time.Second):
	case <-ctx.Done():
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	return nil, fmt.Errorf("node %d not ready within 60s", i)
}

// WriteFleetTable prints the rows with each figure's ratio to the first
// row's.
func WriteFleetTable(w io.Writer, rows []FleetRow) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "nodes\tcommands/s\t×\trelayed/s\t×\teffects/s\t×\tretried\tdone ms\t")
	ratio := func(v, base float64) string {
		if base == 0 {
			return "-"
		}
		return fmt.Sprintf("%.2f", v/base)
	}
	for _, r := range rows {
		b := rows[0]
		fmt.Fprintf(tw, "%d\t%.0f\t%s\t%.0f\t%s\t%.0f\t%s\t%d\t%d\t\n", r.Nodes, r.Commands, ratio(r.Commands, b.Commands),
			r.Relayed, ratio(r.Relayed, b.Relayed), r.Effects, ratio(r.Effects, b.Effects), r.Errors, r.DoneMS)
	}
	return tw.Flush()
}

// WriteFleetJSON prints the rows as JSON.
func WriteFleetJSON(w io.Writer, rows []FleetRow) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rows)
}
