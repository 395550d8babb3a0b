package streams

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/natstest"
)

// Long reads through a consumer on an R3 stream (longRead): a consumer
// whose first pull never reached it (lost to the route race pullHeartbeat
// describes) once hung a read for its 30 s inactivity and failed "consumer
// not found"; missed heartbeats now make readRange pull again, and direct
// gets read the rest of a read that still gets stuck. These read on a
// three-server cluster, with appends during the read, quietly, and from
// many clients.

func TestLongReadR3WithAppendsDuringTheRead(t *testing.T) {
	t.Parallel()
	servers := natstest.RunCluster(t)
	for round := range 3 {
		t.Run(fmt.Sprint(round), func(t *testing.T) {
			h := provisioned([]*server.Server(servers), 3)(t, Config{LoadBatch: 5})
			ctx := t.Context()
			pos := map[int]Position{}
			for i := range 60 {
				r := mustAppend(t, h, decision("item", fmt.Sprint("i", i%6), "made"), pos[i%6])
				pos[i%6] = r.Position()
			}
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 60 {
					d := decision("item", fmt.Sprint("i", i%6), "more")
					r, err := h.log.Append(ctx, d, pos[i%6])
					if err != nil {
						t.Error(err)
						return
					}
					pos[i%6] = r.Position()
				}
			}()
			var reads [][]Record
			for range 5 {
				recs, err := h.log.ReadFrom(ctx, 0, 0)
				if err != nil {
					t.Fatal(err)
				}
				reads = append(reads, recs)
			}
			wg.Wait()
			final, err := h.log.ReadFrom(ctx, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			if len(final) != 120 {
				t.Fatalf("final read %d, want 120", len(final))
			}
			for k, recs := range reads {
				if len(recs) < 60 {
					t.Fatalf("read %d: %d records, fewer than stored before it", k, len(recs))
				}
				for i, r := range recs {
					if r.Seq != final[i].Seq || r.Decision.ID != final[i].Decision.ID {
						t.Fatalf("read %d record %d: seq %d, want %d", k, i, r.Seq, final[i].Seq)
					}
				}
			}
			// An error from fn mid-read comes back as it is, and the next read works.
			boom := errors.New("boom")
			n := 0
			err = h.log.scan(ctx, h.log.names.EventsFilter(), 1, 0, func(Foreign) {}, func(Record) error {
				if n++; n == 7 {
					return boom
				}
				return nil
			})
			if !errors.Is(err, boom) || n != 7 {
				t.Fatalf("fn error: %v after %d", err, n)
			}
			// A decode error with no foreign callback.
			if _, err := h.js.Publish(ctx, h.ns+".evt.stray.x", []byte("junk")); err != nil {
				t.Fatal(err)
			}
			err = h.log.scan(ctx, h.log.names.EventsFilter(), 1, 0, nil, func(Record) error { return nil })
			var de *DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("decode error: %v", err)
			}
			// limit counts the foreign message: 121 messages, limit 121 passes 120 records.
			got, err := h.log.ReadFrom(ctx, 0, 121)
			if err != nil || len(got) != 120 {
				t.Fatalf("limit 121: %d, %v", len(got), err)
			}
			got, err = h.log.ReadFrom(ctx, 101, 21)
			if err != nil || len(got) != 20 {
				t.Fatalf("from 100 limit 21: %d, %v", len(got), err)
			}
			if h.log.consumers.reads.Load() == 0 {
				t.Fatal("no read went through a consumer")
			}
		})
	}
}

func TestLongReadR3Quiet(t *testing.T) {
	t.Parallel()
	servers := natstest.RunCluster(t)
	h := provisioned([]*server.Server(servers), 3)(t, Config{LoadBatch: 5})
	ctx := t.Context()
	pos := map[int]Position{}
	for i := range 60 {
		r := mustAppend(t, h, decision("item", fmt.Sprint("i", i%6), "made"), pos[i%6])
		pos[i%6] = r.Position()
	}
	fails := 0
	for k := range 40 {
		recs, err := h.log.ReadFrom(ctx, 0, 0)
		if err != nil || len(recs) != 60 {
			fails++
			t.Logf("read %d: %d records, %v", k, len(recs), err)
		}
	}
	if fails > 0 || h.log.consumers.reads.Load() == 0 {
		t.Fatalf("%d of 40 reads failed, %d through a consumer", fails, h.log.consumers.reads.Load())
	}
}

func TestLongReadR3ManyClients(t *testing.T) {
	t.Parallel()
	servers := natstest.RunCluster(t)
	slow, fails := 0, 0
	for c := range 12 {
		h := provisioned([]*server.Server(servers), 3)(t, Config{LoadBatch: 5})
		ctx := t.Context()
		pos := map[int]Position{}
		for i := range 30 {
			r := mustAppend(t, h, decision("item", fmt.Sprint("i", i%6), "made"), pos[i%6])
			pos[i%6] = r.Position()
		}
		for k := range 5 {
			start := time.Now()
			ctx, cancel := context.WithTimeout(ctx, 20*time.Second) // the hang was 30 s
			recs, err := h.log.ReadFrom(ctx, 0, 0)
			cancel()
			if time.Since(start) > 2*time.Second {
				slow++
			}
			if err != nil || len(recs) != 30 {
				fails++
				t.Logf("client %d read %d: %d records after %s, %v", c, k, len(recs), time.Since(start), err)
			}
		}
		if h.log.consumers.reads.Load() == 0 {
			t.Fatal("no read went through a consumer")
		}
	}
	if fails > 0 {
		t.Fatalf("%d of 60 reads failed, %d slow", fails, slow)
	}
	if slow > 0 {
		t.Logf("%d slow reads", slow)
	}
}

// A range read's first pull can be lost on a cluster: the reply to the
// consumer create reaches the client's server over the system account's
// route while the consumer's interest in its pull subject comes over the
// account's own route, so a pull published at once may find no interest
// there and be dropped without a reply. readRange (the consumer part,
// without the direct-get hand-off) must still read every range itself:
// here 300 reads from clients on each of the three servers, where about 1
// in 50 first pulls is lost (without heartbeats 5 to 7 of the 300 ended
// short, each after 2 s).
func TestReadRangeR3ReadsEveryRangeThroughItsConsumer(t *testing.T) {
	t.Parallel()
	servers := natstest.RunCluster(t)
	ctx := t.Context()
	var js []jetstream.JetStream
	for _, s := range servers {
		_, j := natstest.Connect(t, s)
		js = append(js, j)
	}
	name := "R3RANGE"
	if _, err := js[0].CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{name + ".>"}, Replicas: 3}); err != nil {
		t.Fatal(err)
	}
	for i := range 30 {
		if _, err := js[0].Publish(ctx, fmt.Sprint(name, ".", i%5), []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	// Every copy holds the range before the reads: a consumer placed on a
	// copy that is behind ends short by design (ReadRange reads the rest).
	for _, s := range servers {
		natstest.Eventually(t, 10*time.Second, func() bool {
			jsz, err := s.Jsz(&server.JSzOptions{Account: "$G", Streams: true})
			if err != nil || len(jsz.AccountDetails) == 0 {
				return false
			}
			for _, sd := range jsz.AccountDetails[0].Streams {
				if sd.Name == name {
					return sd.State.LastSeq == 30
				}
			}
			return false
		})
	}
	short, slow := 0, 0
	for k := range 300 {
		start := time.Now()
		rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		n, err := readRange(rctx, js[k%3], name, ScanRange{From: 1, To: 30}, 1000, func(*jetstream.RawStreamMsg) error { return nil })
		cancel()
		if err != nil {
			t.Fatalf("read %d: %v", k, err)
		}
		if took := time.Since(start); took > 500*time.Millisecond {
			slow++
			t.Logf("read %d: %d messages in %s", k, n, took)
		}
		if n != 30 {
			short++
		}
	}
	if short > 0 {
		t.Fatalf("%d of 300 reads through a consumer ended short (%d slow)", short, slow)
	}
	t.Logf("%d of 300 reads took over 0.5 s", slow)
}
