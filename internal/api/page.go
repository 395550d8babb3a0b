package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
)

// A page's after, its limit: one reading whether they come in a query, in
// headers or in a NATS request's JSON body, and one message naming them as
// the caller wrote them (after, Esjet-After-Version, the body's "after").

// afterUnit says what a page's after counts.
type afterUnit int

const (
	afterVersion  afterUnit = iota // an aggregate's history: its versions
	afterPosition                  // the whole log: global positions
)

// badAfter says what after must be; got is the value as the caller wrote it.
func badAfter(name string, unit afterUnit, got string) error {
	what := "a version: a whole number, 0 or more (the version of the last event read, 0 for the start)"
	if unit == afterPosition {
		what = "a position: a whole number, 0 or more (the position of the last event read, 0 for the start)"
	}
	return &Error{Status: 400, Code: CodeBadRequest, Message: fmt.Sprintf("%s must be %s, got %s", name, what, got)}
}

func badLimit(name, got string) error {
	return &Error{Status: 400, Code: CodeBadRequest, Message: fmt.Sprintf("%s must be 1 to %d events, got %s", name, MaxPageLimit, got)}
}

// parsePage reads after and limit as given in a query or header ("" for
// absent); the names tell the user where each came from.
func parsePage(after, limit, afterName, limitName string, unit afterUnit) (Page, error) {
	var p Page
	if after != "" {
		v, err := strconv.ParseUint(after, 10, 64)
		if err != nil {
			return p, badAfter(afterName, unit, strconv.Quote(after))
		}
		p.After = v
	}
	if limit != "" {
		v, err := strconv.Atoi(limit)
		if err != nil || v < 1 || v > MaxPageLimit {
			return p, badLimit(limitName, strconv.Quote(limit))
		}
		p.Limit = v
	}
	return p, nil
}

// pageBody reads a NATS page request's optional JSON body over p. Its
// values are read as the headers' are, and shown as they were written.
func pageBody(body []byte, p Page, unit afterUnit) (Page, error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return p, nil
	}
	var b struct {
		After json.RawMessage `json:"after"`
		Limit json.RawMessage `json:"limit"`
	}
	if err := decodeStrict(body, &b); err != nil {
		shape := `history request body must be {"after": <version>, "limit": <1-`
		if unit == afterPosition {
			shape = `log request body must be {"after": <position>, "limit": <1-`
		}
		return p, &Error{Status: 400, Code: CodeBadRequest, Message: shape + strconv.Itoa(MaxPageLimit) + `>} or empty: ` + jsonProblem(err, body)}
	}
	if after := string(b.After); after != "" && after != "null" {
		v, err := strconv.ParseUint(after, 10, 64)
		if err != nil {
			return p, badAfter("after", unit, after)
		}
		p.After = v
	}
	if limit := string(b.Limit); limit != "" && limit != "null" {
		v, err := strconv.Atoi(limit)
		if err != nil || v < 1 || v > MaxPageLimit {
			return p, badLimit("limit", limit)
		}
		p.Limit = v
	}
	return p, nil
}
