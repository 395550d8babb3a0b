// Package api is esjet's command and event-store API, served on two
// surfaces with the same operations, routes and error codes: a NATS micro
// service (`nats micro ls` lists it) and an HTTP gateway (JSON).
//
//	operation        NATS subject                          HTTP
//	send a command   esjet.<ns>.<type>.<id>.<command>       POST /v1/<type>/<id>/<command>
//	current state    esjet.<ns>.<type>.<id>.state           GET  /v1/<type>/<id>
//	history          esjet.<ns>.<type>.<id>.events          GET  /v1/<type>/<id>/events?after=&limit=
//	raw append       esjet.<ns>.raw.append.<type>.<id>      POST /v1/raw/<type>/<id>/events
//	raw load         esjet.<ns>.raw.events.<type>.<id>      GET  /v1/raw/<type>/<id>/events
//	list types       esjet.<ns>.types                       GET  /v1/types
//
// Where it sits: a client (HTTP, NATS, `esjet send`, the root package's
// Node.Send) → api → internal/aggregate (Decide, the repository) →
// internal/streams (the EVENTS stream). Outcomes do not come this way: the
// workers report them on the repository's own path
// (aggregate.Repository.HandleOutcome), and an outcome kind sent here is
// refused 403 outcome_not_sendable. The API owns its
// route words: no aggregate type or command kind may be one of
// [RouteWords], and [New] refuses a registry that uses one.
//
// Ingest limits (limits.go): a body must be UTF-8, nest JSON at most
// [DefaultMaxDepth] levels and give no key twice in one object
// (jsonbody.go); trace headers are capped ([MaxMetaLen]) and a
// traceparent must be W3C. History reads are paged ([Page], at most [MaxPageLimit] events, a
// next_after cursor). On NATS every subject under esjet.<ns>.> is answered,
// as HTTP answers every path: see [Service.StartMicro].
//
// The HTTP listener's boundary is [Guard] (guard.go, httpauth.go), in
// front of the API, the console and /metrics alike: the Host allow-list,
// cross-origin writes refused, writes only as application/json, and with
// credentials the roles of [Permits] (client, operator, admin, as on NATS).
//
// A command's body is its JSON payload; the Idempotency-Key header makes a
// retry safe. Errors carry a status (400 bad input, 403 an outcome kind or
// a raw command kind the type may not issue, 404 unknown type, route or
// aggregate, 405 wrong method, 409 conflict or reused key, 413 too large,
// 422 domain rejection, 500 infrastructure, 503 unavailable or outcome
// unknown, 507 storage full), a machine-readable code and a
// message, as {"error": {"code", "message"}} on both surfaces. A domain
// rejection with code "not_found" (a command that needs an existing
// aggregate, sent to one that does not exist) is answered 404. The codes
// are constants (codes.go) and one table maps every error to its status
// and code ([ErrorOf], errtable.go), for the views and the console as well.
// The API's subjects and headers are package wire's.
package api
