package api_test

import (
	"net/http"
	"strings"
	"testing"
)

// The raw type the API tests configure (start): it may issue send_invoice
// only.
const (
	rawType    = "invoice"
	rawCommand = "send_invoice"
)

// TestRawAppend_CommandKindsAreConfiguredPerType is issue 11 item 3: a
// made-up raw type evil issued book_flight and release_budget, and they
// ran. A raw append may issue only the kinds aggregates.raw.<type>.commands
// lists: 403 raw_command_not_allowed naming the kind, the type and the
// setting, and nothing written, on both surfaces.
func TestRawAppend_CommandKindsAreConfiguredPerType(t *testing.T) {
	t.Parallel()
	e := start(t)
	for _, s := range e.surfaces() {
		t.Run(s.Name(), func(t *testing.T) {
			before := e.eventsCount(t)
			for _, c := range []struct{ typ, kind string }{
				{"evil", "book_flight"},
				{"evil", "release_budget"},
				{rawType, "release_budget"}, // a configured type, a kind it may not issue
			} {
				body := `{"expected_version":0,"events":[{"type":"happened"}],"commands":[{"kind":"` + rawCommand + `"},{"kind":"` + c.kind + `","payload":{"amount":1}}]}`
				if c.typ == "evil" {
					body = `{"expected_version":0,"events":[{"type":"happened"}],"commands":[{"kind":"` + c.kind + `","payload":{"amount":1}}]}`
				}
				er := failed(t, s.RawAppend(t, c.typ, "x1-"+s.Name(), []byte(body), nil), http.StatusForbidden, "raw_command_not_allowed")
				for _, want := range []string{c.typ, c.kind, "aggregates.raw." + c.typ + ".commands"} {
					if !strings.Contains(er.Message, want) {
						t.Errorf("%s/%s: message %q does not name %s", c.typ, c.kind, er.Message, want)
					}
				}
			}
			e.wantUnchanged(t, before)
			ok[result](t, s.RawAppend(t, rawType, "x2-"+s.Name(), []byte(`{"expected_version":0,"events":[{"type":"issued"}],"commands":[{"kind":"`+rawCommand+`"}]}`), nil))
		})
	}
}
