package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"regexp"
	"runtime/debug"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
)

func TestClientCommandsValidateTokensBeforeSending(t *testing.T) {
	// No node runs: a request would fail with "no esjet node serves…".
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"state", "trip", "a.b"}, `invalid aggregate id "a.b": character '.' at 1 is not allowed`},
		{[]string{"events", "tr ip", "t1"}, `invalid aggregate type "tr ip": character ' ' at 2`},
		{[]string{"send", "trip", "t1", "add.note"}, `invalid command kind "add.note"`},
		{[]string{"send", "trip", "t1", "state"}, `use esjet state trip t1`},
		{[]string{"state", "trip", "ééé"}, `character 'é' at 0`},
	} {
		var stdout, stderr bytes.Buffer
		err := run(t.Context(), tc.args, []string{"ESJET_NATS_EMBEDDED_LISTEN=127.0.0.1:1"}, &stdout, &stderr)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("esjet %s: %v, want an error containing %q", strings.Join(tc.args, " "), err, tc.want)
		}
	}
}

func TestMistypedSubcommandSuggestsTheRightOne(t *testing.T) {
	var stdout, stderr bytes.Buffer
	err := run(t.Context(), []string{"strems"}, nil, &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), `unknown command "strems" for "esjet"; did you mean streams?`) {
		t.Fatalf("esjet strems: %v, want a suggestion of streams", err)
	}
	if err := run(t.Context(), []string{"xyzzy"}, nil, &stdout, &stderr); err == nil || strings.Contains(err.Error(), "did you mean") {
		t.Fatalf("esjet xyzzy: %v, want an unknown command without a suggestion", err)
	}
	// A command that only groups others refuses a word that is none of
	// them (it printed its help and exited 0).
	if err := run(t.Context(), []string{"dlq", "sho"}, nil, &stdout, &stderr); err == nil || !strings.Contains(err.Error(), `unknown command "sho" for "esjet dlq"; did you mean show?`) {
		t.Fatalf("esjet dlq sho: %v, want a suggestion of show", err)
	}
	if err := run(t.Context(), []string{"projections", "nosuch"}, nil, &stdout, &stderr); err == nil || !strings.Contains(err.Error(), `unknown command "nosuch" for "esjet projections"`) {
		t.Fatalf("esjet projections nosuch: %v, want an unknown command", err)
	}
	if err := run(t.Context(), []string{"dlq"}, nil, &stdout, &stderr); err != nil {
		t.Fatalf("esjet dlq: %v, want its help", err)
	}
}

func TestClientAgainstARunningNode(t *testing.T) {
	flags := startTestNode(t, "clienttest")
	esjet := func(args ...string) (string, error) {
		var stdout, stderr bytes.Buffer
		err := run(t.Context(), append(args, flags...), nil, &stdout, &stderr)
		return stdout.String(), err
	}
	if _, err := esjet("send", "trip", "nobody", "add_note", `{"text":"hi"}`); err == nil || !strings.HasPrefix(err.Error(), "404 not_found: ") {
		t.Errorf("add_note on a missing trip: %v, want 404 not_found", err)
	}
	if _, err := esjet("send", "trip", "c1", "request_trip", `{"budget":"lots"}`); err == nil ||
		err.Error() != `400 bad_payload: bad command payload: trip.request_trip: field "budget" must be a number, got a string` {
		t.Errorf("bad payload: %v", err)
	}

	// esjet events reads every page.
	if _, err := esjet("send", "trip", "p1", "request_trip", `{"traveler":"ada","destination":"Lisbon","budget":100000,"flight_price":40000,"hotel_price":30000}`); err != nil {
		t.Fatal(err)
	}
	for _, note := range []string{"a", "b", "c", "d"} {
		if _, err := esjet("send", "trip", "p1", "add_note", `{"text":"`+note+`"}`); err != nil {
			t.Fatal(err)
		}
	}
	out, err := esjet("events", "trip", "p1", "--json", "--page-size", "2")
	if err != nil {
		t.Fatal(err)
	}
	var h struct {
		Events []struct {
			Version uint64 `json:"version"`
		} `json:"events"`
		NextAfter uint64 `json:"next_after"`
	}
	if err := json.Unmarshal([]byte(out), &h); err != nil {
		t.Fatalf("%s: %v", out, err)
	}
	if len(h.Events) < 5 || h.NextAfter != 0 {
		t.Errorf("esjet events in pages of 2 printed %d events (next_after %d), want every one of at least 5", len(h.Events), h.NextAfter)
	}
	for i, e := range h.Events {
		if e.Version != uint64(i)+1 {
			t.Fatalf("event %d has version %d: pages overlap or skip", i, e.Version)
		}
	}

	// --schema adds each event's schema version: trip_requested is at 2.
	out, err = esjet("events", "trip", "p1", "--schema")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^SCHEMA|\bSCHEMA\b`).MatchString(out) || !regexp.MustCompile(`(?m)^1\s+trip_requested\s+2\s`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^2\s+note_added\s+1\s`).MatchString(out) {
		t.Errorf("esjet events --schema:\n%s\nwant a SCHEMA column: trip_requested 2, note_added 1", out)
	}

	// esjet version and the micro service report the same version.
	out, err = esjet("version")
	if err != nil {
		t.Fatal(err)
	}
	cli := strings.TrimPrefix(strings.SplitN(out, "\n", 2)[0], "esjet ")
	nc, err := nats.Connect("nats://" + flagValue(flags, "--listen"))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	m, err := nc.Request("$SRV.INFO.esjet", nil, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var info struct{ Version string }
	if err := json.Unmarshal(m.Data, &info); err != nil {
		t.Fatal(err)
	}
	if cli == "" || cli != info.Version {
		t.Errorf("esjet version says %q, the micro service %q", cli, info.Version)
	}
}

func TestVersionFromBuildInfo(t *testing.T) {
	mod := func(v string, settings ...debug.BuildSetting) *debug.BuildInfo {
		return &debug.BuildInfo{Main: debug.Module{Version: v}, Settings: settings}
	}
	for _, tc := range []struct {
		linked string
		bi     *debug.BuildInfo
		want   string
	}{
		{"v1.2.3", mod("v9.9.9"), "1.2.3"},
		{"", mod("v0.3.0"), "0.3.0"},
		{"", mod("v0.0.0-20261130120000-3ffcbd2a1b2c+dirty"), "0.0.0-20261130120000-3ffcbd2a1b2c+dirty"},
		{"", mod("(devel)", debug.BuildSetting{Key: "vcs.revision", Value: "3ffcbd2a1b2c3d4e"}, debug.BuildSetting{Key: "vcs.modified", Value: "true"}), "0.1.0-devel+3ffcbd2a1b2c.modified"},
		{"", mod("(devel)", debug.BuildSetting{Key: "vcs.revision", Value: "3ffcbd2a1b2c3d4e"}), "0.1.0-devel+3ffcbd2a1b2c"},
		{"", mod("(devel)"), "0.1.0-devel"},
		{"", nil, "0.1.0-devel"},
	} {
		if got := versionFrom(tc.linked, tc.bi); got != tc.want {
			t.Errorf("versionFrom(%q, %+v) = %q, want %q", tc.linked, tc.bi, got, tc.want)
		}
	}
}

func TestSecondSignalExitsAtOnce(t *testing.T) {
	for _, tc := range []struct {
		second os.Signal
		code   int
	}{{os.Interrupt, 130}, {syscall.SIGTERM, 143}} {
		sigs := make(chan os.Signal, 2)
		ctx, cancel := context.WithCancelCause(context.Background())
		var stderr bytes.Buffer
		exited := make(chan int, 1)
		done := make(chan struct{})
		go func() { watchSignals(sigs, cancel, &stderr, func(c int) { exited <- c }); close(done) }()
		sigs <- os.Interrupt
		<-ctx.Done()
		if cause := context.Cause(ctx); !strings.Contains(cause.Error(), "send it again to exit at once") {
			t.Errorf("first signal's cause %q does not say how to skip the drain", cause)
		}
		select {
		case c := <-exited:
			t.Fatalf("exited with %d after one signal", c)
		default:
		}
		sigs <- tc.second
		if c := <-exited; c != tc.code {
			t.Errorf("second %v: exit %d, want %d", tc.second, c, tc.code)
		}
		<-done
		if !strings.Contains(stderr.String(), "exiting at once") {
			t.Errorf("second signal said %q", stderr.String())
		}
	}
}

// TestEventsPageSizeOutOfRangeNamesTheFlag: the CLI's --page-size becomes
// the Esjet-Limit header; a bad one is refused naming the flag, before
// any request.
func TestEventsPageSizeOutOfRangeNamesTheFlag(t *testing.T) {
	for _, size := range []string{"0", "1001", "-3"} {
		var stdout, stderr bytes.Buffer
		err := run(t.Context(), []string{"events", "trip", "p1", "--page-size", size}, nil, &stdout, &stderr)
		if err == nil || !strings.Contains(err.Error(), "--page-size must be 1 to 1000 events, got "+size) || strings.Contains(err.Error(), "Esjet-") {
			t.Errorf("--page-size %s: %v, want the flag named", size, err)
		}
	}
}

// TestEventsAndStateOfARawType: a type written through the raw API is not
// registered; esjet events reads its events as the raw API does, and esjet
// state says it is a raw type and where its events are, instead of only
// "unknown type (registered: [trip])".
func TestEventsAndStateOfARawType(t *testing.T) {
	flags := startTestNode(t, "rawcli")
	nc, err := nats.Connect("nats://" + flagValue(flags, "--listen"))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	reply, err := nc.Request("esjet.rawcli.raw.append.invoice.i1", []byte(`{"expected_version":0,"events":[{"type":"issued","data":{"amount":1200}},{"type":"paid"}]}`), 10*time.Second)
	if err != nil || reply.Header.Get(micro.ErrorCodeHeader) != "" {
		t.Fatalf("raw append: %v %s", err, reply.Data)
	}
	esjet := func(args ...string) (string, error) {
		var stdout, stderr bytes.Buffer
		err := run(t.Context(), append(args, flags...), nil, &stdout, &stderr)
		return stdout.String(), err
	}
	out, err := esjet("events", "invoice", "i1", "--json", "--page-size", "1")
	if err != nil || !strings.Contains(out, `"issued"`) || !strings.Contains(out, `"paid"`) {
		t.Errorf("esjet events invoice i1: %v\n%s", err, out)
	}
	if _, err := esjet("state", "invoice", "i1"); err == nil || !strings.Contains(err.Error(), "invoice is a raw type") || !strings.Contains(err.Error(), "esjet events invoice i1") {
		t.Errorf("esjet state invoice i1: %v, want it to say invoice is a raw type and how to read it", err)
	}
	// A type with no events anywhere is still unknown, with the registered ones.
	for _, cmd := range []string{"events", "state"} {
		if _, err := esjet(cmd, "invoise", "i1"); err == nil || !strings.HasPrefix(err.Error(), "404 unknown_type") || strings.Contains(err.Error(), "raw type") {
			t.Errorf("esjet %s invoise i1: %v, want 404 unknown_type", cmd, err)
		}
	}
}
