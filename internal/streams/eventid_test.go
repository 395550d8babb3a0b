package streams

import (
	"strconv"
	"testing"

	"github.com/google/uuid"
)

// TestEventIDIsUUIDv5OfTheDecision pins eventID to what it has always been:
// uuid.NewSHA1 of the decision id and "event:<index>" (stored envelopes
// leave derivable ids out, so a change would change every old event's id).
func TestEventIDIsUUIDv5OfTheDecision(t *testing.T) {
	for range 20 {
		d := uuid.Must(uuid.NewV7())
		for _, i := range []int{0, 1, 9, 10, 123456, 1 << 40} {
			want := uuid.NewSHA1(d, []byte("event:"+strconv.Itoa(i))).String()
			if got := eventID(d, i); got != want {
				t.Fatalf("eventID(%s, %d) = %s, want %s", d, i, got, want)
			}
		}
	}
}
