package e2e

import (
	"encoding/json"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestRawCommandNotAllowedScenario is issue 11 item 3 against the built
// binary: a made-up raw type evil issued book_flight and release_budget
// through the raw API, and they ran. Mid-load, such appends (and one from a
// configured raw type issuing a kind it is not configured for) are refused
// 403 raw_command_not_allowed; nothing is written for them and the ledger
// never sees their commands; the trips complete and the usual line ends
// the scenario.
func TestRawCommandNotAllowedScenario(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ledger := newEffectLedger(t)
	cfg := ledgerNodeConfig(t, "aggregates:\n  raw:\n    invoice:\n      commands: [send_invoice]\n")
	n := startNodeEnv(t, dir, faultEnv, "--config", cfg)
	ledger.attach(n.natsURL)
	started := time.Now()
	load := startLoad(t, func() string { return n.httpAddr }, faultTrips(), faultClients, faultPace)
	load.waitAcked(t, faultTrips()/4)

	for _, c := range []struct{ typ, id, commands string }{
		{"evil", "e1", `[{"kind":"book_flight","payload":{"traveler":"eve","destination":"Lisbon","price":1}}]`},
		{"evil", "e2", `[{"kind":"release_budget","payload":{"traveler":"eve","amount":100000}}]`},
		{"invoice", "i1", `[{"kind":"send_invoice"},{"kind":"release_budget","payload":{"traveler":"eve","amount":100000}}]`},
	} {
		url := "http://" + n.httpAddr + "/v1/raw/" + c.typ + "/" + c.id + "/events"
		code, body := post(t, url, `{"expected_version":0,"events":[{"type":"happened"}],"commands":`+c.commands+`}`, nil)
		var e struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		_ = json.Unmarshal(body, &e)
		if code != http.StatusForbidden || e.Error.Code != "raw_command_not_allowed" || !strings.Contains(e.Error.Message, "aggregates.raw."+c.typ+".commands") {
			t.Errorf("raw append to %s/%s issuing %s = %d %s, want 403 raw_command_not_allowed saying what to configure", c.typ, c.id, c.commands, code, body)
		}
		var h json.RawMessage
		if code := getJSON(t, url, &h); code != http.StatusNotFound {
			t.Errorf("GET %s = %d %s after the refused append, want 404: nothing written", url, code, h)
		}
	}

	checkScenario(t, scenario{name: "raw-command-not-allowed", load: load, ledger: ledger,
		httpAddr: func() string { return n.httpAddr }, natsURL: n.natsURL, recovered: started})
	ledger.mu.Lock()
	for key := range ledger.deliveries {
		if !strings.HasPrefix(key, "trip:") {
			t.Errorf("the ledger received command %s: a refused raw append's command ran", key)
		}
	}
	ledger.mu.Unlock()
	n.stop(t, syscall.SIGTERM)
}
