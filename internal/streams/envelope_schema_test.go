package streams

import (
	"strings"
	"testing"
)

// Issue 32: a command's schema version is kept in the decision, read back
// by the same decoder the relay uses; version 1 is stored as absent (the
// bytes a decision had before commands had versions), and a negative one
// is refused.
func TestACommandsSchemaRoundTripsAndOneIsStoredAsNone(t *testing.T) {
	t.Parallel()
	d := sampleDecision()
	d.Commands[0].Schema, d.Commands[1].Schema = 1, 3
	p, err := prepare(d, Position{}, testNow)
	if err != nil {
		t.Fatal(err)
	}
	m, err := encode("ns.evt.trip.t-1", p)
	if err != nil {
		t.Fatal(err)
	}
	_, cmds, _ := strings.Cut(string(m.Data), `"commands":`)
	if !strings.Contains(cmds, `"priority":"high","schema":3}`) || strings.Contains(cmds, `"schema":1`) {
		t.Fatalf("%s: want one command schema field, 3", m.Data)
	}
	got, err := Decode(m.Data)
	if err != nil {
		t.Fatal(err)
	}
	if got.Commands[0].Schema != 0 || got.Commands[1].Schema != 3 {
		t.Fatalf("schemas %d, %d; want 0 (1) and 3", got.Commands[0].Schema, got.Commands[1].Schema)
	}
	d.Commands[0].Schema = -1
	if _, err := prepare(d, Position{}, testNow); err == nil {
		t.Fatal("a negative command schema was accepted")
	}
}
