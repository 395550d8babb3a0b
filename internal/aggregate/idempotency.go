package aggregate

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/wire"
)

// Idempotency: a request's idempotency key determines its decision id, and
// the aggregate's log is the record of the keys it has handled. The recent
// keyed decisions (decision id → seq, request digest, time) are kept with
// the cached state and in snapshots back to the configured horizon, so a
// retry finds its first decision without reading the log; what a snapshot
// could not carry is looked up in the log.

// recentDecision is where a keyed decision is and what asked for it.
type recentDecision struct {
	Seq    uint64    `json:"seq"`
	Digest string    `json:"digest"`
	At     time.Time `json:"at"`
}

// DecisionID is the decision id a request with idempotency key key gets:
// deterministic, so a retry after a crash finds its first decision.
func (r *Repository) DecisionID(typ, id, key string) string {
	return uuid.NewSHA1(r.space, []byte(typ+"/"+id+"/"+key)).String()
}

// digest identifies a request's content for idempotency: kind + payload,
// with insignificant JSON whitespace removed.
func digest(kind string, payload json.RawMessage) string {
	h := sha256.New()
	h.Write([]byte(kind))
	h.Write([]byte{0})
	var buf []byte
	if len(payload) > 0 {
		if c, err := compact(payload); err == nil {
			buf = c
		} else {
			buf = payload
		}
	}
	h.Write(buf)
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// keyedDigestPrefix starts a request digest keyed under the namespace's
// keyring: "k1." and 32 hex digits.
const keyedDigestPrefix = "k1."

// keyDigest is plain (a [digest]) keyed under the keyring's salt, for a
// decision that holds personal data: an unkeyed SHA-256 of the request let
// anyone who reads the log and guesses the rest of a request test
// candidate names against it, after a forget too. Keyed, only who can read
// the keys bucket (the node, an admin) can.
func (r *Repository) keyDigest(ctx context.Context, plain string) (string, error) {
	if r.cfg.Sealer == nil || r.cfg.Sealer.Keys == nil {
		return "", fmt.Errorf("%w: a request digest to key but the repository has no keyring", ErrInvalidDecision)
	}
	ref, err := r.cfg.Sealer.Keys.Ref(ctx, "esjet:request-digest:"+plain)
	if err != nil {
		return "", fmt.Errorf("key the request digest: %w", err)
	}
	return keyedDigestPrefix + ref, nil
}

// sameDigest says whether stored, the digest a decision records, is of
// the request whose [digest] is plain: stored as it is (a decision with no
// personal data, or made before digests were keyed) or keyed.
func (r *Repository) sameDigest(ctx context.Context, stored, plain string) (bool, error) {
	if stored == plain {
		return true, nil
	}
	if !strings.HasPrefix(stored, keyedDigestPrefix) || r.cfg.Sealer == nil || r.cfg.Sealer.Keys == nil {
		return false, nil
	}
	keyed, err := r.keyDigest(ctx, plain)
	return keyed == stored, err
}

func compact(raw json.RawMessage) ([]byte, error) {
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// horizon is the earliest time a keyed decision still answers retries.
func (r *Repository) horizon() time.Time {
	return r.cfg.Now().Add(-r.cfg.IdempotencyHorizon)
}

// remember records rec in e's recent decisions when it was made with a key
// inside the horizon, and prunes what has expired: a full pass only when
// something has, then nothing until the new oldest entry expires.
func (e *entry) remember(rec streams.Record, horizon time.Time) {
	if rec.IdempotencyKey != "" && rec.Events[0].Time.After(horizon) {
		at := rec.Events[0].Time
		e.recent[rec.ID] = recentDecision{Seq: rec.Seq, Digest: rec.RequestDigest, At: at}
		if e.oldest.IsZero() || at.Before(e.oldest) {
			e.oldest = at
		}
	}
	if !e.oldest.IsZero() && e.oldest.Before(horizon) {
		e.oldest = time.Time{}
		for id, rd := range e.recent {
			if rd.At.Before(horizon) {
				delete(e.recent, id)
			} else if e.oldest.IsZero() || rd.At.Before(e.oldest) {
				e.oldest = rd.At
			}
		}
	}
}

// findKeyed looks for a keyed decision: in e's recent set, and in the log
// when a snapshot carried only the newest part of that set (recentSince
// after the horizon's start).
func (r *Repository) findKeyed(ctx context.Context, e *entry, a wire.AggregateRef, decisionID string) (recentDecision, bool, error) {
	if rd, ok := e.recent[decisionID]; ok {
		return rd, true, nil
	}
	horizon := r.horizon()
	if e.recentSince.IsZero() || !e.recentSince.After(horizon) {
		return recentDecision{}, false, nil // the set is complete for the horizon
	}
	rec, ok, err := r.log.FindDecision(ctx, a, decisionID, horizon)
	if err != nil || !ok {
		return recentDecision{}, false, err
	}
	return recentDecision{Seq: rec.Seq, Digest: rec.RequestDigest, At: rec.Events[0].Time}, true, nil
}

// answered returns the first result of a keyed request already decided
// (ok), [ErrKeyReused] if its key was first used for another request, or
// ok=false when the request is new.
func (r *Repository) answered(ctx context.Context, q *call, e *entry) (Result, bool, error) {
	if q.req.IdempotencyKey == "" {
		return Result{}, false, nil
	}
	rd, ok, err := r.findKeyed(ctx, e, q.agg, q.decisionID)
	if err != nil || !ok {
		return Result{}, false, err
	}
	res, err := r.replay(ctx, rd, q.digest)
	return res, true, err
}

// replay answers a retried request from the log.
func (r *Repository) replay(ctx context.Context, rd recentDecision, dig string) (Result, error) {
	if same, err := r.sameDigest(ctx, rd.Digest, dig); err != nil {
		return Result{}, err
	} else if !same {
		return Result{}, fmt.Errorf("%w: it was first used at %s for another command or payload; use a new key for a new request",
			ErrKeyReused, rd.At.Format(time.RFC3339))
	}
	recs, err := r.log.ReadFrom(ctx, rd.Seq, 1)
	if err != nil {
		return Result{}, err
	}
	if len(recs) != 1 || recs[0].Seq != rd.Seq {
		return Result{}, fmt.Errorf("replay decision at seq %d: not found in the log", rd.Seq)
	}
	r.stats.replays.Add(1)
	res := resultOf(recs[0])
	res.Replayed = true
	return res, nil
}

// findRaw looks for an earlier copy of a keyed raw decision inside the
// idempotency horizon. A raw append reads the log: raw types have no cached
// state.
func (r *Repository) findRaw(ctx context.Context, a wire.AggregateRef, d streams.Decision) (Result, bool, error) {
	rec, ok, err := r.log.FindDecision(ctx, a, d.ID, r.horizon())
	if err != nil || !ok {
		return Result{}, false, err
	}
	if same, err := r.sameDigest(ctx, rec.RequestDigest, d.RequestDigest); err != nil {
		return Result{}, true, err
	} else if !same {
		return Result{}, true, fmt.Errorf("%w: key %q was first used for another append on %s/%s", ErrKeyReused, d.IdempotencyKey, d.AggregateType, d.AggregateID)
	}
	r.stats.replays.Add(1)
	res := resultOf(rec)
	res.Replayed = true
	return res, true, nil
}
