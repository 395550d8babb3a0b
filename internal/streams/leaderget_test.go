package streams

import (
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/natstest"
)

// TestScanReadsUpToTheLeadersLastWhereAReplicaIsBehind is issue 28 item 2
// at the reader: a scan that decides what to publish (the relay's "is it
// in OUTBOX already?", reconcile's orphans) read with direct gets, which a
// replica answers from what it has — a follower restarted a moment ago
// serves them from 90% synchronised on. Here the direct gets of an R3
// stream on a 3-server cluster are answered by a copy held behind for good
// (a mirror filtered to the first message's subject); a scan up to the
// leader's last sequence, or up to a sequence from the stream's info, still
// reads every message, from the leader where the copy has none; a scan to
// the end of what the replica has is unchanged.
func TestScanReadsUpToTheLeadersLastWhereAReplicaIsBehind(t *testing.T) {
	t.Parallel()
	servers := natstest.RunCluster(t)
	_, js := natstest.Connect(t, servers[1])
	ctx := t.Context()
	name := "LAG_" + natstest.Namespace(t)
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{name + ".>"}, Replicas: 3, AllowDirect: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, name+".first", []byte("0")); err != nil {
		t.Fatal(err)
	}
	behind := name + "_BEHIND"
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: behind, AllowDirect: true,
		Mirror: &jetstream.StreamSource{Name: name, FilterSubject: name + ".first"}}); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 10*time.Second, func() bool {
		st, err := js.Stream(ctx, behind)
		return err == nil && st.CachedInfo().State.Msgs == 1
	})
	const n = 30
	for i := range n {
		if _, err := js.Publish(ctx, fmt.Sprintf("%s.cmd.%d", name, i), []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	sc := NewScanner(js, name, 7)
	defer sc.Close()
	// The scanner's direct gets go to the copy that is behind; its leader
	// reads to the stream.
	sc.getter.subject = "$JS.API.DIRECT.GET." + behind

	count := func(r ScanRange) int {
		t.Helper()
		var seqs []uint64
		got, err := sc.Scan(ctx, r, func(m *jetstream.RawStreamMsg) error {
			seqs = append(seqs, m.Sequence)
			return nil
		})
		if err != nil {
			t.Fatalf("scan %+v: %v", r, err)
		}
		for i, s := range seqs {
			if s != r.From+uint64(i) && !(r.From == 0 && s == uint64(i)+1) {
				t.Fatalf("scan %+v read seqs %v: not in order without gaps", r, seqs)
			}
		}
		if got != len(seqs) {
			t.Fatalf("scan %+v returned %d for %d messages", r, got, len(seqs))
		}
		return got
	}
	if got := count(ScanRange{ToLeaderLast: true}); got != n+1 {
		t.Errorf("scan to the leader's last: %d messages, want %d", got, n+1)
	}
	if got := count(ScanRange{From: 5, ToLeaderLast: true}); got != n+1-4 {
		t.Errorf("scan from seq 5 to the leader's last: %d messages, want %d", got, n+1-4)
	}
	if got := count(ScanRange{From: 1, To: 20}); got != 20 {
		t.Errorf("scan to seq 20: %d messages, want 20", got)
	}
	if got := count(ScanRange{}); got != 1 {
		t.Errorf("scan to the replica's end: %d messages, want the 1 it has", got)
	}
}
