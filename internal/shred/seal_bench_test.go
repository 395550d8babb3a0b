package shred_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/esjet/esjet/internal/shred"
)

// memKeys is a keyring in memory: one key per ref, version 1.
type memKeys struct{ key []byte }

func (m memKeys) Ref(_ context.Context, subject string) (string, error) {
	return "0123456789abcdef0123456789abcdef", nil
}
func (m memKeys) Current(context.Context, string) (int, []byte, error) { return 1, m.key, nil }
func (m memKeys) Key(context.Context, string, int) ([]byte, error)     { return m.key, nil }

// BenchmarkSealOpen seals and opens the demo's trip_requested with a
// cached key: the cost a personal event adds on write and on read.
func BenchmarkSealOpen(b *testing.B) {
	s := &shred.Sealer{Keys: memKeys{key: make([]byte, 32)}}
	ev := struct {
		Traveler    string `json:"traveler" esjet:"personal,subject=traveler"`
		Destination string `json:"destination"`
		Budget      int64  `json:"budget"`
	}{"zoe", "Vienna", 100000}
	spec, _ := shred.SpecOf(ev)
	plain, _ := json.Marshal(ev)
	sealed, _ := s.SealJSON(context.Background(), plain, spec)
	b.ReportMetric(float64(len(sealed)-len(plain)), "bytes-added")
	b.Run("seal", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.SealJSON(context.Background(), plain, spec); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("open", func(b *testing.B) {
		for b.Loop() {
			if _, _, err := s.OpenJSON(context.Background(), sealed); err != nil {
				b.Fatal(err)
			}
		}
	})
}
