package node

import (
	"testing"

	"github.com/esjet/esjet/config"
)

// TestPersonalSpecsNameTheCurrentSchema: a raw event type whose
// configuration upcasts older shapes has its personal fields named as of
// the current schema (steps + 1), so the repository can refuse an older
// shape, which may name them otherwise; one without steps takes any.
func TestPersonalSpecsNameTheCurrentSchema(t *testing.T) {
	cfg := config.Default()
	cfg.Aggregates.Raw = map[string]config.RawType{"signup": {
		Events: map[string]config.RawEvent{"user_registered": {Upcast: []config.Transform{{Rename: map[string]string{"mail": "email"}}, {Remove: []string{"x"}}}}},
		Personal: map[string]config.PersonalFields{
			"user_registered": {Subject: "user_id", Fields: []string{"email"}},
			"user_renamed":    {Subject: "user_id", Fields: []string{"name"}},
		},
	}}
	reg := personalSpecs(cfg)
	if s := reg.Lookup("signup", "user_registered"); s.Schema != 3 || len(s.Fields) != 1 {
		t.Errorf("user_registered: %+v, want the fields named as of schema 3", s)
	}
	if s := reg.Lookup("signup", "user_renamed"); s.Schema != 0 {
		t.Errorf("user_renamed (no upcast steps): %+v, want any schema", s)
	}
	if s := reg.Merge(nil).Lookup("signup", "user_registered"); s.Schema != 3 {
		t.Errorf("merged: %+v, the schema lost", s)
	}
}
