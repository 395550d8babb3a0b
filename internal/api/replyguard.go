package api

import (
	"strings"

	"github.com/esjet/esjet/internal/streams"
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
// its stores' subjects, or one of cfg.GuardedReplies.
func (s *Service) guardedReply(reply string) bool {
	if replyIntoStore(s.ns, reply) {
		return true
	}
	for _, p := range s.guarded {
		if streams.SubjectMatches(p, reply) {
			return true
		}
	}
	return false
}

// replyIntoStore reports whether reply is a subject the node must never
// publish an answer to: the namespace's streams (<ns>.evt, outbox,
// schedule, dlq, outcome), any KV bucket or object store ($KV., $O.), the
// JetStream API ($JS.), the API itself (esjet.<ns>.) and the services'
// discovery ($SRV.).
func replyIntoStore(ns, reply string) bool {
	for _, p := range []string{ns + ".evt.", ns + ".outbox.", ns + ".schedule.", ns + ".dlq.", ns + ".outcome.", "$KV.", "$O.", "$JS.", "$JSC.", "$SRV.", "esjet-edge.", SubjectPrefix(ns) + "."} {
		if strings.HasPrefix(reply, p) {
			return true
		}
	}
	return false
}
