package aggregate

import "testing"

func TestWithPriorityMarksTheLastCommandAndReachesTheLog(t *testing.T) {
	base := Emit("booked", nil).Issue("book_hotel", map[string]string{"booking_id": "b1"})
	d := base.Fire("notify", nil).WithPriority(PriorityHigh)
	if d.Commands[0].Priority != PriorityNormal || d.Commands[1].Priority != PriorityHigh {
		t.Fatalf("priorities %q, %q; want the last one high", d.Commands[0].Priority, d.Commands[1].Priority)
	}
	low := base.WithPriority(PriorityLow)
	if base.Commands[0].Priority != PriorityNormal || low.Commands[0].Priority != PriorityLow {
		t.Fatalf("WithPriority changed the decision it was called on: %q, %q", base.Commands[0].Priority, low.Commands[0].Priority)
	}
	sd, err := toStreams(Request{Type: "trip", ID: "t1", Kind: "book"}, "0190f4c2-7d3a-7c11-8a2b-3c4d5e6f7a8b", "", d)
	if err != nil {
		t.Fatal(err)
	}
	if sd.Commands[1].Priority != PriorityHigh {
		t.Fatalf("the stored command has priority %q, want high", sd.Commands[1].Priority)
	}
	if (Decision{}).WithPriority(PriorityHigh).Commands != nil {
		t.Fatal("WithPriority without a command added one")
	}
}
