// Package failpoint lets crash tests kill (or pause) the process at named
// points: the moments between two writes where a crash is most likely to
// lose or double something.
//
// The points sit on the path of one command through a node:
//
//	API ─▶ before-append ─▶ EVENTS ─▶ after-append ─▶ reply
//	relay ─▶ relay-before-publish ─▶ OUTBOX ─▶ relay-after-publish ─▶ ack decisions
//	worker ─▶ worker-before-call ─▶ target ─▶ worker-after-call ─▶ receipt
//	       ─▶ worker-after-receipt ─▶ outcome to the aggregate ─▶ worker-before-ack ─▶ ack
//
// and, once, on esjet provision's move of an older DLQ (internal/streams):
//
//	copy each older letter ─▶ dlq-migrate-copy ─▶ … ─▶ update the DLQ ─▶ dlq-migrate-updated ─▶ empty the older subjects
//
// internal/aggregate, internal/outbox, internal/consumer and
// internal/streams call [Hit] at them; the e2e fault suite arms them in the built binary through the
// environment and checks that nothing acknowledged is lost and no effect
// is applied twice after the restart.
//
// ESJET_FAILPOINTS arms points, comma-separated, each "point=action":
//
//	ESJET_FAILPOINTS=after-append=kill@3,worker-after-call=kill,relay-after-publish=sleep(2s)
//
// kill sends the process SIGKILL on the spot: no defers run, no buffers
// flush, no connection is drained — the worst moment an operator's kill -9
// or a power cut could choose. stop sends the process SIGSTOP: all of it
// stands still until the test sends SIGCONT (a paused node, not a dead one),
// and the goroutine that hit the point goes on only after that SIGCONT (the
// stop itself lands a little after the kill, on whichever thread takes it).
// sleep(d) pauses the calling goroutine. @N acts
// on the Nth time the point is reached (default: the first). The older
// ESJET_FAILPOINT=point[:N] form means point=kill@N. Points are compiled in
// always; with nothing armed, Hit is a map lookup on an empty map. Leave both
// variables unset outside tests.
package failpoint
