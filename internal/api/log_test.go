package api_test

import (
	"net/http"
	"strconv"
	"testing"
)

type logPage struct {
	Events []struct {
		Position      uint64 `json:"position"`
		Seq           uint64 `json:"seq"`
		Index         *int   `json:"index"`
		Stored        string `json:"stored"`
		AggregateType string `json:"aggregate_type"`
		AggregateID   string `json:"aggregate_id"`
		Type          string `json:"type"`
		Version       uint64 `json:"version"`
	} `json:"events"`
	Next uint64 `json:"next"`
}

// TestEveryEventHasAGlobalPositionOnEveryRead: a result, a history and a
// read of the whole log give each event the same position (seq×10000 +
// index), and reading the log after any position returns exactly the
// events after it, on HTTP and NATS.
func TestEveryEventHasAGlobalPositionOnEveryRead(t *testing.T) {
	t.Parallel()
	e := start(t)
	res := ok[struct {
		Position uint64 `json:"position"`
		Seq      uint64 `json:"seq"`
		Events   []struct {
			Position uint64 `json:"position"`
		} `json:"events"`
	}](t, e.http.RawAppend(t, rawType, "p1", []byte(`{"expected_version":0,"events":[{"type":"a"},{"type":"b"},{"type":"c"}]}`), nil))
	if len(res.Events) != 3 || res.Events[0].Position != res.Seq*10000 || res.Events[2].Position != res.Seq*10000+2 || res.Position != res.Events[2].Position {
		t.Fatalf("append result positions: %+v", res)
	}
	ok[result](t, e.http.RawAppend(t, rawType, "p2", []byte(`{"expected_version":0,"events":[{"type":"d"}]}`), nil))
	h := ok[struct {
		Events []struct {
			Position uint64 `json:"position"`
		} `json:"events"`
	}](t, e.http.RawEvents(t, rawType, "p1"))
	if len(h.Events) != 3 || h.Events[1].Position != res.Seq*10000+1 {
		t.Fatalf("history positions: %+v", h)
	}
	reads := map[string]func(after uint64) reply{
		"http": func(after uint64) reply {
			return e.http.do(t, http.MethodGet, "/v1/log?limit=1000&after="+strconv.FormatUint(after, 10), nil, nil)
		},
		"nats": func(after uint64) reply {
			return e.nats.request(t, "esjet."+ns+".log", nil, http.Header{"Esjet-After-Position": {strconv.FormatUint(after, 10)}})
		},
	}
	for name, read := range reads {
		all := ok[logPage](t, read(0))
		if len(all.Events) < 4 {
			t.Fatalf("%s: whole log holds %d events, want ≥ 4", name, len(all.Events))
		}
		for i, ev := range all.Events {
			// The same fields as Go's Node.ReadLog: index and stored too.
			if ev.Index == nil || ev.Position != ev.Seq*10000+uint64(*ev.Index) || ev.Stored == "" {
				t.Fatalf("%s: event %d: position %d, seq %d, index %v, stored %q", name, i, ev.Position, ev.Seq, ev.Index, ev.Stored)
			}
			if i > 0 && ev.Position <= all.Events[i-1].Position {
				t.Fatalf("%s: position %d after %d", name, ev.Position, all.Events[i-1].Position)
			}
			rest := ok[logPage](t, read(ev.Position))
			if len(rest.Events) != len(all.Events)-i-1 || (len(rest.Events) > 0 && rest.Events[0].Position != all.Events[i+1].Position) {
				t.Fatalf("%s: after %d: %d events, want %d", name, ev.Position, len(rest.Events), len(all.Events)-i-1)
			}
		}
		if end := ok[logPage](t, read(all.Next)); len(end.Events) != 0 || end.Next != all.Next {
			t.Fatalf("%s: after the end: %+v", name, end)
		}
	}
	failed(t, e.http.do(t, http.MethodGet, "/v1/log?after=x", nil, nil), 400, "bad_request")
}
