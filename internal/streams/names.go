package streams

import "github.com/esjet/esjet/internal/wire"

// Names are the JetStream objects of one namespace: [wire.Names], which
// owns their names and subject filters (the edge hub's too).
type Names = wire.Names

// NamesFor returns the names for namespace ns ([wire.NamesFor]).
func NamesFor(ns string) Names { return wire.NamesFor(ns) }
