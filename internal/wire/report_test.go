package wire

import (
	"reflect"
	"testing"
)

// An OUTCOMES message reads back as the report written, and keeps the
// field names hubs and sites of earlier builds wrote and read.
func TestReportRoundTripsInTheShapeEarlierBuildsRead(t *testing.T) {
	r := Report{AggregateType: "order", AggregateID: "o1", Kind: "charge_done", Payload: Outcome{CommandID: "order:o1:1:0"}.Encode(),
		IdempotencyKey: DoneKey("order:o1:1:0"), CorrelationID: "c1", CausationID: "order:o1:1:0", TraceParent: "00-x-y-01", DecisionID: "d1"}
	got, err := DecodeReport(r.Encode())
	if err != nil || !reflect.DeepEqual(got, r) {
		t.Fatalf("DecodeReport(Encode(r)) = %+v, %v; want %+v", got, err, r)
	}
	old := []byte(`{"AggregateType":"order","AggregateID":"o1","Kind":"charge_done","Payload":"eyJjb21tYW5kX2lkIjoib3JkZXI6bzE6MTowIn0=","IdempotencyKey":"order:o1:1:0/done","CorrelationID":"","CausationID":"order:o1:1:0"}`)
	got, err = DecodeReport(old)
	if err != nil || got.AggregateID != "o1" || got.CausationID != "order:o1:1:0" || string(got.Payload) != `{"command_id":"order:o1:1:0"}` {
		t.Fatalf("a report as earlier builds wrote it: %+v, %v", got, err)
	}
}
