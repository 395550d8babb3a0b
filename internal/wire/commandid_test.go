package wire

import (
	"errors"
	"strings"
	"testing"
)

func TestParseCommandIDRoundTripsAndSaysWhatIsWrong(t *testing.T) {
	t.Parallel()
	ref, err := ParseCommandID("trip:t-1_x:12:3")
	if err != nil {
		t.Fatal(err)
	}
	if ref != (CommandRef{AggregateType: "trip", AggregateID: "t-1_x", Version: 12, Index: 3}) || ref.String() != "trip:t-1_x:12:3" {
		t.Fatalf("%+v → %s", ref, ref)
	}
	for id, says := range map[string]string{
		"trip:t1:4":     "want <type>:<id>:<version>:<index>",
		"trip:t.1:4:0":  "aggregate id",
		"trip:t1:0:0":   `version "0"`,
		"trip:t1:04:0":  `version "04"`,
		"trip:t1:4:-1":  `index "-1"`,
		"trip:t1:4:x":   `index "x"`,
		"tr ip:t1:4:0":  "aggregate type",
		"trip:t1:4:0:9": "want <type>",
	} {
		_, err := ParseCommandID(id)
		if !errors.Is(err, ErrBadCommandID) || !strings.Contains(err.Error(), says) || !strings.Contains(err.Error(), id) {
			t.Errorf("%q: %v; want ErrBadCommandID naming the id and %q", id, err, says)
		}
	}
}

func TestReceiptKeyMapsBackToTheCommandID(t *testing.T) {
	t.Parallel()
	id := "trip:t-1:4:0"
	if k := ReceiptKey(id); k != "trip.t-1.4.0" || CommandIDFromKey(k) != id {
		t.Fatalf("%q → %q → %q", id, k, CommandIDFromKey(k))
	}
}
