package outbox

import (
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/streams"
)

// Headers of an OUTBOX message. The body is the command's JSON payload as
// recorded; everything else a worker or an operator needs is here.
const (
	HeaderCommandID     = "Esjet-Command-Id"
	HeaderCommandKind   = "Esjet-Command-Kind"
	HeaderAggregateType = streams.HeaderAggregateType
	HeaderAggregateID   = streams.HeaderAggregateID
	HeaderVersion       = "Esjet-Aggregate-Version" // version of the issuing decision's last event
	HeaderDecisionID    = "Esjet-Decision-Id"
	HeaderDecisionSeq   = "Esjet-Decision-Seq" // EVENTS sequence of the issuing decision
	HeaderReport        = "Esjet-Report"       // "true": report the outcome to the aggregate
	HeaderDeliverAfter  = "Esjet-Deliver-After"
	HeaderIssued        = "Esjet-Issued" // time the decision was stored
	HeaderCorrelationID = streams.HeaderCorrelationID
	HeaderCausationID   = streams.HeaderCausationID // the decision id
	HeaderTraceParent   = streams.HeaderTraceParent

	// JetStream message schedule headers (nats-server 2.12+).
	headerSchedule       = "Nats-Schedule"
	headerScheduleTarget = "Nats-Schedule-Target"
)

// CommandSubject is where commands of kind are consumed.
func CommandSubject(ns, kind string) string { return ns + ".outbox." + kind }

// ScheduleSubject is the subject of a delayed command's schedule message:
// unique per command, so one schedule never replaces another.
func ScheduleSubject(ns, kind, commandID string) string {
	return ns + ".schedule." + kind + "." + strings.ReplaceAll(commandID, ":", ".")
}

// commandMsg builds the OUTBOX message for command c of record rec. A
// command due later than now+1s becomes a schedule message.
func commandMsg(ns string, rec streams.Record, c streams.Command, now time.Time) *nats.Msg {
	target := CommandSubject(ns, c.Kind)
	// Keys are assigned directly, not through Header.Set: they are already
	// in canonical form, and canonicalising 12 keys per command showed in
	// the relay's profile.
	h := make(nats.Header, 16)
	m := &nats.Msg{Subject: target, Header: h, Data: c.Payload}
	set := func(k, v string) { h[k] = []string{v} }
	set(jetstream.MsgIDHeader, c.ID)
	set("Content-Type", "application/json")
	set(HeaderCommandID, c.ID)
	set(HeaderCommandKind, c.Kind)
	set(HeaderAggregateType, rec.AggregateType)
	set(HeaderAggregateID, rec.AggregateID)
	set(HeaderVersion, strconv.FormatUint(rec.LastVersion(), 10))
	set(HeaderDecisionID, rec.ID)
	set(HeaderDecisionSeq, strconv.FormatUint(rec.Seq, 10))
	set(HeaderReport, strconv.FormatBool(c.Report))
	set(HeaderCausationID, rec.ID)
	if !rec.Stored.IsZero() {
		set(HeaderIssued, rec.Stored.UTC().Format(time.RFC3339Nano))
	}
	if rec.CorrelationID != "" {
		set(HeaderCorrelationID, rec.CorrelationID)
	}
	if rec.TraceParent != "" {
		h.Set(HeaderTraceParent, rec.TraceParent) // not canonical as written: let Set store it as Get will look it up
	}
	if !c.DeliverAfter.IsZero() {
		set(HeaderDeliverAfter, c.DeliverAfter.UTC().Format(time.RFC3339Nano))
		if c.DeliverAfter.After(now.Add(time.Second)) {
			m.Subject = ScheduleSubject(ns, c.Kind, c.ID)
			// @at has second resolution: round up so it never fires early.
			at := c.DeliverAfter.UTC().Truncate(time.Second)
			if at.Before(c.DeliverAfter) {
				at = at.Add(time.Second)
			}
			set(headerSchedule, "@at "+at.Format(time.RFC3339))
			set(headerScheduleTarget, target)
		}
	}
	return m
}
