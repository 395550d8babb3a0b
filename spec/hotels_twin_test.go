package spec_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/natstest"
)

// hotelsTwin is one language's twin of the demo's hotel supplier
// (clients/ts/examples/hotels.ts, clients/python/examples/hotels.py): the
// command that runs it, given ESJET_NATS_URL and HOTELS_SLOW_MS, and its
// short name: it prints "hotels-<name> ready" once it serves, "effect
// <command id>" when a booking starts, "booked <ref> for <command id>",
// "already booked …" and "cancelled <ref>".
type hotelsTwin struct {
	name string
	argv []string
	env  []string // nil: this process's
}

// twin is a running hotelsTwin.
type twin struct {
	cmd    *exec.Cmd
	mu     sync.Mutex
	lines  []string
	exited chan struct{}
}

func (tw *twin) output() []string {
	tw.mu.Lock()
	defer tw.mu.Unlock()
	return append([]string(nil), tw.lines...)
}

// startTwin runs ht against natsURL and waits for its ready line.
func startTwin(t *testing.T, ht hotelsTwin, natsURL string, slowMs int) *twin {
	t.Helper()
	cmd := exec.Command(ht.argv[0], ht.argv[1:]...)
	env := ht.env
	if env == nil {
		env = os.Environ()
	}
	cmd.Env = append(env, "ESJET_NATS_URL="+natsURL, fmt.Sprintf("HOTELS_SLOW_MS=%d", slowMs))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &natstest.Buffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	tw := &twin{cmd: cmd, exited: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			tw.mu.Lock()
			tw.lines = append(tw.lines, sc.Text())
			tw.mu.Unlock()
		}
	}()
	go func() { _ = cmd.Wait(); close(tw.exited) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-tw.exited })
	natstest.Eventually(t, 30*time.Second, func() bool {
		select {
		case <-tw.exited:
			t.Fatalf("hotels twin exited:\n%s", stderr.String())
		default:
		}
		return strings.Contains(strings.Join(tw.output(), "\n"), "hotels-"+ht.name+" ready")
	})
	return tw
}

// TestTypeScriptHotelsTwinBooksOnceThroughKill9: testHotelsTwin with
// clients/ts/examples/hotels.ts.
func TestTypeScriptHotelsTwinBooksOnceThroughKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds and runs the esjet binary and Node.js")
	}
	nodeBin := requireTypeScript(t)
	dir, _ := filepath.Abs("../clients/ts")
	testHotelsTwin(t, hotelsTwin{name: "ts", argv: []string{nodeBin, filepath.Join(dir, "dist", "examples", "hotels.js")}})
}

// TestPythonHotelsTwinBooksOnceThroughKill9: testHotelsTwin with
// clients/python/examples/hotels.py (on the vendored nats-py).
func TestPythonHotelsTwinBooksOnceThroughKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds and runs the esjet binary and Python")
	}
	py, env := requirePython(t)
	dir, _ := filepath.Abs("../clients/python")
	testHotelsTwin(t, hotelsTwin{name: "py", argv: []string{py, filepath.Join(dir, "examples", "hotels.py")}, env: env})
}

// testHotelsTwin routes the demo trip's hotel commands to the twin ht,
// kills it with SIGKILL while it books, restarts it, and wants the trip
// confirmed with exactly one booking in the hotel's books, the one the trip
// holds; then a trip to Atlantis is compensated: its hotel booking is
// cancelled by the twin.
func testHotelsTwin(t *testing.T, ht hotelsTwin) {
	cfg := filepath.Join(t.TempDir(), "esjet.yaml")
	if err := os.WriteFile(cfg, []byte(`workers:
  book_hotel:   {target: nats, subject: hotels.book, timeout: 2s, backoff_initial: 200ms, backoff_max: 1s}
  cancel_hotel: {target: nats, subject: hotels.cancel, timeout: 2s, backoff_initial: 200ms, backoff_max: 1s}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	n := startNode(t, "--config", cfg)
	nc, err := nats.Connect(n.natsURL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)

	first := startTwin(t, ht, n.natsURL, 5000)
	send := func(id, dest string) {
		body := fmt.Sprintf(`{"traveler":"%s-%s","destination":%q,"budget":100000,"flight_price":40000,"hotel_price":30000}`, ht.name, id, dest)
		resp, err := nc.Request("esjet.demo.trip."+id+".request_trip", []byte(body), 10*time.Second)
		if err != nil || resp.Header.Get("Nats-Service-Error-Code") != "" {
			t.Fatalf("request_trip %s: %v %s", id, err, resp.Data)
		}
	}
	send("h1", "Lisbon")
	// Mid-call: the twin has started the booking (it sleeps before writing it).
	natstest.Eventually(t, 60*time.Second, func() bool {
		return strings.Contains(strings.Join(first.output(), "\n"), "effect trip:h1:")
	})
	_ = first.cmd.Process.Kill()
	<-first.exited
	second := startTwin(t, ht, n.natsURL, 0)

	var state struct {
		State struct {
			Status string `json:"status"`
			Hotel  struct {
				Status     string `json:"status"`
				BookingRef string `json:"booking_ref"`
			} `json:"hotel"`
		} `json:"state"`
	}
	readState := func(id string) {
		resp, err := nc.Request("esjet.demo.trip."+id+".state", nil, 5*time.Second)
		if err == nil {
			state.State.Status, state.State.Hotel.Status, state.State.Hotel.BookingRef = "", "", "" // omitempty: absent fields must not keep the last trip's
			_ = json.Unmarshal(resp.Data, &state)
		}
	}
	natstest.Eventually(t, 90*time.Second, func() bool { readState("h1"); return state.State.Status == "confirmed" })

	booked := regexp.MustCompile(`^booked (HT-\S+) for trip:h1:`)
	var refs []string
	for _, l := range append(first.output(), second.output()...) {
		if m := booked.FindStringSubmatch(l); m != nil {
			refs = append(refs, m[1])
		}
		if strings.HasPrefix(l, "already booked") {
			t.Errorf("the effect ran again for a command already booked: %s", l)
		}
	}
	if len(refs) != 1 || refs[0] != state.State.Hotel.BookingRef {
		t.Fatalf("bookings made %v, the trip holds %q; want exactly the one it holds\nfirst: %v\nsecond: %v", refs, state.State.Hotel.BookingRef, first.output(), second.output())
	}
	ledger, err := js.KeyValue(t.Context(), "hotels_ledger")
	if err != nil {
		t.Fatal(err)
	}
	keys, _ := ledger.Keys(t.Context())
	if len(keys) != 1 {
		t.Fatalf("the hotel's books hold %d bookings (%v), want 1", len(keys), keys)
	}

	// Compensation: no seats to Atlantis. Hotels always have rooms, so the
	// hotel is booked (before or after the flight fails) and then cancelled.
	send("h2", "Atlantis")
	natstest.Eventually(t, 90*time.Second, func() bool {
		readState("h2")
		return state.State.Status == "cancelled" && state.State.Hotel.Status == "cancelled"
	})
	if ref := state.State.Hotel.BookingRef; ref == "" || !strings.Contains(strings.Join(second.output(), "\n"), "cancelled "+ref) {
		t.Fatalf("trip h2's hotel booking %q: the twin did not cancel it: %v", ref, second.output())
	}
	t.Logf("h2 hotel: %+v; twin: %v", state.State.Hotel, second.output())
}
