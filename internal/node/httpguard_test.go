package node_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/esjet/esjet/config"
	"github.com/esjet/esjet/internal/natstest"
	"github.com/esjet/esjet/internal/node"
	"github.com/esjet/esjet/internal/ops"
)

// The HTTP listener's boundary (issue 26, item 5), against a real node
// running the trip saga with the demo services (a flight to Atlantis ends
// in the DLQ).

// answer is one HTTP response as the tests read it.
type answer struct {
	status int
	header http.Header
	code   string // the JSON error's code, "" on success
	body   []byte
}

// call sends method url with body and headers h ("Host" sets the Host).
func call(t *testing.T, method, url, body string, h map[string]string) answer {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range h {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var e struct {
		Error struct{ Code string } `json:"error"`
	}
	_ = json.Unmarshal(b, &e)
	return answer{status: resp.StatusCode, header: resp.Header, code: e.Error.Code, body: b}
}

func (a answer) want(t *testing.T, what string, status int, code string) {
	t.Helper()
	if a.status != status || a.code != code {
		t.Errorf("%s: %d %s, want %d %s", what, a.status, a.body, status, code)
	}
}

var jsonCT = map[string]string{"Content-Type": "application/json"}

func with(h map[string]string, kv ...string) map[string]string {
	out := map[string]string{}
	for k, v := range h {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i]] = kv[i+1]
	}
	return out
}

// eventCount is the number of decisions in the node's log.
func eventCount(t *testing.T, n *node.Node) uint64 {
	t.Helper()
	s, err := n.JetStream().Stream(t.Context(), "TEL_EVENTS")
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

// deadLetter sends a trip to Atlantis with headers h, waits for its
// flight to reach the DLQ and returns its DLQ sequence.
func deadLetter(t *testing.T, n *node.Node, id string, h map[string]string) string {
	t.Helper()
	call(t, "POST", "http://"+n.HTTPAddr()+"/v1/trip/"+id+"/request_trip", atlantis, with(jsonCT, pairs(h)...)).want(t, "trip "+id, 200, "")
	dlq := ops.OpenDLQ(n.JetStream(), "tel")
	var seq string
	natstest.Eventually(t, 15*time.Second, func() bool {
		dl, err := dlq.Get(t.Context(), "trip:"+id+":2:0")
		seq = strconv.FormatUint(dl.Seq, 10)
		return err == nil
	})
	return seq
}

// settledBy is who settled the dead letter at seq ("" while it is one).
func settledBy(t *testing.T, n *node.Node, seq string) string {
	t.Helper()
	det, err := ops.OpenDLQ(n.JetStream(), "tel").Show(t.Context(), seq)
	if err != nil {
		t.Fatal(err)
	}
	if det.Settled == nil {
		return ""
	}
	return det.Settled.By
}

// Without auth (the quickstart): a write in another content type, from
// another origin or to another Host is refused and writes nothing; reads
// and probes still answer; every response carries the browser headers.
func TestHTTPGuard_RefusesWhatABrowserPageCouldSendWithoutAuth(t *testing.T) {
	t.Parallel()
	n := tripNode(t, tripOptions{edit: func(c *config.Config) { c.Console.AllowActions = true }})
	base := "http://" + n.HTTPAddr()
	cmd := base + "/v1/trip/g1/request_trip"

	before := eventCount(t, n)
	call(t, "POST", cmd, lisbon, map[string]string{"Content-Type": "text/plain"}).want(t, "text/plain command", 415, "unsupported_media_type")
	call(t, "POST", cmd, lisbon, nil).want(t, "command without a content type", 415, "unsupported_media_type")
	call(t, "POST", base+"/v1/raw/invoice/g1/events", `{"events":[{"type":"x"}]}`, map[string]string{"Content-Type": "application/x-www-form-urlencoded"}).
		want(t, "form-encoded raw append", 415, "unsupported_media_type")
	call(t, "POST", base+"/v1/multi", `{"commands":[]}`, map[string]string{"Content-Type": "multipart/form-data; boundary=x"}).
		want(t, "multipart multi", 415, "unsupported_media_type")
	call(t, "POST", cmd, lisbon, with(jsonCT, "Origin", "http://evil.example")).want(t, "command from http://evil.example", 403, "cross_origin")
	call(t, "POST", cmd, lisbon, with(jsonCT, "Origin", "null")).want(t, "command from an opaque origin", 403, "cross_origin")
	call(t, "POST", cmd, lisbon, with(jsonCT, "Sec-Fetch-Site", "cross-site")).want(t, "command with Sec-Fetch-Site cross-site", 403, "cross_origin")
	call(t, "POST", cmd, lisbon, with(jsonCT, "Host", "rebind.attacker.example")).want(t, "command to a rebound Host", 403, "host_not_allowed")
	if got := eventCount(t, n); got != before {
		t.Fatalf("the log holds %d decisions, want %d: a refused request wrote", got, before)
	}
	if _, err := n.Repository().Get(t.Context(), "trip", "g1"); err == nil {
		t.Fatal("trip g1 exists after refused requests")
	}
	// The node's own page, and clients that are not browsers, get through.
	call(t, "POST", cmd, lisbon, with(jsonCT, "Origin", base, "Sec-Fetch-Site", "same-origin")).want(t, "same-origin command", 200, "")
	call(t, "POST", base+"/v1/trip/g2/request_trip", lisbon, map[string]string{"Content-Type": "application/json; charset=utf-8"}).want(t, "JSON with a charset", 200, "")

	// DNS rebinding against the console's write action: refused, the
	// letter stays a dead letter.
	seq := deadLetter(t, n, "g3", nil)
	action := base + "/console/api/dlq/" + seq + "/discard"
	call(t, "POST", action, `{"reason":"rebound"}`, with(jsonCT, "Host", "rebind.attacker.example:"+port(n))).want(t, "console discard to a rebound Host", 403, "host_not_allowed")
	call(t, "POST", action, `{"reason":"cross"}`, with(jsonCT, "Origin", "http://evil.example")).want(t, "console discard from another origin", 403, "cross_origin")
	call(t, "POST", action, `{"reason":"form"}`, map[string]string{"Content-Type": "text/plain"}).want(t, "console discard as text/plain", 415, "unsupported_media_type")
	if by := settledBy(t, n, seq); by != "" {
		t.Fatalf("dead letter %s settled by %q after refused actions", seq, by)
	}
	call(t, "GET", base+"/v1/types", "", map[string]string{"Host": "rebind.attacker.example"}).want(t, "a read to a rebound Host", 403, "host_not_allowed")
	call(t, "GET", base+"/healthz", "", map[string]string{"Host": "10.1.2.3:8080"}).want(t, "/healthz by a pod IP", 200, "")
	call(t, "GET", base+"/readyz", "", map[string]string{"Host": "10.1.2.3:8080"}).want(t, "/readyz by a pod IP", 200, "")
	for _, host := range []string{"localhost:" + port(n), "LOCALHOST", "[::1]:9", "127.0.0.1"} {
		call(t, "GET", base+"/v1/types", "", map[string]string{"Host": host}).want(t, "a read to Host "+host, 200, "")
	}
	call(t, "POST", action, `{"reason":"test"}`, jsonCT).want(t, "console discard from a local client", 200, "")
	if by := settledBy(t, n, seq); by != "console at 127.0.0.1" {
		t.Errorf("dead letter %s settled by %q, want console at 127.0.0.1", seq, by)
	}

	// What a browser is told about the console and the API.
	for _, path := range []string{"/console/", "/console/assets/console.js", "/console/api/overview"} {
		a := call(t, "GET", base+path, "", nil)
		csp := a.header.Get("Content-Security-Policy")
		if a.status != 200 || !strings.Contains(csp, "frame-ancestors 'none'") || !strings.Contains(csp, "default-src 'self'") || strings.Contains(csp, "unsafe-inline") ||
			a.header.Get("X-Frame-Options") != "DENY" || a.header.Get("X-Content-Type-Options") != "nosniff" || a.header.Get("Referrer-Policy") != "no-referrer" {
			t.Errorf("GET %s: %d, headers %v; want the console's CSP, X-Frame-Options DENY, nosniff, no-referrer", path, a.status, a.header)
		}
	}
	if a := call(t, "GET", base+"/v1/trip/g1", "", nil); a.header.Get("X-Content-Type-Options") != "nosniff" || !strings.Contains(a.header.Get("Content-Security-Policy"), "frame-ancestors 'none'") {
		t.Errorf("GET /v1/trip/g1: headers %v, want nosniff and frame-ancestors 'none'", a.header)
	}
}

// http.allowed_hosts adds names (any port, or the one given); the
// listener's own specific host is allowed by default.
func TestHTTPGuard_AllowedHosts(t *testing.T) {
	t.Parallel()
	n := tripNode(t, tripOptions{edit: func(c *config.Config) {
		c.HTTP.AllowedHosts = []string{"esjet.example.com", "ops.example.com:8443"}
	}})
	base := "http://" + n.HTTPAddr()
	for host, want := range map[string]int{
		"esjet.example.com": 200, "ESJET.example.com:80": 200, "ops.example.com:8443": 200,
		"ops.example.com": 403, "ops.example.com:9": 403, "example.com": 403, "esjet.example.com.attacker.example": 403,
	} {
		if a := call(t, "GET", base+"/v1/types", "", map[string]string{"Host": host}); a.status != want {
			t.Errorf("Host %s: %d %s, want %d", host, a.status, a.body, want)
		} else if want == 403 && !strings.Contains(string(a.body), "http.allowed_hosts") {
			t.Errorf("Host %s: %s; want the message to name http.allowed_hosts", host, a.body)
		}
	}
}

// tokenFor makes a token and its config entry.
func tokenFor(name, role string) (string, config.HTTPToken) {
	tok := "esjet_test_" + name + "_0123456789abcdef0123456789abcdef"
	sum := sha256.Sum256([]byte(tok))
	return tok, config.HTTPToken{Name: name, Role: role, SHA256: hex.EncodeToString(sum[:])}
}

func bearer(tok string, h map[string]string) map[string]string {
	return with(h, "Authorization", "Bearer "+tok)
}

// With http.auth every route but the probes needs a credential, and the
// roles mean what they mean on NATS: client uses the API, operator reads
// and acts on dead letters but sends no command, admin does all.
func TestHTTPAuth_RolesOnTheAPIAndTheConsole(t *testing.T) {
	t.Parallel()
	app, appCfg := tokenFor("app", config.RoleClient)
	oncall, oncallCfg := tokenFor("oncall", config.RoleOperator)
	root, rootCfg := tokenFor("root", config.RoleAdmin)
	n := tripNode(t, tripOptions{edit: func(c *config.Config) {
		c.Console.AllowActions = true
		c.HTTP.Auth.Tokens = []config.HTTPToken{appCfg, oncallCfg, rootCfg}
	}})
	base := "http://" + n.HTTPAddr()
	cmd := func(id string) string { return base + "/v1/trip/" + id + "/request_trip" }

	// No credential, or a wrong one: 401 with a Bearer challenge.
	before := eventCount(t, n)
	a := call(t, "POST", cmd("a1"), lisbon, jsonCT)
	a.want(t, "command without a token", 401, "unauthorized")
	if !strings.HasPrefix(a.header.Get("WWW-Authenticate"), "Bearer") {
		t.Errorf("401 without WWW-Authenticate: Bearer: %v", a.header)
	}
	call(t, "POST", cmd("a1"), lisbon, bearer("esjet_wrong", jsonCT)).want(t, "command with a wrong token", 401, "unauthorized")
	call(t, "POST", cmd("a1"), lisbon, with(jsonCT, "Authorization", "Basic "+app)).want(t, "a token as Basic", 401, "unauthorized")
	for _, path := range []string{"/v1/types", "/console/", "/console/api/dlq", "/metrics"} {
		call(t, "GET", base+path, "", nil).want(t, "GET "+path+" without a token", 401, "unauthorized")
	}
	call(t, "GET", base+"/healthz", "", nil).want(t, "/healthz without a token", 200, "")
	call(t, "GET", base+"/readyz", "", nil).want(t, "/readyz without a token", 200, "")
	// An operator reads but sends no command.
	call(t, "POST", cmd("a1"), lisbon, bearer(oncall, jsonCT)).want(t, "operator sends a command", 403, "forbidden")
	call(t, "POST", base+"/v1/raw/invoice/a1/events", `{"events":[{"type":"x"}]}`, bearer(oncall, jsonCT)).want(t, "operator appends", 403, "forbidden")
	if got := eventCount(t, n); got != before {
		t.Fatalf("the log holds %d decisions, want %d", got, before)
	}

	// A client sends commands and reads the API, not the console.
	call(t, "POST", cmd("a1"), lisbon, bearer(app, jsonCT)).want(t, "client sends a command", 200, "")
	call(t, "GET", base+"/v1/trip/a1", "", bearer(app, nil)).want(t, "client reads state", 200, "")
	call(t, "GET", base+"/console/api/dlq", "", bearer(app, nil)).want(t, "client reads the console", 403, "forbidden")
	call(t, "GET", base+"/metrics", "", bearer(app, nil)).want(t, "client scrapes /metrics", 403, "forbidden")
	seq := deadLetter(t, n, "a2", bearer(app, nil))
	action := base + "/console/api/dlq/" + seq + "/"
	call(t, "POST", action+"discard", `{"reason":"x"}`, bearer(app, jsonCT)).want(t, "client discards a dead letter", 403, "forbidden")
	call(t, "POST", action+"retry", `{}`, bearer(app, jsonCT)).want(t, "client retries a dead letter", 403, "forbidden")
	// A path that reads as /v1/ to the role check but cleans to the
	// console is redirected by the mux, and the redirect is checked again.
	for _, p := range []string{"/v1/../console/api/dlq/" + seq + "/discard", "/v1/..%2Fconsole/api/dlq/" + seq + "/discard"} {
		if a := call(t, "POST", base+p, `{"reason":"x"}`, bearer(app, jsonCT)); a.status == 200 {
			t.Errorf("client POST %s: 200 %s", p, a.body)
		}
	}
	call(t, "GET", base+"/not-a-route", "", bearer(app, nil)).want(t, "client on a path no role is given", 403, "forbidden")
	if by := settledBy(t, n, seq); by != "" {
		t.Fatalf("dead letter %s settled by %q after a client's actions", seq, by)
	}

	// An operator reads everything and acts in the console, under its name.
	call(t, "GET", base+"/v1/trip/a1", "", bearer(oncall, nil)).want(t, "operator reads state", 200, "")
	call(t, "GET", base+"/console/", "", bearer(oncall, nil)).want(t, "operator opens the console", 200, "")
	call(t, "GET", base+"/metrics", "", bearer(oncall, nil)).want(t, "operator scrapes /metrics", 200, "")
	call(t, "POST", action+"discard", `{"reason":"on call"}`, bearer(oncall, jsonCT)).want(t, "operator discards", 200, "")
	if by := settledBy(t, n, seq); by != "http user oncall at 127.0.0.1" {
		t.Errorf("dead letter %s settled by %q, want http user oncall at 127.0.0.1", seq, by)
	}
	// The checks without auth still hold with a token.
	call(t, "POST", cmd("a3"), lisbon, bearer(app, map[string]string{"Content-Type": "text/plain"})).want(t, "client's text/plain command", 415, "unsupported_media_type")
	call(t, "POST", cmd("a3"), lisbon, bearer(app, with(jsonCT, "Origin", "http://evil.example"))).want(t, "client's command from another origin", 403, "cross_origin")

	// An admin does all.
	call(t, "POST", cmd("a4"), lisbon, bearer(root, jsonCT)).want(t, "admin sends a command", 200, "")
	seq = deadLetter(t, n, "a5", bearer(root, nil))
	call(t, "POST", base+"/console/api/dlq/"+seq+"/discard", `{"reason":"admin"}`, bearer(root, jsonCT)).want(t, "admin discards", 200, "")
	if by := settledBy(t, n, seq); by != "http user root at 127.0.0.1" {
		t.Errorf("dead letter %s settled by %q, want http user root at 127.0.0.1", seq, by)
	}
}

// pairs flattens h into with's key, value list.
func pairs(h map[string]string) []string {
	var kv []string
	for k, v := range h {
		kv = append(kv, k, v)
	}
	return kv
}

// port is the node's HTTP port.
func port(n *node.Node) string {
	return n.HTTPAddr()[strings.LastIndex(n.HTTPAddr(), ":")+1:]
}
