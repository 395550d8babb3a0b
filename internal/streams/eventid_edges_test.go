package streams

import (
	"math"
	"strconv"
	"testing"

	"github.com/google/uuid"
)

func TestEventIDEdges(t *testing.T) {
	for _, d := range []uuid.UUID{uuid.Nil, uuid.Max, uuid.Must(uuid.NewRandom())} {
		for _, i := range []int{-1, -10, math.MinInt, math.MaxInt, 99999, 1e9} {
			if got, want := eventID(d, i), uuid.NewSHA1(d, []byte("event:"+strconv.Itoa(i))).String(); got != want {
				t.Fatalf("%s %d: %s want %s", d, i, got, want)
			}
		}
	}
	d := uuid.Must(uuid.NewRandom())
	if n := testing.AllocsPerRun(100, func() { _ = eventID(d, 123) }); n > 1 {
		t.Fatalf("allocs %v", n)
	}
}
