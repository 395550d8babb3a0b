package api

import (
	"strings"

	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/wire"
)

// A request's reply subject is not checked by NATS against the requester's
// permissions, and the node answers with its own: a request to the API with
// reply <ns>.outbox.<kind> would have the node publish its answer into
// OUTBOX, where a stream stores it. Under esjet's roles no user but the node
// and admin shares an account with the streams, so requests arrive through
// imports with server-made replies (_R_.…); this guard is for every other
// setup (one shared account, permissions written by hand): the node never
// answers on a subject a stream of its namespace, a bucket or the JetStream
// API listens on.

// guardedReply reports whether the node must not answer on reply: one of
// its stores' subjects ([storeReplies]), or one of cfg.GuardedReplies. It
// runs on every request: prefixes made once, no allocation.
func (s *Service) guardedReply(reply string) bool {
	for _, p := range s.storeReplies {
		if strings.HasPrefix(reply, p) {
			return true
		}
	}
	for _, p := range s.guarded {
		if streams.SubjectMatches(p, reply) {
			return true
		}
	}
	return false
}

// storeReplies are the prefixes of the subjects the node must never publish
// an answer to: the namespace's own (<ns>.evt, outbox, schedule, dlq,
// outcome: every <ns>. subject is esjet's), any KV bucket or object store
// ($KV., $O.), the JetStream API and its replies ($JS., $JSC.), the
// services' discovery ($SRV.), the edge link (esjet-edge.) and the API
// itself (esjet.<ns>.).
func storeReplies(ns string) []string {
	return []string{ns + ".", wire.KVSubjectRoot, "$O.", "$JS.", "$JSC.", "$SRV.", wire.EdgeSubjectRoot, wire.APIPrefix(ns) + "."}
}
