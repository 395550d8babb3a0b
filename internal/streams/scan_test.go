package streams_test

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/natstest"
	"github.com/esjet/esjet/internal/streams"
)

// scratchStream creates a stream of its own on subjects <name>.> with
// direct get, and publishes n messages alternating <name>.a and <name>.b,
// each carrying its index as data.
func scratchStream(t *testing.T, js jetstream.JetStream, n, size int) string {
	t.Helper()
	name := "SCAN_" + natstest.Namespace(t)
	if _, err := js.CreateStream(t.Context(), jetstream.StreamConfig{
		Name: name, Subjects: []string{name + ".>"}, AllowDirect: true, Storage: jetstream.MemoryStorage,
	}); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		subj := name + ".a"
		if i%2 == 1 {
			subj = name + ".b"
		}
		data := fmt.Appendf(nil, "%d|", i)
		data = append(data, bytes.Repeat([]byte{'x'}, max(size-len(data), 0))...)
		if _, err := js.Publish(t.Context(), subj, data); err != nil {
			t.Fatal(err)
		}
	}
	return name
}

func collect(t *testing.T, sc *streams.Scanner, r streams.ScanRange) []uint64 {
	t.Helper()
	var seqs []uint64
	n, err := sc.Scan(t.Context(), r, func(m *jetstream.RawStreamMsg) error {
		seqs = append(seqs, m.Sequence)
		return nil
	})
	if err != nil {
		t.Fatalf("scan %+v: %v", r, err)
	}
	if n != len(seqs) {
		t.Fatalf("scan %+v returned %d, passed %d", r, n, len(seqs))
	}
	return seqs
}

func seqRange(from, to, step uint64) []uint64 {
	var out []uint64
	for s := from; s <= to; s += step {
		out = append(out, s)
	}
	return out
}

func TestScannerReadsRangesAndFiltersAcrossBatches(t *testing.T) {
	t.Parallel()
	s := natstest.RunServer(t)
	_, js := natstest.Connect(t, s)
	name := scratchStream(t, js, 25, 10)
	sc := streams.NewScanner(js, name, 4)
	defer sc.Close()

	cases := []struct {
		name string
		r    streams.ScanRange
		want []uint64
	}{
		{"everything", streams.ScanRange{}, seqRange(1, 25, 1)},
		{"everything with >", streams.ScanRange{Filter: ">"}, seqRange(1, 25, 1)},
		{"one subject", streams.ScanRange{Filter: name + ".a"}, seqRange(1, 25, 2)},
		{"wildcard", streams.ScanRange{Filter: name + ".*"}, seqRange(1, 25, 1)},
		{"from", streams.ScanRange{From: 20}, seqRange(20, 25, 1)},
		{"from to", streams.ScanRange{From: 3, To: 11}, seqRange(3, 11, 1)},
		{"to inside a batch", streams.ScanRange{To: 6}, seqRange(1, 6, 1)},
		{"filter and to", streams.ScanRange{Filter: name + ".b", To: 9}, seqRange(2, 8, 2)},
		{"past the end", streams.ScanRange{From: 26}, nil},
		{"no match", streams.ScanRange{Filter: name + ".c"}, nil},
	}
	for _, c := range cases {
		got := collect(t, sc, c.r)
		if fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("%s: got %v, want %v", c.name, got, c.want)
		}
	}
}

func TestScannerSinceStartsAtTheFirstMessageStoredThen(t *testing.T) {
	t.Parallel()
	s := natstest.RunServer(t)
	_, js := natstest.Connect(t, s)
	name := scratchStream(t, js, 5, 10)
	st, err := js.Stream(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	m4, err := st.GetMsg(t.Context(), 4)
	if err != nil {
		t.Fatal(err)
	}
	sc := streams.NewScanner(js, name, 2)
	defer sc.Close()
	got := collect(t, sc, streams.ScanRange{Since: m4.Time})
	if len(got) == 0 || got[0] > 4 || got[len(got)-1] != 5 {
		t.Fatalf("since seq 4's time: got %v", got)
	}
	if got := collect(t, sc, streams.ScanRange{Since: time.Now().Add(time.Hour)}); len(got) != 0 {
		t.Fatalf("since the future: got %v", got)
	}
}

func TestScannerStopsOnErrStopScanAndReturnsOtherErrors(t *testing.T) {
	t.Parallel()
	s := natstest.RunServer(t)
	_, js := natstest.Connect(t, s)
	name := scratchStream(t, js, 10, 10)
	sc := streams.NewScanner(js, name, 3)
	defer sc.Close()
	n, err := sc.Scan(t.Context(), streams.ScanRange{}, func(m *jetstream.RawStreamMsg) error {
		if m.Sequence == 5 {
			return streams.ErrStopScan
		}
		return nil
	})
	if err != nil || n != 5 {
		t.Fatalf("stop at 5: n=%d err=%v", n, err)
	}
	boom := errors.New("boom")
	n, err = sc.Scan(t.Context(), streams.ScanRange{}, func(m *jetstream.RawStreamMsg) error {
		if m.Sequence == 2 {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) || n != 2 {
		t.Fatalf("error at 2: n=%d err=%v", n, err)
	}
	// The shared reply subscription still serves the next scan.
	if got := collect(t, sc, streams.ScanRange{}); len(got) != 10 {
		t.Fatalf("after an early stop: got %v", got)
	}
}

// A batch also ends at its byte limit (1 MiB a request); the scan goes on
// by the pending count rather than stopping at a short batch.
func TestScannerContinuesPastAShortBatch(t *testing.T) {
	t.Parallel()
	s := natstest.RunServer(t)
	_, js := natstest.Connect(t, s)
	name := scratchStream(t, js, 60, 100<<10) // ~10 messages per batch
	sc := streams.NewScanner(js, name, 1000)
	defer sc.Close()
	got := collect(t, sc, streams.ScanRange{})
	if fmt.Sprint(got) != fmt.Sprint(seqRange(1, 60, 1)) {
		t.Fatalf("got %d messages: %v", len(got), got)
	}
}

func TestScannerCloseIsIdempotentAndEndsScanning(t *testing.T) {
	t.Parallel()
	s := natstest.RunServer(t)
	_, js := natstest.Connect(t, s)
	name := scratchStream(t, js, 3, 10)
	used := streams.NewScanner(js, name, 2)
	collect(t, used, streams.ScanRange{})
	unused := streams.NewScanner(js, name, 2)
	for _, sc := range []*streams.Scanner{used, unused} {
		if err := sc.Close(); err != nil {
			t.Fatal(err)
		}
		if err := sc.Close(); err != nil {
			t.Fatalf("second close: %v", err)
		}
	}
	if _, err := unused.Scan(t.Context(), streams.ScanRange{}, func(*jetstream.RawStreamMsg) error { return nil }); err == nil {
		t.Fatal("scan after close succeeded")
	}
}

func TestDecodeRecordReadsAScannedDecision(t *testing.T) {
	t.Parallel()
	s := natstest.RunServer(t)
	_, js := natstest.Connect(t, s)
	ns := natstest.Namespace(t)
	if _, err := streams.Provision(t.Context(), js, ns, streams.ProvisionConfig{}, nil); err != nil {
		t.Fatal(err)
	}
	l, err := streams.Open(t.Context(), js, ns, streams.Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := l.Append(t.Context(), streams.Decision{
		ID: uuid.NewString(), AggregateType: "trip", AggregateID: "t1",
		Events:   []streams.Event{{Type: "requested"}},
		Commands: []streams.Command{{Kind: "book"}},
	}, streams.Position{})
	if err != nil {
		t.Fatal(err)
	}
	sc := streams.NewScanner(js, streams.NamesFor(ns).Events, 0)
	defer sc.Close()
	var got streams.Record
	if _, err := sc.Scan(t.Context(), streams.ScanRange{Filter: streams.NamesFor(ns).EventsFilter()}, func(m *jetstream.RawStreamMsg) error {
		got, err = streams.DecodeRecord(m)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if got.Seq != rec.Seq || got.ID != rec.ID || len(got.Commands) != 1 || got.Commands[0].ID != "trip:t1:1:0" || got.Stored.IsZero() {
		t.Fatalf("decoded %+v, appended %+v", got, rec)
	}
	if _, err := streams.DecodeRecord(&jetstream.RawStreamMsg{Subject: "x.evt.a.b", Data: []byte("{}")}); err == nil {
		t.Fatal("decoded garbage")
	}
}
