package services

import (
	"context"
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/esjet/esjet/demo/trip"
	"github.com/esjet/esjet/internal/natstest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// start runs the services on a server of their own.
func start(t *testing.T, opts Options) (*Services, *nats.Conn) {
	svc, nc, _ := startJS(t, opts)
	return svc, nc
}

func startJS(t *testing.T, opts Options) (*Services, *nats.Conn, jetstream.JetStream) {
	t.Helper()
	s := natstest.RunServer(t)
	nc, js := natstest.Connect(t, s)
	svc, err := Start(t.Context(), nc, js, opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Close() })
	return svc, nc, js
}

// call sends one request as esjet's NATS target does and decodes the reply.
func call(t *testing.T, nc *nats.Conn, subject, key string, attempt int, body string) Reply {
	t.Helper()
	m := nats.NewMsg(subject)
	if key != "" {
		m.Header.Set(HeaderIdempotencyKey, key)
		m.Header.Set(HeaderCommandID, key)
	}
	m.Header.Set(HeaderAttempt, strconv.Itoa(attempt))
	m.Header.Set(HeaderCommandKind, "test")
	m.Header.Set(HeaderAggregateType, "trip")
	m.Header.Set(HeaderAggregateID, "t1")
	m.Header.Set(HeaderAggregateVersion, "1")
	m.Data = []byte(body)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	r, err := nc.RequestMsgWithContext(ctx, m)
	if err != nil {
		t.Fatalf("request %s: %v", subject, err)
	}
	var rep Reply
	if err := json.Unmarshal(r.Data, &rep); err != nil {
		t.Fatalf("reply %s: %v", r.Data, err)
	}
	if rep.Error == "" && rep.Result == nil {
		t.Fatalf("reply %s has neither result nor error", r.Data)
	}
	return rep
}

const (
	budgetBody = `{"traveler":"ada","amount":70000}`
	flightBody = `{"traveler":"ada","destination":"Lisbon","price":40000}`
	hotelBody  = `{"traveler":"ada","destination":"Lisbon","price":30000}`
)

func TestEachServiceAnswersItsResult(t *testing.T) {
	svc, nc := start(t, Options{})
	for _, tc := range []struct {
		subject, body, want string
	}{
		{SubjectBudgetLock, budgetBody, `^\{"lock_id":"BL-[A-Z2-7]{6}"\}$`},
		{SubjectBudgetRelease, budgetBody, `^\{"released":true\}$`},
		{SubjectFlightsBook, flightBody, `^\{"booking_ref":"FL-[A-Z2-7]{6}"\}$`},
		{SubjectFlightsCancel, `{"booking_ref":"FL-ABCDEF"}`, `^\{"cancelled":true\}$`},
		{SubjectHotelsBook, hotelBody, `^\{"booking_ref":"HT-[A-Z2-7]{6}"\}$`},
		{SubjectHotelsCancel, `{"booking_ref":"HT-ABCDEF"}`, `^\{"cancelled":true\}$`},
	} {
		rep := call(t, nc, tc.subject, "trip:t1:1:0:"+tc.subject, 1, tc.body)
		if rep.Error != "" || !regexp.MustCompile(tc.want).Match(rep.Result) {
			t.Errorf("%s: %+v (result %s), want %s", tc.subject, rep, rep.Result, tc.want)
		}
		if n := svc.Effects()[tc.subject]; n != 1 {
			t.Errorf("%s: %d effects, want 1", tc.subject, n)
		}
	}
}

func TestTheSameIdempotencyKeyBooksOnce(t *testing.T) {
	svc, nc := start(t, Options{})
	first := call(t, nc, SubjectFlightsBook, "trip:t1:2:0", 1, flightBody)
	again := call(t, nc, SubjectFlightsBook, "trip:t1:2:0", 2, flightBody)
	if first.Error != "" || string(again.Result) != string(first.Result) {
		t.Fatalf("first %s, again %s: want the same booking", first.Result, again.Result)
	}
	// Concurrent deliveries of another command fold too.
	var wg sync.WaitGroup
	refs := make([]string, 8)
	for i := range refs {
		wg.Go(func() { refs[i] = string(call(t, nc, SubjectHotelsBook, "trip:t1:2:1", i+1, hotelBody).Result) })
	}
	wg.Wait()
	for _, r := range refs {
		if r != refs[0] || !strings.Contains(r, "HT-") {
			t.Fatalf("concurrent deliveries got %q", refs)
		}
	}
	if e := svc.Effects(); e[SubjectFlightsBook] != 1 || e[SubjectHotelsBook] != 1 {
		t.Fatalf("effects %v, want one booking each", e)
	}
}

func TestTransientFailuresThenRecoveryPerformOneEffect(t *testing.T) {
	svc, nc := start(t, Options{Fail: map[string]Mode{Flights: {Kind: Transient, Count: 2}}})
	for attempt := 1; attempt <= 2; attempt++ {
		rep := call(t, nc, SubjectFlightsBook, "trip:t2:2:0", attempt, flightBody)
		if rep.Error != "supplier busy" || !rep.Retryable || rep.RetryAfterMS != 200 {
			t.Fatalf("attempt %d: %+v, want a retryable supplier busy after 200ms", attempt, rep)
		}
	}
	rep := call(t, nc, SubjectFlightsBook, "trip:t2:2:0", 3, flightBody)
	if rep.Error != "" || !strings.Contains(string(rep.Result), "FL-") {
		t.Fatalf("attempt 3: %+v", rep)
	}
	if n := svc.Effects()[SubjectFlightsBook]; n != 1 {
		t.Fatalf("%d effects, want 1", n)
	}
	if m := svc.Modes()[Flights]; m.Kind != OK {
		t.Fatalf("flights mode after the count ran out: %+v", m)
	}
}

func TestTerminalModesRefuseWithoutConsumingTheKey(t *testing.T) {
	svc, nc := start(t, Options{Fail: map[string]Mode{Budget: {Kind: Terminal}, Flights: {Kind: Terminal}, Hotels: {Kind: Terminal}}})
	for _, tc := range []struct{ subject, body, want string }{
		{SubjectBudgetLock, budgetBody, "budget refused"},
		{SubjectFlightsBook, flightBody, "no seats"},
		{SubjectHotelsBook, hotelBody, "no rooms"},
	} {
		rep := call(t, nc, tc.subject, "k:"+tc.subject, 1, tc.body)
		if rep.Error != tc.want || rep.Retryable {
			t.Fatalf("%s: %+v, want terminal %q", tc.subject, rep, tc.want)
		}
	}
	if err := svc.SetMode(Flights, Mode{Kind: OK}); err != nil {
		t.Fatal(err)
	}
	if rep := call(t, nc, SubjectFlightsBook, "k:"+SubjectFlightsBook, 2, flightBody); rep.Error != "" {
		t.Fatalf("after recovery: %+v, want the same key to book now", rep)
	}
}

func TestSlowModeDelaysAndIsCancelledByClose(t *testing.T) {
	svc, nc, js := startJS(t, Options{Fail: map[string]Mode{Budget: {Kind: Slow, Delay: 300 * time.Millisecond, Count: 1}, Hotels: {Kind: Slow, Delay: time.Hour}}})
	kv, err := js.KeyValue(t.Context(), DefaultBucket)
	if err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	if rep := call(t, nc, SubjectBudgetLock, "slow-1", 1, budgetBody); rep.Error != "" {
		t.Fatalf("slow budget: %+v", rep)
	}
	if el := time.Since(begin); el < 300*time.Millisecond {
		t.Fatalf("answered after %s, want ≥ 300ms", el)
	}

	replied := make(chan Reply, 1)
	go func() { replied <- call(t, nc, SubjectHotelsBook, "slow-2", 1, hotelBody) }()
	natstest.Eventually(t, 5*time.Second, func() bool {
		_, err := kv.Get(t.Context(), "slow-2") // the claim: the request is in its slow sleep
		return err == nil
	})
	begin = time.Now()
	if err := svc.Close(); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(begin); el > 5*time.Second {
		t.Fatalf("Close took %s with a slow request in flight", el)
	}
	rep := <-replied
	if !rep.Retryable || rep.Error == "" {
		t.Fatalf("slow request at Close: %+v, want a retryable error", rep)
	}
	if n := svc.Effects()[SubjectHotelsBook]; n != 0 {
		t.Fatalf("%d hotel effects, want 0", n)
	}
	if err := svc.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func TestControlSubjectSwitchesModes(t *testing.T) {
	svc, nc := start(t, Options{})
	control := func(body string) ControlReply {
		t.Helper()
		r, err := nc.Request(SubjectControl, []byte(body), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		var rep ControlReply
		if err := json.Unmarshal(r.Data, &rep); err != nil {
			t.Fatalf("%s: %v", r.Data, err)
		}
		return rep
	}
	rep := control(`{"service":"hotels","mode":"transient","count":1}`)
	if rep.Error != "" || rep.Modes[Hotels] != (Mode{Kind: Transient, Count: 1}) || rep.Modes[Flights].Kind != OK {
		t.Fatalf("control: %+v", rep)
	}
	if r := call(t, nc, SubjectHotelsBook, "c1", 1, hotelBody); !r.Retryable {
		t.Fatalf("first hotel request: %+v, want transient", r)
	}
	if r := call(t, nc, SubjectHotelsBook, "c1", 2, hotelBody); r.Error != "" {
		t.Fatalf("second hotel request: %+v, want recovered", r)
	}
	rep = control(`{"service":"budget","mode":"slow","delay":"2s"}`)
	if rep.Modes[Budget] != (Mode{Kind: Slow, Delay: 2 * time.Second}) || rep.Modes[Hotels].Kind != OK {
		t.Fatalf("slow: %+v", rep)
	}
	if m := svc.Modes()[Budget]; m.Kind != Slow {
		t.Fatalf("Modes() = %+v", m)
	}
	if rep := control(""); rep.Modes[Budget].Kind != Slow {
		t.Fatalf("status: %+v", rep)
	}
	for _, bad := range []string{`{"service":"trains","mode":"ok"}`, `{"service":"budget","mode":"weird"}`, `{"service":"budget","mode":"slow"}`, `{"service":"budget"}`, `not json`} {
		if rep := control(bad); rep.Error == "" {
			t.Errorf("control %s accepted: %+v", bad, rep)
		}
	}
}

func TestFlightsToAtlantisAlwaysFailTerminally(t *testing.T) {
	svc, nc := start(t, Options{})
	for attempt := 1; attempt <= 2; attempt++ {
		rep := call(t, nc, SubjectFlightsBook, "trip:t3:2:0", attempt, `{"traveler":"ada","destination":"Atlantis","price":40000}`)
		if rep.Error != "no seats" || rep.Retryable {
			t.Fatalf("attempt %d: %+v, want terminal no seats", attempt, rep)
		}
	}
	if rep := call(t, nc, SubjectHotelsBook, "trip:t3:2:1", 1, `{"traveler":"ada","destination":"Atlantis","price":30000}`); rep.Error != "" {
		t.Fatalf("hotels in Atlantis: %+v, want booked (the rule is the flights')", rep)
	}
	if n := svc.Effects()[SubjectFlightsBook]; n != 0 {
		t.Fatalf("%d flight effects, want 0", n)
	}
}

func TestBadRequestsAreTerminal(t *testing.T) {
	_, nc := start(t, Options{})
	if rep := call(t, nc, SubjectBudgetLock, "", 1, budgetBody); rep.Retryable || !strings.Contains(rep.Error, "Idempotency-Key") {
		t.Fatalf("no key: %+v", rep)
	}
	if rep := call(t, nc, SubjectBudgetLock, "k", 1, `{"traveler":"ada","amount":5}`); rep.Error != "" {
		t.Fatal(rep)
	}
	if rep := call(t, nc, SubjectBudgetLock, "k", 2, `{"traveler":"ada","amount":6}`); rep.Retryable || !strings.Contains(rep.Error, "different parameters") {
		t.Fatalf("key reused with another payload: %+v", rep)
	}
	for _, tc := range []struct{ subject, body string }{
		{SubjectFlightsBook, `{`},
		{SubjectFlightsBook, `{"traveler":"ada","price":1}`},
		{SubjectBudgetRelease, `{"traveler":"ada"}`},
		{SubjectHotelsCancel, `{"booking_ref":"FL-ABCDEF"}`},
	} {
		if rep := call(t, nc, tc.subject, "bad:"+tc.subject+tc.body, 1, tc.body); rep.Error == "" || rep.Retryable {
			t.Errorf("%s %s: %+v, want a terminal error", tc.subject, tc.body, rep)
		}
	}
}

func TestStartRejectsUnknownServicesAndModes(t *testing.T) {
	s := natstest.RunServer(t)
	nc, js := natstest.Connect(t, s)
	_, err := Start(t.Context(), nc, js, Options{Fail: map[string]Mode{"trains": {Kind: Terminal}, Hotels: {Kind: "sometimes"}}}, nil)
	if err == nil || !strings.Contains(err.Error(), "trains") || !strings.Contains(err.Error(), "sometimes") {
		t.Fatalf("err = %v, want both problems", err)
	}
}

func TestParseFlags(t *testing.T) {
	for _, tc := range []struct {
		spec    string
		slow    bool
		service string
		mode    Mode
	}{
		{"flights=terminal", false, Flights, Mode{Kind: Terminal}},
		{"hotels=transient:2", false, Hotels, Mode{Kind: Transient, Count: 2}},
		{"budget=ok", false, Budget, Mode{Kind: OK}},
		{"budget=3s", true, Budget, Mode{Kind: Slow, Delay: 3 * time.Second}},
		{"flights=500ms:2", true, Flights, Mode{Kind: Slow, Delay: 500 * time.Millisecond, Count: 2}},
	} {
		parse := ParseFail
		if tc.slow {
			parse = ParseSlow
		}
		service, m, err := parse(tc.spec)
		if err != nil || service != tc.service || m != tc.mode {
			t.Errorf("%s: %s %+v %v", tc.spec, service, m, err)
		}
	}
	for _, bad := range []string{"flights", "trains=terminal", "flights=sometimes", "flights=transient:x", "flights=slow", "flights=terminal:-1"} {
		if _, _, err := ParseFail(bad); err == nil {
			t.Errorf("--fail %s accepted", bad)
		}
	}
	for _, bad := range []string{"budget", "budget=soon", "trains=1s", "budget=-1s", "budget=1s:x"} {
		if _, _, err := ParseSlow(bad); err == nil {
			t.Errorf("--slow %s accepted", bad)
		}
	}
}

// TestTheTripsCommandsAreServed sends each command kind the trip issues, with
// the trip's own payload types, to KindSubjects, and reads the booking
// references back the way the trip does.
func TestTheTripsCommandsAreServed(t *testing.T) {
	_, nc := start(t, Options{})
	send := func(kind string, payload any) Reply {
		t.Helper()
		body, err := json.Marshal(payload)
		if err != nil {
			t.Fatal(err)
		}
		subject, ok := KindSubjects[kind]
		if !ok {
			t.Fatalf("no subject for %s", kind)
		}
		rep := call(t, nc, subject, "trip:t7:1:"+kind, 1, string(body))
		if rep.Error != "" {
			t.Fatalf("%s: %+v", kind, rep)
		}
		return rep
	}
	send(trip.KindLockBudget, trip.LockBudget{Traveler: "ada", Amount: 70000})
	var refs [2]trip.BookingResult
	for i, kind := range []string{trip.KindBookFlight, trip.KindBookHotel} {
		rep := send(kind, trip.BookFlight{Traveler: "ada", Destination: "Lisbon", Price: 1})
		if err := json.Unmarshal(rep.Result, &refs[i]); err != nil || refs[i].BookingRef == "" {
			t.Fatalf("%s: result %s does not decode as trip.BookingResult: %v", kind, rep.Result, err)
		}
	}
	send(trip.KindCancelFlight, trip.CancelFlight{BookingRef: refs[0].BookingRef})
	send(trip.KindCancelHotel, trip.CancelHotel{BookingRef: refs[1].BookingRef})
	send(trip.KindReleaseBudget, trip.ReleaseBudget{Traveler: "ada", Amount: 70000})
	if len(KindSubjects) != 6 {
		t.Fatalf("KindSubjects has %d kinds, want the trip's 6", len(KindSubjects))
	}
	// The kind the trip's next shape adds.
	subject, ok := NextKindSubjects[trip.KindSendItinerary]
	if !ok || len(NextKindSubjects) != len(trip.NextKinds) {
		t.Fatalf("NextKindSubjects %v, want trip.NextKinds %v", NextKindSubjects, trip.NextKinds)
	}
	if rep := call(t, nc, subject, "trip:t7:2:send_itinerary", 1, `{"traveler":"ada","destination":"Lisbon"}`); rep.Error != "" || !strings.Contains(string(rep.Result), "IT-") {
		t.Fatalf("send_itinerary: %+v", rep)
	}
	if rep := call(t, nc, subject, "trip:t7:3:send_itinerary", 1, `{"traveler":"ada"}`); rep.Error == "" || rep.Retryable {
		t.Fatalf("send_itinerary without a destination: %+v, want a refusal", rep)
	}
}

// TestAnOlderFenceIsAnsweredStale: after an attempt with fence 5 failed, a
// late attempt with fence 4 (its worker lost its lease) is refused with
// "stale": true, which esjet's worker neither retries nor acks; fence 5
// again books.
func TestAnOlderFenceIsAnsweredStale(t *testing.T) {
	svc, nc := start(t, Options{Fail: map[string]Mode{Flights: {Kind: Terminal}}})
	req := func(fence string) Reply {
		m := nats.NewMsg(SubjectFlightsBook)
		m.Header.Set(HeaderIdempotencyKey, "trip:t1:2:0")
		m.Header.Set(HeaderFence, fence)
		m.Data = []byte(flightBody)
		r, err := nc.RequestMsg(m, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		var rep Reply
		if err := json.Unmarshal(r.Data, &rep); err != nil {
			t.Fatal(err)
		}
		return rep
	}
	if rep := req("5"); rep.Error != "no seats" || rep.Stale {
		t.Fatalf("fence 5: %+v, want the terminal refusal", rep)
	}
	if err := svc.SetMode(Flights, Mode{Kind: OK}); err != nil {
		t.Fatal(err)
	}
	if rep := req("4"); !rep.Stale || rep.Retryable || rep.Result != nil {
		t.Fatalf("fence 4 after fence 5: %+v, want a stale refusal", rep)
	}
	if rep := req("5"); rep.Error != "" || rep.Result == nil {
		t.Fatalf("fence 5 again: %+v, want booked", rep)
	}
}
