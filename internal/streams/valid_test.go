package streams

import (
	"encoding/json"
	"strings"
	"testing"
)

// FuzzValidJSONMatchesEncodingJSON holds validJSON to json.Valid.
func FuzzValidJSONMatchesEncodingJSON(f *testing.F) {
	for _, s := range []string{
		`{"k":[1,2,"\u00e9"]}`, ` {"a" : [ true , false , null ] } `, `"\ud800"`, "\"\xff\"", `-0.5e+7`, `01`, `1.`, `.5`, `-`,
		`{"a":1,}`, `[1,]`, `[,1]`, `{"a"}`, `{1:2}`, `"a\x"`, `"\u12g4"`, "\"\x1f\"", `tru`, `nul`, `[`, `{`, `""`, ``, ` `,
		`1 2`, `{"a":{"b":{"c":[[[]]]}}}`, `1e`, `-01`, `0e-0`, `"\/\b\f\n\r\t\""`, `[1]]`, `{"a":1}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if got, want := validJSON(data), json.Valid(data); got != want {
			t.Fatalf("validJSON = %v, json.Valid = %v for %q", got, want, data)
		}
	})
}

func TestValidJSONNestingLimitMatchesEncodingJSON(t *testing.T) {
	for _, n := range []int{maxNesting - 1, maxNesting, maxNesting + 1} {
		for _, open := range []string{"[", `{"a":`} {
			closer := map[string]string{"[": "]", `{"a":`: "}"}[open]
			v := []byte(strings.Repeat(open, n) + "1" + strings.Repeat(closer, n))
			if got, want := validJSON(v), json.Valid(v); got != want {
				t.Fatalf("depth %d %q: validJSON = %v, json.Valid = %v", n, open, got, want)
			}
		}
	}
}

func BenchmarkValidJSON(b *testing.B) {
	v := []byte(benchEventData)
	b.Run("validJSON", func(b *testing.B) {
		for b.Loop() {
			if !validJSON(v) {
				b.Fatal("invalid")
			}
		}
	})
	b.Run("json.Valid", func(b *testing.B) {
		for b.Loop() {
			if !json.Valid(v) {
				b.Fatal("invalid")
			}
		}
	})
}
