package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// TestConsoleInABrowser drives the web console in headless Chromium through
// the demo, with the keyboard: it opens a trip's timeline before the trip
// exists, sends the trip and watches the page follow the saga to confirmed
// without a reload; sends an Atlantis trip and sees its book_flight die and
// the trip compensate; opens the dead letter, whose retry is refused (the
// trip was told book_flight_failed), re-drives it anyway after a second
// confirmation, sees it die again ("no seats": Atlantis has none), and
// discards that letter with a reason. Every retry and discard leaves an
// audit record naming the console. Each view's text must meet WCAG AA
// contrast and focus must be visible. Screenshots go to
// $ESJET_CONSOLE_SCREENSHOTS (the README's are made with
// ESJET_CONSOLE_SCREENSHOTS=$PWD/docs/console), else a temporary directory.
func TestConsoleInABrowser(t *testing.T) {
	t.Parallel()
	chromium := findChromium(t)
	shots := os.Getenv("ESJET_CONSOLE_SCREENSHOTS")
	if shots == "" {
		shots = t.TempDir()
	}
	dir := t.TempDir()
	n := startNodeEnv(t, dir, []string{"ESJET_CONSOLE_ALLOW_ACTIONS=true"})
	base := "http://" + n.httpAddr

	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 960))
	actx, cancelAlloc := chromedp.NewExecAllocator(t.Context(), opts...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(actx)
	defer cancelBrowser()
	ctx, cancel := context.WithTimeout(bctx, 2*time.Minute)
	defer cancel()
	b := &browser{t: t, ctx: ctx, shots: shots}
	// An uncaught exception or a rejected promise in the page fails the test.
	var mu sync.Mutex
	var exceptions []string
	messages := chromedp.Console(ctx)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.IsException() {
				mu.Lock()
				exceptions = append(exceptions, m.String())
				mu.Unlock()
			}
		}
	}()
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		if len(exceptions) > 0 {
			t.Errorf("the page threw:\n%s", strings.Join(exceptions, "\n"))
		}
	}()

	// The overview answers before anything happened.
	b.do(chromedp.Navigate(base+"/console/"), chromedp.WaitVisible(chromedp.CSS("#streams")))
	b.waitText("#namespace", "namespace demo")

	// A trip's timeline, opened before the trip exists, follows the saga.
	b.do(chromedp.Navigate(base + "/console/#/aggregates/trip/t1"))
	b.waitJS(`document.querySelector("main .notice.bad") !== null`, "the not-found notice for trip t1")
	if code, body := post(t, base+"/v1/trip/t1/request_trip",
		`{"traveler":"ada","destination":"Lisbon","budget":100000,"flight_price":40000,"hotel_price":30000}`, nil); code != 200 {
		t.Fatalf("request_trip t1: %d %s", code, body)
	}
	b.waitText("#state-status", "confirmed")
	b.waitJS(`document.querySelectorAll("[data-fate]").length === 3 && document.querySelectorAll("[data-fate=done]").length === 3`,
		"lock_budget, book_flight and book_hotel done")
	b.waitJS(`document.querySelectorAll("#timeline .badge.b-ok").length >= 6`, "the three outcomes back, done")
	b.accessible("timeline")
	b.screenshot("timeline.png")

	// An Atlantis trip: book_flight dies, the trip compensates.
	b.do(chromedp.Navigate(base + "/console/#/aggregates/trip/t2"))
	if code, body := post(t, base+"/v1/trip/t2/request_trip",
		`{"traveler":"bob","destination":"Atlantis","budget":100000,"flight_price":40000,"hotel_price":30000}`, nil); code != 200 {
		t.Fatalf("request_trip t2: %d %s", code, body)
	}
	b.waitText("#state-status", "cancelled")
	b.waitJS(`(() => { const r = document.querySelector("[data-command='trip:t2:2:0'] [data-fate]"); return r && r.dataset.fate === "dead"; })()`,
		"book_flight of t2 dead")
	b.waitJS(`document.querySelectorAll("[data-fate=done]").length === 4`, "lock_budget, book_hotel, release_budget and cancel_hotel done")
	b.screenshot("compensated.png")

	// To the dead letter with the keyboard: its link on the timeline.
	b.keyTo(`#timeline a[href^="#/dlq/"]`)
	b.waitJS(`location.hash.startsWith("#/dlq/") && document.querySelector("#retry") !== null`, "the dead letter's page")
	first := b.evalString(`location.hash.slice("#/dlq/".length)`)
	b.waitText("#letter", "no seats")

	// Retry: refused, because the trip was told it failed and compensated.
	b.keyTo("#retry")
	b.waitJS(`document.getElementById("confirm").open`, "the confirmation dialog")
	b.keyTo("#confirm-ok")
	b.waitText("#refused", "was already told book_flight_failed")
	b.accessible("refused retry")
	b.screenshot("dlq-refused.png")

	// Retry anyway (the button has focus): re-driven, it dies again.
	if id := b.evalString(`document.activeElement.id`); id != "retry-anyway" {
		t.Fatalf("focus after the refusal is on %q, want the retry-anyway button", id)
	}
	b.do(chromedp.KeyEvent(kb.Enter))
	b.waitJS(`document.getElementById("confirm").open`, "the second confirmation")
	b.keyTo("#confirm-ok")
	b.waitText("#settled", "retried by console at 127.0.0.1")
	b.do(chromedp.Navigate(base + "/console/#/dlq"))
	b.waitJS(fmt.Sprintf(`(() => { const r = document.querySelectorAll("#letters [data-letter]"); return r.length === 1 && r[0].dataset.letter !== %q; })()`, first),
		"the re-driven command's new dead letter")
	b.accessible("dlq")
	b.noNull("the Outbox & DLQ page with a letter")
	b.screenshot("dlq.png")
	b.keyTo(`#letters a[href^="#/dlq/"]`)
	b.waitText("#attempts", "retried by console at 127.0.0.1")
	second := b.evalString(`location.hash.slice("#/dlq/".length)`)
	b.screenshot("dlq-redriven.png")

	// Discard it, with a reason.
	b.keyTo("#discard")
	b.waitJS(`document.getElementById("confirm").open && document.activeElement.id === "confirm-reason"`, "the discard dialog, focus on the reason")
	b.do(chromedp.KeyEvent("Atlantis has no airport"))
	b.keyTo("#confirm-ok")
	b.waitText("#settled", "discarded by console at 127.0.0.1")
	b.do(chromedp.Navigate(base + "/console/#/dlq"))
	b.waitVisible("#no-letters")
	b.noNull("the Outbox & DLQ page without letters")
	b.do(chromedp.Navigate(base + "/console/#/dlq?kind=book_flight"))
	b.waitText("#view-title", "Outbox & DLQ: book_flight")
	b.waitVisible("#no-letters")
	b.noNull("the Outbox & DLQ page of one kind")

	// A page opened by a link, in a new tab, names the namespace too.
	tab, closeTab := chromedp.NewContext(bctx)
	tb := &browser{t: t, ctx: tab, shots: shots}
	tb.do(chromedp.Navigate(base + "/console/#/dlq"))
	tb.waitVisible("#no-letters")
	tb.waitText("#namespace", "namespace demo")
	closeTab()

	// The audit records, as the API (and esjet dlq show) reads them.
	for seq, action := range map[string]string{first: "retried", second: "discarded"} {
		var det struct {
			Settled *struct{ Action, By, Reason string } `json:"settled"`
		}
		if code := getJSON(t, base+"/console/api/dlq/"+seq, &det); code != 200 {
			t.Fatalf("GET dead letter %s: %d", seq, code)
		}
		if det.Settled == nil || det.Settled.Action != action || det.Settled.By != "console at 127.0.0.1" {
			t.Errorf("dead letter %s: settled %+v, want %s by console at 127.0.0.1", seq, det.Settled, action)
		}
	}

	// The timeline says what became of book_flight; the overview shows it all.
	b.do(chromedp.Navigate(base + "/console/#/aggregates/trip/t2"))
	b.waitJS(`(() => { const r = document.querySelector("[data-command='trip:t2:2:0'] [data-fate]"); return r && r.dataset.fate === "discarded"; })()`,
		"book_flight of t2 discarded")
	b.do(chromedp.Navigate(base + "/console/#/overview"))
	b.waitJS(`document.querySelectorAll("#kinds [data-kind]").length === 5`, "the five kinds the two trips issued on the overview")
	b.waitText("#relay", "Unrelayed decisions0")
	// esjet run runs the trip's read models: their lag, caught up.
	b.waitJS(`(() => { const r = [...document.querySelectorAll("#projections tbody tr")];
		return r.length === 2 && r.every(tr => tr.textContent.includes("green") && tr.children[2].textContent === "0"); })()`,
		"the trip's two read models, green and caught up")
	b.accessible("overview")
	b.screenshot("overview.png")

	// Actions are off unless allowed: the node without the setting refuses.
	code, body := post(t, base+"/console/api/dlq/"+second+"/retry", `{}`, map[string]string{"Content-Type": "application/json"})
	if code != http.StatusNotFound || !strings.Contains(string(body), "discarded by console") {
		t.Errorf("retry of a discarded letter: %d %s, want 404 saying it was discarded", code, body)
	}
}

// TestConsoleActionsOffByDefault: a node without console.allow_actions
// serves the console read-only and answers a retry 403, saying how to
// allow it.
func TestConsoleActionsOffByDefault(t *testing.T) {
	t.Parallel()
	n := startNode(t, t.TempDir())
	base := "http://" + n.httpAddr
	var ov struct {
		AllowActions bool `json:"allow_actions"`
	}
	if code := getJSON(t, base+"/console/api/overview", &ov); code != 200 {
		t.Fatalf("GET overview: %d", code)
	}
	if ov.AllowActions {
		t.Fatal("allow_actions is true by default")
	}
	code, body := post(t, base+"/console/api/dlq/1/retry", `{}`, map[string]string{"Content-Type": "application/json"})
	if code != http.StatusForbidden || !strings.Contains(string(body), "console.allow_actions") {
		t.Fatalf("retry with actions off: %d %s, want 403 naming console.allow_actions", code, body)
	}
	resp, err := httpClient.Get(base + "/console")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Request.URL.Path != "/console/" {
		t.Fatalf("GET /console: %d at %s, want 200 at /console/", resp.StatusCode, resp.Request.URL.Path)
	}
}

// findChromium returns the path of Debian's chromium (or another
// Chromium/Chrome on PATH), or fails the test at once in one line saying
// what to install: the browser test never skips, and never installs
// anything itself (an apt-get that cannot reach a mirror took minutes to
// fail; .ci/run installs it before the tests with .ci/install-chromium).
func findChromium(t *testing.T) string {
	t.Helper()
	p, err := chromiumPath()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

var chromiumNames = []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"}

func chromiumPath() (string, error) {
	for _, name := range chromiumNames {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("the console's browser test needs Chromium and finds none on PATH (%s): install Debian's chromium as root (.ci/install-chromium does it), then run the test again",
		strings.Join(chromiumNames, ", "))
}

// Without Chromium the browser test says so in one line, at once.
func TestBrowserTestSaysInOneLineWhenChromiumIsMissing(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := chromiumPath()
	if err == nil || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "install-chromium") {
		t.Fatalf("chromiumPath with no Chromium on PATH = %v; want one line naming .ci/install-chromium", err)
	}
}

// browser runs chromedp actions for a test, failing it on error.
type browser struct {
	t     *testing.T
	ctx   context.Context
	shots string
}

func (b *browser) do(actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if err := chromedp.Do(b.ctx, actions...); err != nil {
		b.t.Fatalf("browser: %v (page: %s)", err, b.pageText())
	}
}

func (b *browser) pageText() string {
	ctx, cancel := context.WithTimeout(b.ctx, 2*time.Second)
	defer cancel()
	s, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`location.hash + " | " + document.body.innerText.slice(0, 1500)`))
	return s
}

// noNull fails the test if the page shows the text "null" (what
// Node.append makes of a null child).
func (b *browser) noNull(view string) {
	b.t.Helper()
	if text := b.evalString(`document.querySelector("main").innerText`); strings.Contains(text, "null") {
		b.t.Errorf("%s shows a literal null:\n%s", view, text)
	}
}

// waitJS waits until expression is true in the page.
func (b *browser) waitJS(expression, what string) {
	b.t.Helper()
	if _, err := chromedp.Run(b.ctx, chromedp.Poll[chromedp.Void](expression,
		chromedp.WithPollingInterval(100*time.Millisecond), chromedp.WithPollingTimeout(30*time.Second))); err != nil {
		b.t.Fatalf("browser: waiting for %s: %v\npage: %s", what, err, b.pageText())
	}
}

// waitText waits until the element selected by css contains text.
func (b *browser) waitText(css, text string) {
	b.t.Helper()
	js, _ := json.Marshal(css)
	want, _ := json.Marshal(text)
	b.waitJS(fmt.Sprintf(`(() => { const e = document.querySelector(%s); return e !== null && e.textContent.includes(%s); })()`, js, want),
		fmt.Sprintf("%s to say %q", css, text))
}

func (b *browser) waitVisible(css string) {
	b.t.Helper()
	b.do(chromedp.WaitVisible(chromedp.CSS(css)))
}

func (b *browser) evalString(expression string) string {
	b.t.Helper()
	s, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](expression))
	if err != nil {
		b.t.Fatalf("browser: %s: %v", expression, err)
	}
	return s
}

// keyTo reaches the control with Tab presses alone and presses Enter on it:
// every action of the console must be reachable from the keyboard, with a
// visible focus ring.
func (b *browser) keyTo(css string) {
	b.t.Helper()
	b.do(chromedp.WaitVisible(chromedp.CSS(css)))
	js, _ := json.Marshal(css)
	target := fmt.Sprintf(`document.activeElement === document.querySelector(%s)`, js)
	for range 200 {
		on, err := chromedp.Run(b.ctx, chromedp.Evaluate[bool](target))
		if err != nil {
			b.t.Fatalf("browser: %v", err)
		}
		if on {
			outline := b.evalString(`getComputedStyle(document.activeElement).outlineStyle`)
			if outline == "none" {
				b.t.Fatalf("focus on %s is not visible (outline-style none)", css)
			}
			b.do(chromedp.KeyEvent(kb.Enter))
			return
		}
		b.do(chromedp.KeyEvent(kb.Tab))
	}
	b.t.Fatalf("200 Tab presses never reached %s: not keyboard-reachable (page: %s)", css, b.pageText())
}

// accessible fails the test for visible text whose contrast with its
// background is below WCAG AA: 4.5:1, or 3:1 for large text.
func (b *browser) accessible(view string) {
	b.t.Helper()
	bad := b.evalString(contrastCheck)
	if bad != "" {
		b.t.Errorf("%s view: text below WCAG AA contrast:\n%s", view, bad)
	}
}

func (b *browser) screenshot(name string) {
	b.t.Helper()
	// The toast of the last action would cover part of the page.
	b.evalString(`document.getElementById("status").textContent = ""`)
	png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.MkdirAll(b.shots, 0o755); err != nil {
		b.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(b.shots, name), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

// contrastCheck lists (one a line) the visible elements with their own text
// whose colour against the first opaque background behind them is below
// WCAG AA.
const contrastCheck = `(() => {
  const rgb = s => (s.match(/[\d.]+/g) || []).map(Number);
  const lin = c => { c /= 255; return c <= 0.03928 ? c / 12.92 : Math.pow((c + 0.055) / 1.055, 2.4); };
  const lum = ([r, g, b]) => 0.2126 * lin(r) + 0.7152 * lin(g) + 0.0722 * lin(b);
  const bgOf = e => {
    for (; e && e.nodeType === 1; e = e.parentElement) {
      const c = rgb(getComputedStyle(e).backgroundColor);
      if (c.length === 3 || (c.length === 4 && c[3] > 0.9)) return c.slice(0, 3);
    }
    return [255, 255, 255];
  };
  const out = [];
  for (const e of document.querySelectorAll("body *")) {
    const own = [...e.childNodes].some(n => n.nodeType === 3 && n.textContent.trim() !== "");
    if (!own || e.getClientRects().length === 0) continue;
    const st = getComputedStyle(e);
    if (st.visibility === "hidden" || st.display === "none") continue;
    const fg = rgb(st.color).slice(0, 3), bg = bgOf(e);
    const [a, b] = [lum(fg), lum(bg)].sort((x, y) => y - x);
    const ratio = (a + 0.05) / (b + 0.05);
    const size = parseFloat(st.fontSize), bold = parseInt(st.fontWeight, 10) >= 700;
    const min = size >= 24 || (bold && size >= 18.66) ? 3 : 4.5;
    if (ratio < min) out.push(e.tagName.toLowerCase() + (e.id ? "#" + e.id : "") + " " + JSON.stringify(e.textContent.trim().slice(0, 40)) + ": " + ratio.toFixed(2) + ":1");
  }
  return out.join("\n");
})()`
