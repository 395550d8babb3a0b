package api

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/esjet/esjet/internal/wire"
)

// LogPage is one page of the whole log (every aggregate of the namespace)
// in global order: the events after the position asked for.
type LogPage struct {
	Events []LogEvent `json:"events"`
	// Next is the position to resume after (pass it as after): the last
	// event's, or further when the page stepped over messages that are not
	// esjet decisions. Equal to the after asked for when nothing follows yet.
	Next uint64 `json:"next"`
}

// LogEvent is one event of the log with its global position.
type LogEvent struct {
	Position uint64 `json:"position"`
	Seq      uint64 `json:"seq"`
	// Index is the event's place in its decision (position = seq × 10000
	// + index); Stored is when the server stored the decision.
	Index         int       `json:"index"`
	AggregateType string    `json:"aggregate_type"`
	AggregateID   string    `json:"aggregate_id"`
	ID            string    `json:"id"`
	Type          string    `json:"type"`
	Schema        int       `json:"schema"`
	Version       uint64    `json:"version"`
	Time          time.Time `json:"time"`
	DecisionID    string    `json:"decision_id"`
	Stored        time.Time `json:"stored"`
	Data          any       `json:"data,omitempty"`
}

// Header of a NATS log read (HTTP: ?after=P&limit=N); a JSON body
// {"after": P, "limit": N} says the same.
const HeaderAfterPosition = wire.HeaderAfterPosition

// ReadLog returns at most p.Limit events of the whole log after global
// position p.After (0: from the first event).
func (s *Service) ReadLog(ctx context.Context, p Page) (LogPage, error) {
	if p.Limit == 0 {
		p.Limit = DefaultPageLimit
	}
	if p.Limit < 1 || p.Limit > MaxPageLimit {
		return LogPage{}, &Error{Status: 400, Code: CodeBadRequest,
			Message: fmt.Sprintf("limit must be 1 to %d events, got %d", MaxPageLimit, p.Limit)}
	}
	evs, next, err := s.repo.Log().ReadAfter(ctx, p.After, p.Limit)
	if err != nil {
		return LogPage{}, err
	}
	page := LogPage{Events: make([]LogEvent, len(evs)), Next: next}
	for i, e := range evs {
		page.Events[i] = LogEvent{Position: e.Position, Seq: e.Seq, Index: e.Index, AggregateType: e.AggregateType, AggregateID: e.AggregateID,
			ID: e.ID, Type: e.Type, Schema: e.Schema, Version: e.Version, Time: e.Time, DecisionID: e.DecisionID, Stored: e.Stored, Data: rawJSON(e.Data)}
	}
	return page, nil
}

// logRoutes adds GET /v1/log?after=P&limit=N.
func (s *Service) logRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/log", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		p, err := parsePage(q.Get("after"), q.Get("limit"), "after", "limit", afterPosition)
		if err != nil {
			s.reply(w, 0, nil, err)
			return
		}
		page, err := s.ReadLog(r.Context(), p)
		s.reply(w, http.StatusOK, page, err)
	})
}
