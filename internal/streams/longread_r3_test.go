package streams

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/esjet/esjet/internal/natstest"
)

// Long reads through a consumer on an R3 stream (longRead): a consumer
// whose pull never reached it once hung a read for its 30 s inactivity and
// failed "consumer not found"; readRange now hands such a read's rest to
// direct gets. These read on a three-server cluster, with appends during
// the read, quietly, and from many clients.

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
