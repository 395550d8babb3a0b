package api

import (
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"
)

// What the API refuses at ingest, before anything is decoded or written:
// a body that is not UTF-8, JSON nested deeper than the depth limit (a
// 20 KB value nested 10,000 levels deep costs far more to decode, store and
// serve than its size says), and trace metadata over its length or shape.

// DefaultMaxDepth is the deepest JSON nesting a request body may have
// (objects and arrays, counting the body itself as 1) when [Config.MaxDepth]
// is zero. A raw append's envelope takes 3 levels ({"events":[{"data":…}]}).
const DefaultMaxDepth = 64

// MaxMetaLen caps Esjet-Correlation-Id and Esjet-Causation-Id (and the raw
// append body's correlation_id and causation_id), in characters.
const MaxMetaLen = 256

// checkBody refuses a body that is not UTF-8, nests deeper than maxDepth
// or has a key twice in one object ([checkDuplicateKeys]).
func checkBody(body []byte, maxDepth int) error {
	if !utf8.Valid(body) {
		i := invalidUTF8At(body)
		return &Error{Status: 400, Code: "invalid_utf8",
			Message: fmt.Sprintf("request body is not valid UTF-8 (byte %d); send JSON text encoded as UTF-8", i)}
	}
	if d, over := jsonDepth(body, maxDepth); over {
		return &Error{Status: 400, Code: CodeTooDeep,
			Message: fmt.Sprintf("request body nests JSON more than %d levels deep (it reached %d); flatten the payload", maxDepth, d)}
	}
	return checkDuplicateKeys(body)
}

func invalidUTF8At(b []byte) int {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n == 1 {
			return i
		}
		i += n
	}
	return -1
}

// jsonDepth scans JSON text for its nesting depth, stopping as soon as it
// passes max. It does not validate: the decoders do that afterwards.
func jsonDepth(b []byte, max int) (depth int, over bool) {
	inString, escaped := false, false
	cur := 0
	for _, c := range b {
		if inString {
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '{', '[':
			cur++
			if cur > depth {
				depth = cur
			}
			if cur > max {
				return depth, true
			}
		case '}', ']':
			cur--
		}
	}
	return depth, false
}

// traceParent is a W3C trace context traceparent of version 00.
var traceParent = regexp.MustCompile(`^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$`)

// metaNames are what the caller called each piece of trace metadata: the
// headers, or a raw append body's fields.
type metaNames struct{ correlation, causation, trace string }

var (
	headerNames = metaNames{HeaderCorrelationID, HeaderCausationID, HeaderTraceParent}
	bodyNames   = metaNames{"correlation_id", "causation_id", "traceparent"}
)

// checkMeta refuses trace metadata a log should not carry: over-long ids,
// and a traceparent that is not W3C (all-zero trace or parent ids are
// invalid there too). A message names the header.
func checkMeta(m Meta) error { return checkMetaAs(m, headerNames) }

// checkMetaAs is [checkMeta] naming the metadata as names do.
func checkMetaAs(m Meta, names metaNames) error {
	for _, f := range []struct{ name, v string }{{names.correlation, m.CorrelationID}, {names.causation, m.CausationID}} {
		if n := utf8.RuneCountInString(f.v); n > MaxMetaLen {
			return &Error{Status: 400, Code: CodeInvalidHeader, Message: fmt.Sprintf("%s is %d characters, longer than %d", f.name, n, MaxMetaLen)}
		}
		if !utf8.ValidString(f.v) || strings.ContainsAny(f.v, "\r\n\x00") {
			return &Error{Status: 400, Code: CodeInvalidHeader, Message: f.name + " must be UTF-8 text on one line"}
		}
	}
	if tp := m.TraceParent; tp != "" {
		if !traceParent.MatchString(tp) || tp[3:35] == strings.Repeat("0", 32) || tp[36:52] == strings.Repeat("0", 16) {
			shown := tp
			if len(shown) > 64 {
				shown = shown[:64] + "…"
			}
			return &Error{Status: 400, Code: CodeInvalidHeader, Message: fmt.Sprintf(
				"%s %q is not a W3C trace context: want 00-<32 lowercase hex trace id>-<16 lowercase hex parent id>-<2 hex flags>, ids not all zero (55 characters)",
				names.trace, shown)}
		}
	}
	return nil
}
