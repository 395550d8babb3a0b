package esjettest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet"
	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/wire"
)

// A golden log is a file of an event log's decisions as JetStream stored
// them, one JSON line each: the aggregate, the headers and the envelope,
// byte for byte. Written by an earlier shape of an aggregate's events
// ([WriteLog]), committed under testdata, it is loaded by a test of today's
// definitions ([StartWithLog]) to check that the old log still reads into
// the same states ([CheckStates]).
type goldenMsg struct {
	AggregateType string              `json:"aggregate_type"`
	AggregateID   string              `json:"aggregate_id"`
	Header        map[string][]string `json:"header"`
	Data          json.RawMessage     `json:"data"`
}

// WriteLog writes every decision of n's event log to path as a golden log,
// and beside it (path + ".states.json") the state of each aggregate in it
// as n's definitions fold it: what [CheckStates] expects of a later build.
func WriteLog(ctx context.Context, n *esjet.Node, path string) error {
	js, nc, err := connect(n)
	if err != nil {
		return err
	}
	defer nc.Close()
	sc := streams.NewScanner(js, streams.NamesFor(n.Namespace()).Events, 0)
	defer sc.Close()
	var buf bytes.Buffer
	states := map[string]json.RawMessage{}
	_, err = sc.Scan(ctx, streams.ScanRange{}, func(m *jetstream.RawStreamMsg) error {
		rec, err := streams.DecodeRecord(m)
		if err != nil {
			return err
		}
		h := map[string][]string{}
		for k, v := range m.Header {
			if wire.KeptOnCopy(k) {
				h[k] = v
			}
		}
		line, err := json.Marshal(goldenMsg{AggregateType: rec.AggregateType, AggregateID: rec.AggregateID, Header: h, Data: m.Data})
		if err != nil {
			return err
		}
		buf.Write(append(line, '\n'))
		key := rec.AggregateType + "/" + rec.AggregateID
		if _, ok := states[key]; !ok {
			st, _, err := n.State(ctx, rec.AggregateType, rec.AggregateID)
			if err != nil {
				return fmt.Errorf("state of %s: %w", key, err)
			}
			if states[key], err = json.Marshal(st); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("read the event log: %w", err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		return err
	}
	b, err := json.MarshalIndent(states, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path+".states.json", append(b, '\n'), 0o644)
}

// StartWithLog starts a node serving aggregates, as [Start] does, whose
// event log holds the decisions of the golden log at path (see [WriteLog]),
// stored as they were: today's definitions read them through their
// upcasters.
func StartWithLog(tb testing.TB, path string, aggregates ...*esjet.Definition) *esjet.Node {
	tb.Helper()
	n := Start(tb, aggregates...)
	f, err := os.Open(path)
	if err != nil {
		tb.Fatalf("esjettest: golden log: %v", err)
	}
	defer f.Close()
	js, nc, err := connect(n)
	if err != nil {
		tb.Fatalf("esjettest: %v", err)
	}
	defer nc.Close()
	names := streams.NamesFor(n.Namespace())
	last := map[string]uint64{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 64<<20)
	for line := 1; sc.Scan(); line++ {
		var g goldenMsg
		if err := json.Unmarshal(sc.Bytes(), &g); err != nil {
			tb.Fatalf("esjettest: %s:%d: %v", path, line, err)
		}
		subject, err := names.AggregateSubject(g.AggregateType, g.AggregateID)
		if err != nil {
			tb.Fatalf("esjettest: %s:%d: %v", path, line, err)
		}
		msg := &nats.Msg{Subject: subject, Header: nats.Header(g.Header), Data: g.Data}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		ack, err := js.PublishMsg(ctx, msg, jetstream.WithExpectLastSequencePerSubject(last[subject]))
		cancel()
		if err != nil {
			tb.Fatalf("esjettest: %s:%d: store the decision: %v", path, line, err)
		}
		last[subject] = ack.Sequence
	}
	if err := sc.Err(); err != nil {
		tb.Fatalf("esjettest: golden log %s: %v", path, err)
	}
	return n
}

// CheckStates compares the state of each aggregate of the states file at
// path ("<type>/<id>": state JSON, as [WriteLog] writes it) with its state
// on n, as JSON, and fails the test for each that differs.
func CheckStates(tb testing.TB, n *esjet.Node, path string) {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatalf("esjettest: states: %v", err)
	}
	var want map[string]json.RawMessage
	if err := json.Unmarshal(b, &want); err != nil {
		tb.Fatalf("esjettest: states %s: %v", path, err)
	}
	if len(want) == 0 {
		tb.Fatalf("esjettest: states %s: no aggregates to check", path)
	}
	keys := make([]string, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, key := range keys {
		typ, id, ok := strings.Cut(key, "/")
		if !ok {
			tb.Fatalf("esjettest: states %s: key %q is not <type>/<id>", path, key)
		}
		st, _, err := n.State(context.Background(), typ, id)
		if err != nil {
			tb.Errorf("%s: %v", key, err)
			continue
		}
		got, err := json.Marshal(st)
		if err != nil {
			tb.Fatal(err)
		}
		if !jsonEqual(got, want[key]) {
			tb.Errorf("%s: state\n  %s\nwant (as the build that wrote the log folded it)\n  %s", key, got, bytes.TrimSpace(want[key]))
		}
	}
}

func jsonEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	ax, _ := json.Marshal(x)
	by, _ := json.Marshal(y)
	return bytes.Equal(ax, by)
}

// connect opens a JetStream connection to n.
func connect(n *esjet.Node) (jetstream.JetStream, *nats.Conn, error) {
	nc, err := nats.Connect(n.NATSURL())
	if err != nil {
		return nil, nil, fmt.Errorf("connect to the node: %w", err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return js, nc, nil
}
