package aggregate

import (
	"fmt"
	"testing"

	"github.com/esjet/esjet/internal/natstest"
)

// An aggregate whose decisions lie far apart in the log gets a snapshot
// when its events since the last one span more than SnapshotSpan messages,
// long before SnapshotEvery events: a later cold load then reads the
// snapshot and no stretch of the log.
func TestSnapshotWhenEventsSpanTheLog(t *testing.T) {
	s := natstest.RunServer(t)
	for _, tc := range []struct {
		name      string
		span      int
		wantSnaps int64
	}{{"span 20", 20, 1}, {"span off", -1, 0}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, s)
			cfg := Config{SnapshotEvery: 100, SnapshotSpan: tc.span}
			r := f.repo(t, cfg)
			mustSend(t, r, "far", "deposit", `{"amount":1}`, "")
			for i := range 30 { // 30 decisions of others between far's two
				mustSend(t, r, fmt.Sprintf("other-%d", i), "deposit", `{"amount":1}`, "")
			}
			mustSend(t, r, "far", "deposit", `{"amount":2}`, "")
			if got := r.Stats().SnapshotsWritten; got != tc.wantSnaps {
				t.Fatalf("snapshots written = %d, want %d", got, tc.wantSnaps)
			}
			cold := f.repo(t, cfg)
			st, err := cold.Get(t.Context(), "account", "far")
			if err != nil {
				t.Fatal(err)
			}
			if st.Value.(account).Balance != 3 || st.Position.Version != 2 {
				t.Fatalf("cold load = %+v at %+v", st.Value, st.Position)
			}
			stats := cold.Stats()
			if tc.wantSnaps > 0 && (stats.SnapshotHits != 1 || stats.RecordsRead != 0) {
				t.Fatalf("cold load read %d records with %d snapshot hits, want the snapshot alone", stats.RecordsRead, stats.SnapshotHits)
			}
			if tc.wantSnaps == 0 && stats.RecordsRead != 2 {
				t.Fatalf("cold load read %d records, want both decisions", stats.RecordsRead)
			}
		})
	}
}
