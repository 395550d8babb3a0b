package config

import (
	"regexp"
	"strings"
	"testing"
)

// goWords are Go type names and package prefixes a user should not see.
var goWords = regexp.MustCompile(`config\.[A-Z]|(^|: )yaml: |unmarshal errors`)

func TestLoadUnknownKeySuggestsTheNearestKey(t *testing.T) {
	for _, tt := range []struct {
		name, content string
		want          []string
	}{
		{"nested typo", "nats:\n  embeded:\n    listen: none\n",
			[]string{`line 2: unknown key "embeded" in nats; did you mean "embedded"?`, "the keys there: embedded, external, mode"}},
		{"deep typo", "nats:\n  embedded:\n    data_dri: /tmp/x\n",
			[]string{`line 3: unknown key "data_dri" in nats.embedded; did you mean "data_dir"?`}},
		{"top level", "namespce: demo\n", []string{`line 1: unknown key "namespce" at the top level; did you mean "namespace"?`}},
		{"inside a worker", "workers:\n  book_flight:\n    max_atempts: 3\n",
			[]string{`unknown key "max_atempts" in workers.book_flight; did you mean "max_attempts"?`}},
		{"nothing near", "nats:\n  zzzzzzzz: 1\n", []string{`unknown key "zzzzzzzz" in nats (the keys there`}},
		{"every typo at once", "namespce: demo\nlog:\n  levl: info\n", []string{`"namespce"`, `"levl" in log; did you mean "level"?`}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load(writeFile(t, tt.content), nil)
			if err == nil {
				t.Fatal("Load succeeded")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if goWords.MatchString(err.Error()) {
				t.Errorf("error %q speaks Go (a type name or package prefix)", err)
			}
		})
	}
	for _, content := range []string{"nats:\n  zzzzzzzz: 1\n", "workers: {book_hotl: {nast: x}}"} {
		if got := tryLoad(t, content); strings.Contains(strings.ToLower(got), "did you mean") {
			t.Errorf("%q: a key near no key there got a suggestion: %s", content, got)
		}
	}
	// A kind is free text: the key inside it is what is unknown, and a
	// target written as a key is a target, not "rate".
	if got := tryLoad(t, "workers: {book_hotl: {nats: x}}"); !strings.Contains(got, `unknown key "nats" in workers.book_hotl; did you mean "target: nats"?`) {
		t.Errorf("a target written as a key: %s", got)
	}
}

func tryLoad(t *testing.T, content string) string {
	t.Helper()
	_, err := Load(writeFile(t, content), nil)
	if err == nil {
		t.Fatal("Load succeeded")
	}
	return err.Error()
}

func TestLoadUnknownEnvironmentVariableSuggestsTheNearestName(t *testing.T) {
	_, err := Load("", []string{"ESJET_NATS_EMBEDED_LISTEN=none", "ESJET_LOG_LEVL=debug"})
	if err == nil {
		t.Fatal("Load succeeded")
	}
	for _, w := range []string{
		`ESJET_NATS_EMBEDED_LISTEN matches no config field; did you mean "ESJET_NATS_EMBEDDED_LISTEN"?`,
		`ESJET_LOG_LEVL matches no config field; did you mean "ESJET_LOG_LEVEL"?`,
	} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not contain %q", err, w)
		}
	}
}

func TestEditDistance(t *testing.T) {
	for _, tt := range []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"a", "", 1}, {"embeded", "embedded", 1}, {"kitten", "sitting", 3}, {"ééé", "éé", 1},
		{"data_dri", "data_dir", 1}, {"nats", "rate", 2}, {"ca", "abc", 3},
	} {
		if got := EditDistance(tt.a, tt.b); got != tt.want {
			t.Errorf("EditDistance(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}

func TestLoadWrongTypeNamesTheKeyAndWhatItTakes(t *testing.T) {
	for _, tt := range []struct{ content, want string }{
		{"console:\n  allow_actions: maybe\n", `line 2: console.allow_actions is "maybe"; want true or false`},
		{"streams:\n  replicas: two\n", `line 2: streams.replicas is "two"; want a whole number`},
		{"workers:\n  charge:\n    pool: lots\n", `line 3: workers.charge.pool is "lots"; want a whole number`},
		{"aggregates:\n  raw:\n    invoice:\n      events:\n        issued:\n          upcast:\n            - rename: [a, b]\n",
			"line 7: aggregates.raw.invoice.events.issued.upcast[0].rename is a list; want a mapping of keys"},
		{"workers:\n  charge:\n    target: {url: x}\n", "line 3: workers.charge.target is a mapping; want a string (quote it)"},
		// In a flow mapping the section and its field share a line: the
		// path comes from the tree, not from the line.
		{`aggregates: {cache_size: "lots"}`, `line 1: aggregates.cache_size is "lots"; want a whole number`},
		{`workers: {book_hotel: {pool: "four"}}`, `line 1: workers.book_hotel.pool is "four"; want a whole number`},
		{"workers: {charge: {ack_wait: soon}}", `line 1: workers.charge.ack_wait: invalid duration "soon"`},
		{"nats: {external: {urls: nats://a}}", `line 1: nats.external.urls is "nats://a"; want a list`},
		{"aggregates: [1]", "line 1: aggregates is a list; want a mapping of keys"},
	} {
		got := tryLoad(t, tt.content)
		if !strings.Contains(got, tt.want) {
			t.Errorf("error %q does not contain %q", got, tt.want)
		}
		if strings.Contains(got, "unmarshal") || strings.Contains(got, "!!") {
			t.Errorf("error %q speaks YAML internals", got)
		}
	}
}

// TestFileAndEnvironmentReadAValueAlike pins one reading of a bool or a
// number: yaml.v3 alone truncated 1.5 into an int and read "yes" and "on"
// (even quoted) as true, which the environment refused.
func TestFileAndEnvironmentReadAValueAlike(t *testing.T) {
	for _, c := range []struct {
		path, env, text string
		want            string // "" when both accept it
	}{
		{"aggregates.cache_size", "ESJET_AGGREGATES_CACHE_SIZE", "1.5", "want a whole number"},
		{"aggregates.cache_size", "ESJET_AGGREGATES_CACHE_SIZE", "1e3", "want a whole number"},
		{"aggregates.cache_size", "ESJET_AGGREGATES_CACHE_SIZE", "0x10", "want a whole number"},
		{"aggregates.cache_size", "ESJET_AGGREGATES_CACHE_SIZE", "10_000", "want a whole number"},
		{"aggregates.cache_size", "ESJET_AGGREGATES_CACHE_SIZE", "99999999999999999999", "too large"},
		{"aggregates.cache_size", "ESJET_AGGREGATES_CACHE_SIZE", "010", "without leading zeros"}, // YAML alone read 8
		{"aggregates.cache_size", "ESJET_AGGREGATES_CACHE_SIZE", "0", ""},
		{"aggregates.cache_size", "ESJET_AGGREGATES_CACHE_SIZE", "250", ""},
		{"demo.services", "ESJET_DEMO_SERVICES", "yes", "want true or false"},
		{"demo.services", "ESJET_DEMO_SERVICES", "on", "want true or false"},
		{"demo.services", "ESJET_DEMO_SERVICES", "1", "want true or false"},
		{"demo.services", "ESJET_DEMO_SERVICES", "t", "want true or false"},
		{"demo.services", "ESJET_DEMO_SERVICES", "false", ""},
		{"demo.services", "ESJET_DEMO_SERVICES", "FALSE", ""},
	} {
		section, field, _ := strings.Cut(c.path, ".")
		_, fileErr := Load(writeFile(t, section+":\n  "+field+": "+c.text+"\n"), nil)
		_, envErr := Load("", []string{c.env + "=" + c.text})
		for _, got := range []struct {
			from string
			err  error
		}{{"file", fileErr}, {"environment", envErr}} {
			switch {
			case c.want == "" && got.err != nil:
				t.Errorf("%s %s = %s: %v", got.from, c.path, c.text, got.err)
			case c.want != "" && (got.err == nil || !strings.Contains(got.err.Error(), c.path) || !strings.Contains(got.err.Error(), c.want)):
				t.Errorf("%s %s = %s: error %v, want one naming %s and saying %q", got.from, c.path, c.text, got.err, c.path, c.want)
			}
		}
	}
	// A quoted value is a string in the file, whatever it spells; one that
	// would do unquoted is told to drop its quotes.
	for content, want := range map[string]string{
		"demo: {services: \"yes\"}":          `demo.services is "yes"; want true or false`,
		"demo:\n  services: 'true'\n":        "demo.services is \"true\"; want true or false, without quotes",
		"aggregates:\n  cache_size: \"5\"\n": "aggregates.cache_size is \"5\"; want a whole number, without quotes",
	} {
		if got := tryLoad(t, content); !strings.Contains(got, want) {
			t.Errorf("%q: error %q, want it to say %q", content, got, want)
		}
	}
	// A file with nothing in it, or only comments, keeps the defaults.
	for _, content := range []string{"", "# nothing set yet\n", "\n\n"} {
		cfg, err := Load(writeFile(t, content), nil)
		if err != nil || cfg.Namespace != Default().Namespace {
			t.Errorf("file %q: %v (namespace %q), want the defaults", content, err, cfg.Namespace)
		}
	}
}
