package node

import (
	"strings"
	"testing"

	"github.com/esjet/esjet/config"
	"github.com/esjet/esjet/internal/aggregate"
)

// An archive rule for a type this build does not know names the types it
// does and the nearest one ("tirp" → "trip"): a newcomer's typo was told
// only that there was no Definition of tirp.
func TestAnArchiveRuleForAnUnknownTypeSuggestsTheNearest(t *testing.T) {
	reg, err := aggregate.NewRegistry(orderDefinition())
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.Aggregates.Raw = map[string]config.RawType{"invoice": {}}
	cfg.Archive.Types = map[string]config.ArchiveRule{
		"odrer":   {ClosedBy: []string{"shipped"}},
		"order":   {ClosedBy: []string{"shipped"}},
		"invoice": {ClosedBy: []string{"paid"}},
	}
	errs := unknownArchiveTypes(cfg, reg)
	if len(errs) != 1 {
		t.Fatalf("errors %v, want one, for odrer", errs)
	}
	for _, want := range []string{"archive.types.odrer:", "types here: invoice, order", `did you mean "order"?`} {
		if !strings.Contains(errs[0].Error(), want) {
			t.Errorf("%v\ndoes not say %q", errs[0], want)
		}
	}
}
