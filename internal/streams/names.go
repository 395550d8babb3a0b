package streams

import "github.com/esjet/esjet/internal/wire"

// Names are the JetStream objects of one namespace: [wire.Names], which
// owns their names and subject filters, and the edge hub's (hub.go).
//
// TODO(issue 27): once hub.go is rewritten (issue 26), move the hub's names
// (Outcomes, OutcomeSubject) into wire.Names and make this an alias.
type Names struct{ wire.Names }

// NamesFor returns the names for namespace ns ([wire.NamesFor]).
func NamesFor(ns string) Names { return Names{wire.NamesFor(ns)} }
