package wire

// Headers of an OUTBOX command message. The body is the command's JSON
// payload as recorded; everything else a worker or an operator needs is
// here, readable with `nats stream view`. It also carries the decision's
// HeaderAggregateType, HeaderAggregateID, HeaderCorrelationID,
// HeaderCausationID (the decision id) and HeaderTraceParent.
const (
	HeaderCommandID    = "Esjet-Command-Id"
	HeaderCommandKind  = "Esjet-Command-Kind"
	HeaderVersion      = "Esjet-Aggregate-Version" // version of the issuing decision's last event
	HeaderDecisionID   = "Esjet-Decision-Id"
	HeaderDecisionSeq  = "Esjet-Decision-Seq" // EVENTS sequence of the issuing decision
	HeaderReport       = "Esjet-Report"       // "true": report the outcome to the aggregate
	HeaderDeliverAfter = "Esjet-Deliver-After"
	HeaderIssued       = "Esjet-Issued" // time the decision was stored
	// HeaderPriority is the command's band, high or low (absent: normal);
	// its subject says the same ([BandSubject]).
	HeaderPriority = "Esjet-Priority"
	// HeaderFenceBase is added to the band consumer's delivery sequence to
	// make a delivery's fence: a re-drive sets it to the fence its command
	// died with (or more), so the fence still rises when the command comes
	// back through another band's consumer, whose sequence is its own.
	// Absent: 0.
	HeaderFenceBase = "Esjet-Fence-Base"
	// HeaderCommandSchema is the schema version of the command's payload,
	// written when it is above 1 (absent: 1). A worker that understands
	// only older versions of its kind leaves the command for one that
	// understands it, counting no attempt; targets receive it too.
	HeaderCommandSchema = "Esjet-Command-Schema"

	// JetStream message schedule headers (nats-server 2.12+).
	HeaderSchedule       = "Nats-Schedule"
	HeaderScheduleTarget = "Nats-Schedule-Target"

	// HeaderStreamSource is what nats-server writes on a sourced message:
	// "<source stream>[:<API prefix hash>] <source sequence> …".
	HeaderStreamSource = "Nats-Stream-Source"
)

// Headers every target (NATS request, HTTP POST) receives beside the
// command's identity headers: see [RequestHeader].
const (
	HeaderIdempotencyKey = "Idempotency-Key" // the command id
	HeaderAttempt        = "Esjet-Attempt"   // 1, 2, …
	// HeaderFence is the delivery's fencing token: the worker consumer's
	// delivery sequence, which rises with every delivery of a command (a
	// redelivery after a lost lease or a crash, a nak, a DLQ re-drive). A
	// receiver remembers the highest fence it saw per idempotency key and
	// refuses a lower one: that attempt's worker lost its lease to a newer
	// one. An equal fence is the same attempt asking again.
	HeaderFence = "Esjet-Fence"
)

// Headers a worker adds to a dead letter on <ns>.dlq.<kind>, beside the
// OUTBOX message's own headers.
const (
	HeaderError     = "Esjet-Error"      // the last attempt's error, one line
	HeaderAttempts  = "Esjet-Attempts"   // how many times the handler ran
	HeaderWorker    = "Esjet-Worker"     // the worker (node) that gave up
	HeaderDeadAt    = "Esjet-Dead-At"    // when the worker gave up, RFC 3339 with nanoseconds
	HeaderOutboxSeq = "Esjet-Outbox-Seq" // OUTBOX sequence of the delivered copy
	HeaderDeadFence = "Esjet-Dead-Fence" // the fence of the delivery that gave up (a re-drive's fence base)
)

// HeaderDLQAction is the action (retried, discarded) of an audit record on
// <ns>.dlq.audit.<kind>.
const HeaderDLQAction = "Esjet-Dlq-Action"

// HeaderDLQSeq is the DLQ sequence of the dead letter a settle mark or a
// settled copy stands for.
const HeaderDLQSeq = "Esjet-Dlq-Seq"

// HeaderExpectedPrefix starts every JetStream expectation header
// (Nats-Expected-Last-Subject-Sequence …): sourcing strips them, and a
// message read back from a stream still carries them.
const HeaderExpectedPrefix = "Nats-Expected-"
