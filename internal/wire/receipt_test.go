package wire

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"
)

func TestReceiptAndOutcomeRoundTrip(t *testing.T) {
	t.Parallel()
	r := Receipt{CommandID: "trip:t1:4:0", Kind: "k", Outcome: OutcomeDone, Attempts: 2, ResultDigest: "ab",
		Result: json.RawMessage(`{"ref":"X"}`), At: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)}
	got, err := DecodeReceipt(r.Encode())
	if err != nil || !reflect.DeepEqual(got, r) {
		t.Fatalf("receipt round trip: %+v, %v", got, err)
	}
	if _, err := DecodeReceipt([]byte("nope")); err == nil {
		t.Fatal("a receipt that is not JSON decoded")
	}
	o := Outcome{CommandID: "trip:t1:4:0", Error: "no"}
	back, err := DecodeOutcome(o.Encode())
	if err != nil || !reflect.DeepEqual(back, o) || string(o.Encode()) != `{"command_id":"trip:t1:4:0","error":"no"}` {
		t.Fatalf("outcome round trip: %s → %+v, %v", o.Encode(), back, err)
	}
	if DoneKind("pay") != "pay_done" || FailedKind("pay") != "pay_failed" || DoneKey("a:b:1:0") != "a:b:1:0/done" || FailedKey("a:b:1:0") != "a:b:1:0/failed" {
		t.Fatal("outcome kinds or keys changed: aggregates and receivers depend on them")
	}
	for key, want := range map[string][2]string{DoneKey("a:b:1:0"): {"a:b:1:0", OutcomeDone}, FailedKey("a:b:1:0"): {"a:b:1:0", OutcomeFailed}} {
		if id, out, ok := ParseOutcomeKey(key); !ok || id != want[0] || out != want[1] {
			t.Errorf("ParseOutcomeKey(%q) = %q, %q, %v", key, id, out, ok)
		}
	}
	for _, key := range []string{"", "/done", "a:b:1:0", "client-key", "a:b:1:0/later"} {
		if _, _, ok := ParseOutcomeKey(key); ok {
			t.Errorf("ParseOutcomeKey(%q) took a client key for an outcome", key)
		}
	}
}

func TestParseOutcomeKindReadsWhatDoneKindAndFailedKindMake(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"pay", "book_flight", "a_done_b"} {
		if of, out, ok := ParseOutcomeKind(DoneKind(kind)); !ok || of != kind || out != OutcomeDone {
			t.Errorf("ParseOutcomeKind(%q) = %q, %q, %v", DoneKind(kind), of, out, ok)
		}
		if of, out, ok := ParseOutcomeKind(FailedKind(kind)); !ok || of != kind || out != OutcomeFailed {
			t.Errorf("ParseOutcomeKind(%q) = %q, %q, %v", FailedKind(kind), of, out, ok)
		}
	}
	for _, kind := range []string{"", "pay", "_done", "_failed", "pay_later"} {
		if _, _, ok := ParseOutcomeKind(kind); ok {
			t.Errorf("ParseOutcomeKind(%q) took a client kind for an outcome", kind)
		}
	}
}

// A decision stored anew (a restore, an edge hub's sourcing) is as old as
// its first event; one whose node's clock ran ahead is as old as its copy.
func TestRecordDecidedAtIsTheEarlierOfItsEventAndItsCopy(t *testing.T) {
	stored := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	ago := stored.Add(-240 * time.Hour)
	for _, tt := range []struct {
		name string
		rec  Record
		want time.Time
	}{
		{"restored", Record{Stored: stored, Decision: Decision{Events: []Event{{Time: ago}}}}, ago},
		{"lean decode", Record{Stored: stored, Decided: ago}, ago},
		{"clock ahead", Record{Stored: stored, Decision: Decision{Events: []Event{{Time: stored.Add(time.Minute)}}}}, stored},
		{"no events", Record{Stored: stored}, stored},
	} {
		if got := tt.rec.DecidedAt(); !got.Equal(tt.want) {
			t.Errorf("%s: DecidedAt() = %s, want %s", tt.name, got, tt.want)
		}
	}
}
