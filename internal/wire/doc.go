// Package wire is the leaf that owns every name and byte esjet puts on
// JetStream: what one package writes and another reads, so that they meet
// only on JetStream. It imports nothing of esjet; every other package may
// import it.
//
// It owns, with encode and decode side by side:
//   - the decision's types ([Decision], [Event], [Command], [Record],
//     [Position]), its headers ([HeaderEnvelope] …) and envelope version;
//   - the rule every subject token obeys ([ValidateToken]), and an
//     aggregate validated once where a request comes in ([AggregateRef],
//     made by [NewAggregateRef], its subject [Names.SubjectOf]);
//   - global positions ([EventPosition], [SplitPosition], [EndOfSeq],
//     [ResumeSeq]) and the positioned [LogEvent];
//   - the command message on <ns>.outbox.<kind> (or its schedule on
//     <ns>.schedule.<kind>.<command id with dots>): [EncodeCommand] and
//     [DecodeCommand], and the headers a target receives ([RequestHeader]);
//   - the command id <type>:<id>:<version>:<index> ([CommandID] builds it,
//     [ParseCommandID] reads it);
//   - the receipt a worker records in KV <ns>_receipts ([Receipt],
//     [ReceiptKey] and its inverse [CommandIDFromKey]);
//   - the dead letter on <ns>.dlq.<kind> ([DeadLetterMsg],
//     [DecodeDeadLetter]) and the re-driven copy ([RedriveMsg]);
//   - the outcome reported back to the issuing aggregate ([Outcome],
//     [DoneKind], [FailedKind]) and its idempotency key ([DoneKey],
//     [FailedKey], read back by [ParseOutcomeKey]) and the id of the
//     decision recording it ([OutcomeDecisionID]; [OutcomeOf] tells that
//     decision from a client's command with the same key); the report a
//     worker hands its feedback, which an edge hub also puts on OUTCOMES
//     ([Report], [DecodeReport]), and its final refusal ([ErrReportRefused]);
//   - the header names, the subjects and the workers' consumer names.
//
// It does no I/O: internal/streams encodes, appends and reads decisions.
//
// Data flow: internal/streams (EVENTS) → internal/outbox (relay, encodes) →
// OUTBOX → internal/consumer (workers, decode; receipts, dead letters,
// outcomes) ← internal/ops (reconcile, DLQ console, inspector, decode).
package wire
