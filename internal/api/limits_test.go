package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/esjet/esjet/demo/trip"
)

// nested is a JSON array nested depth levels deep: 2 bytes a level.
func nested(depth int) string { return strings.Repeat("[", depth) + strings.Repeat("]", depth) }

func rawWith(data string) []byte {
	return []byte(`{"expected_version":0,"events":[{"type":"deep","data":` + data + `}]}`)
}

func TestIngest_DeeplyNestedJSONIsRefusedAndNothingWritten(t *testing.T) {
	t.Parallel()
	e := start(t)
	deep := nested(9990) // the 20 KB event of issue 11 item 8
	if len(deep) < 19_000 {
		t.Fatalf("the nested value is %d bytes", len(deep))
	}
	for _, s := range e.surfaces() {
		for _, tc := range []struct {
			name string
			r    func() reply
		}{
			{"raw event of 20 KB nested 9,990 levels", func() reply { return s.RawAppend(t, "ledger", "deep-"+s.Name(), rawWith(deep), nil) }},
			{"raw event one level over", func() reply { return s.RawAppend(t, "ledger", "deep-"+s.Name(), rawWith(nested(62)), nil) }},
			{"command payload nested deep", func() reply {
				return s.Send(t, trip.Type, "deep-"+s.Name(), trip.KindRequestTrip, []byte(`{"traveler":`+deep+`}`), nil)
			}},
		} {
			before := e.eventsCount(t)
			got := failed(t, tc.r(), 400, "too_deep")
			if !strings.Contains(got.Message, "more than 64 levels deep") {
				t.Errorf("%s %s: message %q does not give the limit", s.Name(), tc.name, got.Message)
			}
			e.wantUnchanged(t, before)
		}
		// At the limit: 3 levels of envelope and 61 of data.
		ok[result](t, s.RawAppend(t, "ledger", "limit-"+s.Name(), rawWith(nested(61)), nil))
	}
}

func TestIngest_InvalidUTF8IsRefused(t *testing.T) {
	t.Parallel()
	e := start(t)
	for _, s := range e.surfaces() {
		before := e.eventsCount(t)
		got := failed(t, s.RawAppend(t, "ledger", "utf8", []byte("{\"expected_version\":0,\"events\":[{\"type\":\"x\",\"data\":\"\xff\xfe\"}]}"), nil), 400, "invalid_utf8")
		if !strings.Contains(got.Message, "byte 52") {
			t.Errorf("%s: %q does not say where", s.Name(), got.Message)
		}
		failed(t, s.Send(t, trip.Type, "utf8", trip.KindRequestTrip, []byte("{\"traveler\":\"\xc3\"}"), nil), 400, "invalid_utf8")
		e.wantUnchanged(t, before)
	}
}

func TestIngest_TraceHeadersAreCappedAndTraceparentIsW3C(t *testing.T) {
	t.Parallel()
	e := start(t)
	const good = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	for _, s := range e.surfaces() {
		for _, tc := range []struct {
			name, header, value, want string
			second                    string // a second value of the header
		}{
			{"correlation id over the cap", "Esjet-Correlation-Id", strings.Repeat("c", 257), "Esjet-Correlation-Id is 257 characters, longer than 256", ""},
			{"causation id over the cap", "Esjet-Causation-Id", strings.Repeat("é", 300), "Esjet-Causation-Id is 300 characters, longer than 256", ""},
			{"huge traceparent", "traceparent", strings.Repeat("f", 8000), "not a W3C trace context", ""},
			{"traceparent of another shape", "traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7", "not a W3C trace context", ""},
			{"traceparent in upper case", "traceparent", strings.ToUpper(good), "not a W3C trace context", ""},
			{"all-zero trace id", "traceparent", "00-00000000000000000000000000000000-00f067aa0ba902b7-01", "ids not all zero", ""},
			{"all-zero parent id", "traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", "ids not all zero", ""},
			{"two traceparents", "traceparent", good, "not a W3C trace context", "garbage"},
		} {
			h := http.Header{tc.header: {tc.value}}
			if tc.second != "" {
				h[tc.header] = append(h[tc.header], tc.second)
			}
			before := e.eventsCount(t)
			got := failed(t, s.Send(t, trip.Type, "meta-"+s.Name(), trip.KindRequestTrip, mustJSON(t, request), h), 400, "invalid_header")
			if !strings.Contains(got.Message, tc.want) {
				t.Errorf("%s %s: %q does not contain %q", s.Name(), tc.name, got.Message, tc.want)
			}
			failed(t, s.RawAppend(t, "ledger", "meta-"+s.Name(), rawWith(`{}`), h), 400, "invalid_header")
			e.wantUnchanged(t, before)
		}
		ok[result](t, s.Send(t, trip.Type, "meta-"+s.Name(), trip.KindRequestTrip, mustJSON(t, request),
			http.Header{"traceparent": {good}, "Esjet-Correlation-Id": {strings.Repeat("c", 256)}}))
	}
	// The raw append body's own fields are held to the same rules.
	failed(t, e.http.RawAppend(t, "ledger", "body-meta",
		[]byte(`{"expected_version":0,"events":[{"type":"x"}],"traceparent":"nope"}`), nil), 400, "invalid_header")
}
