package streams

import "github.com/esjet/esjet/internal/wire"

// aggRef is typ/id as a validated aggregate; the tests name valid ones.
func aggRef(typ, id string) wire.AggregateRef {
	a, err := wire.NewAggregateRef(typ, id)
	if err != nil {
		panic(err)
	}
	return a
}
