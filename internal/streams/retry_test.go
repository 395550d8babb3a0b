package streams

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/natstest"
)

// faultyAPI puts a proxy between a JetStream context and a real server's
// API: the returned js sends its requests to FAKE.API.>, which the proxy
// forwards to $JS.API.> unless fault, given the verb (STREAM.INFO,
// STREAM.CREATE…) and how many times it was asked before, answers instead:
// "drop" leaves the request without a reply (a timeout), any other text is
// sent back as the reply.
func faultyAPI(t *testing.T, fault func(verb string, before int) string) jetstream.JetStream {
	t.Helper()
	s := natstest.RunServer(t)
	nc, _ := natstest.Connect(t, s)
	var mu sync.Mutex
	asked := map[string]int{}
	sub, err := nc.Subscribe("FAKE.API.>", func(m *nats.Msg) {
		rest := strings.TrimPrefix(m.Subject, "FAKE.API.")
		verb := rest
		if i := strings.LastIndex(rest, "."); i > 0 {
			verb = rest[:i]
		}
		mu.Lock()
		before := asked[verb]
		asked[verb]++
		mu.Unlock()
		switch f := fault(verb, before); f {
		case "":
			r, err := nc.Request("$JS.API."+rest, m.Data, 5*time.Second)
			if err == nil {
				_ = m.Respond(r.Data)
			}
		case "drop":
		default:
			_ = m.Respond([]byte(f))
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	client, _ := natstest.Connect(t, s)
	js, err := jetstream.NewWithAPIPrefix(client, "FAKE.API")
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// shortPatience shortens provisioning's waits for one test (not parallel:
// the parallel tests run after it).
func shortPatience(t *testing.T, try, patience time.Duration) {
	oldTry, oldPatience := provisionTry, provisionPatience
	provisionTry, provisionPatience = try, patience
	t.Cleanup(func() { provisionTry, provisionPatience = oldTry, oldPatience })
}

const unavailable = `{"type":"io.nats.jetstream.api.v1.stream_create_response","error":{"code":503,"err_code":10008,"description":"JetStream system temporarily unavailable"}}`

// Nodes started together on a cluster that has just started meet lookups
// that get no answer in time and creates refused while the cluster has no
// meta leader; a restart a moment later worked. Provisioning asks again.
func TestProvisioningAsksAgainWhileJetStreamDoesNotAnswer(t *testing.T) {
	shortPatience(t, 300*time.Millisecond, 30*time.Second)
	js := faultyAPI(t, func(verb string, before int) string {
		switch {
		case verb == "STREAM.INFO" && before < 2:
			return "drop"
		case verb == "STREAM.CREATE" && before == 0:
			return unavailable
		}
		return ""
	})
	ns := natstest.Namespace(t)
	for name, run := range map[string]func() ([]Change, error){
		"Ensure": func() ([]Change, error) { return Ensure(t.Context(), js, Objects(ns, ProvisionConfig{}), nil) },
		"Apply": func() ([]Change, error) {
			return Apply(t.Context(), js, Objects(ns+"_B", ProvisionConfig{}), ApplyChanges, nil)
		},
	} {
		changes, err := run()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, c := range changes {
			if c.Action != "created" {
				t.Errorf("%s: %s", name, c)
			}
		}
		if len(changes) != len(Objects(ns, ProvisionConfig{})) {
			t.Errorf("%s: %d changes, want one per object", name, len(changes))
		}
	}
}

// When JetStream does not answer for the whole patience, the error says so
// once, names the stream and what to check.
func TestProvisioningGivesUpWithOneClearError(t *testing.T) {
	shortPatience(t, 100*time.Millisecond, time.Second)
	js := faultyAPI(t, func(verb string, _ int) string {
		if verb == "STREAM.INFO" {
			return "drop"
		}
		return ""
	})
	ns := natstest.Namespace(t)
	_, err := Ensure(t.Context(), js, Objects(ns, ProvisionConfig{})[:1], nil)
	if err == nil {
		t.Fatal("Ensure with no answers succeeded")
	}
	for _, want := range []string{"look up stream " + NamesFor(ns).Events, "no usable answer", "meta leader"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}
