package bench

import (
	"fmt"
	"math/rand/v2"
)

// Skews of the aggregate picker.
const (
	SkewUniform = "uniform"
	SkewZipf    = "zipf"
)

// ZipfS is the Zipf exponent: with 1,000 aggregates the hottest one gets
// about 18% of the commands and the top ten about 48%.
const ZipfS = 1.1

// Picker chooses the aggregate (0 … n-1) of the next command. Each worker
// has its own; it is not safe for concurrent use.
type Picker interface {
	Pick() int
}

// NewPicker returns a picker over n aggregates with skew SkewUniform or
// SkewZipf (aggregate 0 is the hottest), seeded so a run is repeatable.
func NewPicker(skew string, n int, seed uint64) (Picker, error) {
	if n < 1 {
		return nil, fmt.Errorf("aggregates %d: need at least 1", n)
	}
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	switch skew {
	case SkewUniform:
		return uniform{r: r, n: n}, nil
	case SkewZipf:
		return zipf{z: rand.NewZipf(r, ZipfS, 1, uint64(n-1))}, nil
	default:
		return nil, fmt.Errorf("skew %q: want %s or %s", skew, SkewUniform, SkewZipf)
	}
}

type uniform struct {
	r *rand.Rand
	n int
}

func (u uniform) Pick() int { return u.r.IntN(u.n) }

type zipf struct{ z *rand.Zipf }

func (z zipf) Pick() int { return int(z.z.Uint64()) }
