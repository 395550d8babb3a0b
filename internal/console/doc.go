// Package console is the node's web console, served at /console on the
// HTTP listener: an overview of the namespace (streams and buckets, relay
// lag, worker health per kind), an aggregate browser (type → id → a
// timeline of decisions, their events, and the fate of every command they
// issued, with the outcome that came back) and the OUTBOX and DLQ per kind,
// where a dead letter can be retried or discarded when the node allows it
// (console.allow_actions).
//
// The page is plain HTML, CSS and JavaScript embedded in the binary
// (assets/): no build step, no CDN, so it works offline, at the edge. It
// reads JSON from /console/api/..., which this package answers from what
// the operator tools read: package ops (the [ops.Inspector] for relay lag,
// kinds and one command's fate, the [ops.DLQ] for dead letters, their
// retry and discard with the same safety checks and audit records as
// `esjet dlq`) and the aggregate's log (package streams). The browser polls
// those endpoints, so a timeline follows a saga as it moves without a reload.
//
// It sits behind the HTTP listener's guard (api.Guard): the Host,
// origin and content type checks, and with http.auth the operator role.
// Its pages allow only their own assets ([ContentSecurityPolicy]); with
// tokens the page sends the one the user pasted as Authorization (kept in
// sessionStorage, never a cookie), and an action's audit record names the
// HTTP user.
//
// Data flow: EVENTS, OUTBOX, DLQ, KV buckets → ops, streams → console →
// the browser; console → ops.DLQ → OUTBOX, receipts, DLQ audit records
// (actions only).
package console
