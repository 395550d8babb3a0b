package api

// The API's error codes: every surface (NATS, HTTP, the views, the console)
// answers an error with one of these in {"code": …}. Clients branch on
// them, so a code never changes meaning; a new failure gets a new code.
//
// A domain rejection (aggregate.Reject) brings its own code, answered 422
// (404 for [CodeNotFound]).
const (
	CodeActionsDisabled       = "actions_disabled"
	CodeBadPayload            = "bad_payload"
	CodeBadRequest            = "bad_request"
	CodeConflict              = "conflict"
	CodeCrossOrigin           = "cross_origin"
	CodeDeadLetterNotFound    = "dead_letter_not_found"
	CodeDuplicateKey          = "duplicate_key"
	CodeEnvelopeTooNew        = "envelope_too_new" // a newer build wrote the aggregate's log: serve it from one
	CodeForbidden             = "forbidden"
	CodeHostNotAllowed        = "host_not_allowed"
	CodeIdempotencyKeyReused  = "idempotency_key_reused"
	CodeArchived              = "archived"
	CodeInternal              = "internal"
	CodeInvalidEvents         = "invalid_events"
	CodeInvalidHeader         = "invalid_header"
	CodeInvalidIdempotencyKey = "invalid_idempotency_key"
	CodeInvalidToken          = "invalid_token"
	CodeManagedType           = "managed_type"
	CodeMethodNotAllowed      = "method_not_allowed"
	CodeNoRoute               = "no_route"
	CodeNotFound              = "not_found"
	CodeNotYet                = "not_yet"
	CodeOutcomeNotSendable    = "outcome_not_sendable"
	CodeOutcomeUnknown        = "outcome_unknown"
	CodeParked                = "parked"
	CodePastReceipts          = "past_receipts" // a dead letter older than the receipts, with none: retry only when told to
	CodeRawCommandNotAllowed  = "raw_command_not_allowed"
	CodeReportedFailure       = "reported_failure"
	CodeRouteWord             = "route_word"
	CodeSchemaTooNew          = "schema_too_new" // an event's schema version is newer than this node's definition
	CodeStopping              = "stopping"
	CodeStorageFull           = "storage_full"
	CodeTooDeep               = "too_deep"
	CodeTooLarge              = "too_large"
	CodeUnauthorized          = "unauthorized"
	CodeUnavailable           = "unavailable"
	CodeUnknownCommand        = "unknown_command"
	CodeUnknownType           = "unknown_type"
	CodeUnknownView           = "unknown_view"
	CodeOwnStore              = "own_store" // a view kept in the user's own store (a Sink): read it there
	CodeUnsupportedMediaType  = "unsupported_media_type"
	CodeVersionConflict       = "version_conflict"
	CodeViewStopped           = "view_stopped"
	CodeWrongSite             = "wrong_site"
)
