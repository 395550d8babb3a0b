package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// Handler returns the HTTP gateway: the routes in the package doc, JSON in
// and out, errors as {"error": {"code", "message"}} with the status of
// [Error] (a path that matches no route and a wrong method too).
func (s *Service) Handler() http.Handler {
	mux := http.NewServeMux()
	s.routes(mux)
	return s.viewsHandler(JSONErrors(mux))
}

// HTTPRoutes lists the gateway's routes, for the message of a 404.
var HTTPRoutes = []string{
	"POST /v1/<type>/<id>/<command>", "GET /v1/<type>/<id>", "GET /v1/<type>/<id>/events",
	"POST /v1/raw/<type>/<id>/events", "GET /v1/raw/<type>/<id>/events", "GET /v1/types",
	"GET /v1/log", "POST /v1/multi", "GET /v1/views", "GET /v1/views/<name>", "GET /v1/views/<name>/<key>",
}

func (s *Service) routes(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/types", func(w http.ResponseWriter, r *http.Request) {
		WriteJSON(w, http.StatusOK, s.Types())
	})
	s.logRoutes(mux)
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
	s.multiRoutes(mux)
}

// JSONErrors answers what mux itself would answer — 404 for a path no
// route matches, 405 for a method the path does not take — in the API's
// JSON error shape instead of Go's plain text; everything else goes to mux.
func JSONErrors(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h, pattern := mux.Handler(r)
		if pattern != "" {
			mux.ServeHTTP(w, r)
			return
		}
		rec := &statusRecorder{header: http.Header{}}
		h.ServeHTTP(rec, r)
		switch rec.status {
		case http.StatusMethodNotAllowed:
			allow := rec.header.Get("Allow")
			w.Header().Set("Allow", allow)
			writeError(w, &Error{Status: http.StatusMethodNotAllowed, Code: CodeMethodNotAllowed,
				Message: fmt.Sprintf("%s is not allowed on %s; use %s", r.Method, r.URL.Path, allow)})
		case http.StatusNotFound:
			writeError(w, &Error{Status: http.StatusNotFound, Code: CodeNoRoute,
				Message: fmt.Sprintf("no route for %s %s; the routes are: %s", r.Method, r.URL.Path, strings.Join(HTTPRoutes, ", "))})
		default:
			mux.ServeHTTP(w, r) // a redirect or other mux answer
		}
	})
}

// statusRecorder learns the status the mux's own 404/405 handler writes.
type statusRecorder struct {
	header http.Header
	status int
}

func (r *statusRecorder) Header() http.Header { return r.header }
func (r *statusRecorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
}
func (r *statusRecorder) Write(b []byte) (int, error) {
	r.WriteHeader(http.StatusOK)
	return len(b), nil
}

func (s *Service) events(w http.ResponseWriter, r *http.Request, typed bool) {
	q := r.URL.Query()
	p, err := parsePage(q.Get("after"), q.Get("limit"), "after", "limit", afterVersion)
	if err != nil {
		s.reply(w, 0, nil, err)
		return
	}
	h, err := s.EventsPage(r.Context(), r.PathValue("type"), r.PathValue("id"), p, typed)
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
		s.reply(w, 0, nil, &Error{Status: 400, Code: CodeBadRequest, Message: "read body: " + err.Error()})
		return nil, false
	}
	return body, true
}

func httpMeta(r *http.Request) Meta {
	return Meta{
		IdempotencyKey: r.Header.Get(HeaderIdempotencyKey),
		CorrelationID:  r.Header.Get(HeaderCorrelationID),
		CausationID:    r.Header.Get(HeaderCausationID),
		// Two traceparents are invalid (W3C): joined, they fail checkMeta.
		TraceParent: strings.Join(r.Header.Values(HeaderTraceParent), ","),
	}
}

func (s *Service) reply(w http.ResponseWriter, status int, v any, err error) {
	if err != nil {
		ae := toError(err)
		if ae.Status >= 500 {
			s.logger.Error("request failed", "error", err)
		}
		writeError(w, ae)
		return
	}
	WriteJSON(w, status, v)
}

func writeError(w http.ResponseWriter, e *Error) {
	WriteJSON(w, e.Status, map[string]any{"error": e})
}

// WriteJSON answers v as compact JSON (one line: a response's size is its
// data's, never a multiple of it) without HTML escaping ("->" stays "->",
// not "-\u003e").
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = newEncoder(w).Encode(v)
}

// newEncoder is the API's JSON encoder: compact, no HTML escaping.
func newEncoder(w io.Writer) *json.Encoder {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc
}

// marshal is json.Marshal without HTML escaping.
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	if err := newEncoder(&buf).Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
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
