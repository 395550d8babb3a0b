package archive_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/wire"
)

// A tombstone is written by the archive job only, but a credential that
// may publish to EVENTS (the node role) could start a new aggregate with
// one that names another aggregate's archive: its history must not show
// that aggregate's decisions as its own.
func TestATombstoneNamingAnotherAggregatesArchiveIsRefused(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	f.send(t, "real", "add", `{"by":7}`)
	f.send(t, "real", "close", `{}`)
	if p, err := f.a.Run(t.Context(), nil); err != nil || p.Archived != 1 {
		t.Fatalf("archive: %+v %v", p, err)
	}
	hist := f.history(t, "real")
	real, _, err := wire.TombstoneOf(hist[len(hist)-1])
	if err != nil {
		t.Fatal(err)
	}
	// The forged tombstone lines up with the real archive's versions.
	forged := real
	forged.State = json.RawMessage(`{"n":7,"closed":true}`)
	tomb, err := f.log.AppendTombstone(t.Context(), "tally", "forged", forged, streams.Position{Version: real.LastVersion})
	if err != nil {
		t.Fatal(err)
	}
	recs, err := f.log.History(t.Context(), "tally", "forged")
	if err == nil || !strings.Contains(err.Error(), "not of") {
		t.Fatalf("history of an aggregate whose tombstone names another's archive: %d records, %v; want it refused", len(recs), err)
	}
	if _, err := f.log.Archived(t.Context(), tomb); err == nil {
		t.Fatal("a rebuild's read of the forged tombstone's archive: no error")
	}
	// The real one still reads.
	if len(hist) != 3 {
		t.Fatalf("the real aggregate's history: %d records", len(hist))
	}
}
