package consumer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/wire"
)

// A kind's rate limit is one token bucket for the whole fleet, the value of
// wire.RateKey(kind): the tokens left after the last taker and when that
// was. A call takes one by compare-and-set (a lost race reads again), and
// when none is left it reserves the next: the tokens go negative and the
// taker waits until its own token has accrued. So takers queue in the
// order their writes landed, nobody polls, and over any interval T the
// calls started are at most burst + rate × T — across every node, since
// they all write the same key. The cost is one read and one write of the
// key per call.
//
// Time is each node's wall clock (written with the bucket): nodes whose
// clocks differ by d may together exceed the limit by rate × d calls. A
// reserved token whose taker dies goes unused (the limit errs on the slow
// side).

// rateBucket is the value of a rate key.
type rateBucket struct {
	Tokens float64 `json:"tokens"` // negative: reserved ahead
	At     int64   `json:"at_ns"`  // Unix nanoseconds, the last taker's clock
}

// maxRateRaces bounds how many lost compare-and-sets one reservation
// retries before it reports the contention as an error (the worker then
// tries again after a pause, holding the command).
const maxRateRaces = 64

// reserve takes one token of kind's bucket (rate per second, burst at
// most) and returns when its holder may call: now, or later when the
// tokens were all taken.
func (c *Control) reserve(ctx context.Context, kind string, rate float64, burst int) (time.Time, error) {
	key := wire.RateKey(kind)
	for range maxRateRaces {
		b := rateBucket{Tokens: float64(burst)}
		var rev uint64
		e, err := c.kv.Get(ctx, key)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
		case err != nil:
			return time.Time{}, fmt.Errorf("read the rate limit of %s: %w", kind, err)
		default:
			rev = e.Revision()
			if json.Unmarshal(e.Value(), &b) != nil {
				b = rateBucket{Tokens: float64(burst)} // not ours: start full
			}
		}
		now := time.Now()
		if b.At != 0 {
			// A clock behind the last taker's accrues nothing.
			elapsed := max(now.Sub(time.Unix(0, b.At)), 0)
			b.Tokens += elapsed.Seconds() * rate
		}
		b.Tokens = min(b.Tokens, float64(burst)) - 1
		b.At = now.UnixNano()
		at := now
		if b.Tokens < 0 {
			at = now.Add(time.Duration(-b.Tokens / rate * float64(time.Second)))
		}
		v, _ := json.Marshal(b)
		if rev == 0 {
			_, err = c.kv.Create(ctx, key, v)
		} else {
			_, err = c.kv.Update(ctx, key, v, rev)
		}
		switch {
		case err == nil:
			return at, nil
		case isWrongLast(err):
			continue // another taker was first: read again
		default:
			return time.Time{}, fmt.Errorf("take from the rate limit of %s: %w", kind, err)
		}
	}
	return time.Time{}, fmt.Errorf("take from the rate limit of %s: %d writers were first in a row", kind, maxRateRaces)
}
