package api

import (
	"context"
	"fmt"
	"time"

	"github.com/esjet/esjet/internal/aggregate"
	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/wire"
)

// History is one page of an aggregate's stored events and the commands its
// decisions issued, in order.
type History struct {
	AggregateType string `json:"aggregate_type"`
	AggregateID   string `json:"aggregate_id"`
	// Version and Seq are the aggregate's current ones, whatever the page.
	Version  uint64           `json:"version"`
	Seq      uint64           `json:"seq"`
	Events   []HistoryEvent   `json:"events"`
	Commands []HistoryCommand `json:"commands"`
	// NextAfter is the cursor of the next page (pass it as after) when
	// events follow this page; absent on the last page.
	NextAfter uint64 `json:"next_after,omitempty"`
	// Skipped are the messages among this page's that esjet did not write
	// on the aggregate's subject (not decisions): stepped over when
	// loading, kept for ever (the stream denies deletes).
	Skipped []streams.Foreign `json:"skipped,omitempty"`
}

// HistoryEvent is one stored event.
type HistoryEvent struct {
	ID         string    `json:"id"`
	Type       string    `json:"type"`
	Schema     int       `json:"schema"`
	Version    uint64    `json:"version"`
	Time       time.Time `json:"time"`
	Seq        uint64    `json:"seq"`
	Position   uint64    `json:"position"` // global: seq×10000 + index in the decision
	DecisionID string    `json:"decision_id"`
	Data       any       `json:"data,omitempty"`

	// StoredSchema is the schema version the log holds, when upcasters
	// brought the event to Schema (absent: stored as shown).
	StoredSchema int `json:"stored_schema,omitempty"`
}

// HistoryCommand is one recorded command.
type HistoryCommand struct {
	ID           string     `json:"id"`
	Kind         string     `json:"kind"`
	Seq          uint64     `json:"seq"`
	Report       bool       `json:"report,omitempty"`
	DeliverAfter *time.Time `json:"deliver_after,omitempty"`
	Payload      any        `json:"payload,omitempty"`
}

// Page selects part of a history: at most Limit events after version After.
type Page struct {
	After uint64
	// Limit caps the events returned: 1 to [MaxPageLimit]; 0 means
	// [DefaultPageLimit].
	Limit int
}

// History page sizes: a read answers a bounded amount whatever the
// aggregate's length.
const (
	DefaultPageLimit = 100
	MaxPageLimit     = 1000
)

// Header names of a NATS history read (HTTP: ?after=N&limit=N). A JSON body
// {"after": N, "limit": N} says the same.
const (
	HeaderAfterVersion = wire.HeaderAfterVersion
	HeaderLimit        = wire.HeaderLimit
)

// Events returns the aggregate's whole history after version after (0:
// all), for in-process callers; the API's surfaces read it in pages
// ([Service.EventsPage]). requireType demands a registered type.
func (s *Service) Events(ctx context.Context, typ, id string, after uint64, requireType bool) (History, error) {
	return s.history(ctx, typ, id, after, -1, requireType)
}

// EventsPage returns one page of the aggregate's history. It works for any
// type token, registered or raw; requireType demands a registered type (the
// typed routes).
func (s *Service) EventsPage(ctx context.Context, typ, id string, p Page, requireType bool) (History, error) {
	if p.Limit == 0 {
		p.Limit = DefaultPageLimit
	}
	if p.Limit < 1 || p.Limit > MaxPageLimit {
		return History{}, &Error{Status: 400, Code: CodeBadRequest,
			Message: fmt.Sprintf("limit must be 1 to %d events, got %d", MaxPageLimit, p.Limit)}
	}
	return s.history(ctx, typ, id, p.After, p.Limit, requireType)
}

// history reads the events after version after, at most limit (< 0: all).
// A decision's commands are listed with the page that holds its last event.
func (s *Service) history(ctx context.Context, typ, id string, after uint64, limit int, requireType bool) (History, error) {
	if requireType {
		if _, err := s.repo.Registry().Get(typ); err != nil {
			return History{}, err
		}
	}
	// The page costs what it returns plus a bounded seek (streams.LoadPage),
	// whatever the aggregate's length.
	pg, err := s.repo.Log().LoadPage(ctx, typ, id, after, limit)
	if err != nil {
		return History{}, err
	}
	if pg.Now.Seq == 0 {
		return History{}, fmt.Errorf("%w: %s/%s has no events", aggregate.ErrNotFound, typ, id)
	}
	recs, now := pg.Records, pg.Now
	h := History{AggregateType: typ, AggregateID: id, Version: now.Version, Seq: now.Seq,
		Events: []HistoryEvent{}, Commands: []HistoryCommand{}}
	// A page shows the foreign messages after the decision holding version
	// after, and before the one holding its last event (all, on the last page).
	var fromSeq uint64
	skipped := func(toSeq uint64) {
		for _, f := range pg.Foreign {
			if f.Seq > fromSeq && (toSeq == 0 || f.Seq < toSeq) {
				h.Skipped = append(h.Skipped, f)
			}
		}
	}
	for _, r := range recs {
		if r.FirstVersion() <= after {
			fromSeq = r.Seq
		}
		if r.LastVersion() <= after {
			continue
		}
		for i, e := range r.Events {
			if e.Version <= after {
				continue
			}
			if limit >= 0 && len(h.Events) == limit {
				h.NextAfter = h.Events[len(h.Events)-1].Version
				skipped(h.Events[len(h.Events)-1].Seq)
				return h, nil
			}
			h.Events = append(h.Events, HistoryEvent{ID: e.ID, Type: e.Type, Schema: e.Schema, StoredSchema: e.StoredSchema, Version: e.Version,
				Time: e.Time, Seq: r.Seq, Position: r.EventPosition(i), DecisionID: r.ID, Data: rawJSON(e.Data)})
		}
		for _, c := range r.Commands {
			hc := HistoryCommand{ID: c.ID, Kind: c.Kind, Seq: r.Seq, Report: c.Report, Payload: rawJSON(c.Payload)}
			if !c.DeliverAfter.IsZero() {
				t := c.DeliverAfter
				hc.DeliverAfter = &t
			}
			h.Commands = append(h.Commands, hc)
		}
	}
	// The page read stops at its last event when more follow.
	if n := len(h.Events); limit >= 0 && n > 0 && h.Events[n-1].Version < now.Version {
		h.NextAfter = h.Events[n-1].Version
		skipped(h.Events[n-1].Seq)
		return h, nil
	}
	skipped(0)
	return h, nil
}
