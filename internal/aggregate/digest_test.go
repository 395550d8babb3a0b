package aggregate

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/esjet/esjet/internal/natstest"
	"github.com/esjet/esjet/internal/streams"
)

// TestAPersonalRequestsDigestIsKeyed: the digest a keyed request leaves in
// its decision (and in snapshots' recent decisions) is keyed under the
// namespace's keyring when the decision holds personal data, so a log
// reader cannot test guessed names against it; retries are still known
// (in the cache, from a snapshot, from the log), a new request on the key
// is still refused, and a decision stored with an unkeyed digest (before
// digests were keyed) still answers its retry.
func TestAPersonalRequestsDigestIsKeyed(t *testing.T) {
	srv := natstest.RunServer(t)
	f, _, sealer, log := newSealedFixture(t, srv)
	cfg := Config{Sealer: sealer, SnapshotEvery: 1}
	payload := json.RawMessage(`{"name":"Ada Lovelace","city":"London"}`)
	join := Request{Type: "member", ID: "m1", Kind: "join", Payload: payload, IdempotencyKey: "k1"}
	r := f.repo(t, cfg, memberDef())
	if _, err := r.Handle(t.Context(), join); err != nil {
		t.Fatal(err)
	}
	recs, err := log.Load(t.Context(), "member", "m1", streams.Position{})
	if err != nil || len(recs) != 1 {
		t.Fatalf("history: %v %v", recs, err)
	}
	if d := recs[0].RequestDigest; !strings.HasPrefix(d, keyedDigestPrefix) || d == digest("join", payload) {
		t.Fatalf("stored request digest %q: want it keyed, not the plain SHA-256 a log reader can recompute", d)
	}
	for name, repo := range map[string]*Repository{"the same repository": r, "a cold one (snapshot)": f.repo(t, cfg, memberDef())} {
		if res, err := repo.Handle(t.Context(), join); err != nil || !res.Replayed {
			t.Errorf("%s: the retry %+v, %v; want it replayed", name, res, err)
		}
		other := join
		other.Payload = json.RawMessage(`{"name":"Grace Hopper","city":"London"}`)
		if _, err := repo.Handle(t.Context(), other); !errors.Is(err, ErrKeyReused) {
			t.Errorf("%s: another request on the key: %v, want ErrKeyReused", name, err)
		}
	}

	// A decision from before digests were keyed: its retry still replays.
	old := Request{Type: "member", ID: "m2", Kind: "join", Payload: payload, IdempotencyKey: "k2"}
	sd := streams.Decision{ID: r.DecisionID("member", "m2", "k2"), AggregateType: "member", AggregateID: "m2",
		IdempotencyKey: "k2", RequestDigest: digest("join", payload),
		Events: []streams.Event{{Type: "joined", Data: json.RawMessage(`{"city":"London"}`)}}}
	if _, err := log.Append(t.Context(), sd, streams.Position{}); err != nil {
		t.Fatal(err)
	}
	if res, err := f.repo(t, cfg, memberDef()).Handle(t.Context(), old); err != nil || !res.Replayed {
		t.Errorf("the retry of a decision with an unkeyed digest: %+v, %v; want it replayed", res, err)
	}
}
