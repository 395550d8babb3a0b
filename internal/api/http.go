package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
)

// Handler returns the HTTP gateway: the routes in the package doc, JSON in
// and out, errors as {"error": {"code", "message"}} with the status of
// [Error].
func (s *Service) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/types", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, s.Types())
	})
	mux.HandleFunc("POST /v1/{type}/{id}/{command}", func(w http.ResponseWriter, r *http.Request) {
		body, ok := s.readBody(w, r)
		if !ok {
			return
		}
		res, err := s.Send(r.Context(), r.PathValue("type"), r.PathValue("id"), r.PathValue("command"), body, httpMeta(r))
		s.reply(w, http.StatusOK, res, err)
	})
	mux.HandleFunc("GET /v1/{type}/{id}", func(w http.ResponseWriter, r *http.Request) {
		st, err := s.State(r.Context(), r.PathValue("type"), r.PathValue("id"))
		s.reply(w, http.StatusOK, st, err)
	})
	mux.HandleFunc("GET /v1/{type}/{id}/events", func(w http.ResponseWriter, r *http.Request) {
		s.events(w, r, true)
	})
	mux.HandleFunc("POST /v1/raw/{type}/{id}/events", func(w http.ResponseWriter, r *http.Request) {
		body, ok := s.readBody(w, r)
		if !ok {
			return
		}
		res, err := s.AppendRaw(r.Context(), r.PathValue("type"), r.PathValue("id"), body, httpMeta(r))
		s.reply(w, http.StatusOK, res, err)
	})
	mux.HandleFunc("GET /v1/raw/{type}/{id}/events", func(w http.ResponseWriter, r *http.Request) {
		s.events(w, r, false)
	})
	return mux
}

func (s *Service) events(w http.ResponseWriter, r *http.Request, typed bool) {
	var after uint64
	if a := r.URL.Query().Get("after"); a != "" {
		v, err := strconv.ParseUint(a, 10, 64)
		if err != nil {
			s.reply(w, 0, nil, &Error{Status: 400, Code: "bad_request", Message: "after must be a version number, got " + strconv.Quote(a)})
			return
		}
		after = v
	}
	h, err := s.Events(r.Context(), r.PathValue("type"), r.PathValue("id"), after, typed)
	s.reply(w, http.StatusOK, h, err)
}

// readBody reads at most maxBody bytes; a larger body is answered 413.
func (s *Service) readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, int64(s.maxBody)))
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		s.reply(w, 0, nil, tooLarge(int(r.ContentLength), s.maxBody))
		return nil, false
	}
	if err != nil {
		s.reply(w, 0, nil, &Error{Status: 400, Code: "bad_request", Message: "read body: " + err.Error()})
		return nil, false
	}
	return body, true
}

func httpMeta(r *http.Request) Meta {
	return Meta{
		IdempotencyKey: r.Header.Get(HeaderIdempotencyKey),
		CorrelationID:  r.Header.Get(HeaderCorrelationID),
		CausationID:    r.Header.Get(HeaderCausationID),
		TraceParent:    r.Header.Get(HeaderTraceParent),
	}
}

func (s *Service) reply(w http.ResponseWriter, status int, v any, err error) {
	if err != nil {
		ae := toError(err)
		if ae.Status >= 500 {
			s.logger.Error("request failed", "error", err)
		}
		writeJSON(w, ae.Status, map[string]any{"error": ae})
		return
	}
	writeJSON(w, status, v)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// decodeStrict decodes one JSON value, refusing unknown fields and trailing
// data.
func decodeStrict(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data after the JSON value")
	}
	return nil
}

// rawJSON keeps stored JSON as it is in responses (nil when empty).
func rawJSON(b []byte) any {
	if len(b) == 0 {
		return nil
	}
	return json.RawMessage(b)
}
