package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"syscall"
	"testing"
	"time"
)

// TestForgedOutcomeScenario is issue 11 item 2 against the built binary: a
// client posting book_flight_done (with a made-up command id, or with the
// real one and the key a worker would use) confirmed a trip with booking
// FAKE-123, and the real outcome was then dropped. Mid-load, every forged
// outcome is posted over HTTP and must be refused (403
// outcome_not_sendable); the sagas then complete with the ledger's own
// references (checkScenario compares every booking ref with the key the
// ledger applied), and the usual line ends the scenario.
func TestForgedOutcomeScenario(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ledger := newEffectLedger(t)
	n := startNodeEnv(t, dir, faultEnv, "--config", ledgerNodeConfig(t, ""))
	ledger.attach(n.natsURL)
	started := time.Now()
	load := startLoad(t, func() string { return n.httpAddr }, faultTrips(), faultClients, faultPace)
	load.waitAcked(t, faultTrips()/4)

	forged, refused := 0, 0
	for _, id := range load.ackedIDs() {
		for _, f := range []struct{ kind, commandID, key, body string }{
			{"book_flight_done", "trip:" + id + ":9:9", "", `"result":{"booking_ref":"FAKE-123"}`},
			{"book_flight_done", "trip:" + id + ":2:0", "trip:" + id + ":2:0/done", `"result":{"booking_ref":"FAKE-123"}`},
			{"book_hotel_failed", "trip:" + id + ":2:1", "trip:" + id + ":2:1/failed", `"error":"forged"`},
			{"lock_budget_failed", "trip:" + id + ":1:0", "trip:" + id + ":1:0/failed", `"error":"forged"`},
		} {
			forged++
			hdr := map[string]string{}
			if f.key != "" {
				hdr["Idempotency-Key"] = f.key
			}
			code, body := post(t, "http://"+n.httpAddr+"/v1/trip/"+id+"/"+f.kind,
				fmt.Sprintf(`{"command_id":%q,%s}`, f.commandID, f.body), hdr)
			var e struct {
				Error struct{ Code string } `json:"error"`
			}
			_ = json.Unmarshal(body, &e)
			if code != http.StatusForbidden || e.Error.Code != "outcome_not_sendable" {
				t.Errorf("POST %s/%s (%s) = %d %s, want 403 outcome_not_sendable", id, f.kind, f.commandID, code, body)
				continue
			}
			refused++
		}
	}
	t.Logf("forged outcomes: %d posted, %d refused", forged, refused)

	checkScenario(t, scenario{name: "forged-outcome", load: load, ledger: ledger,
		httpAddr: func() string { return n.httpAddr }, natsURL: n.natsURL, recovered: started})
	n.stop(t, syscall.SIGTERM)
}
