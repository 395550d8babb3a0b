package config

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestRawTypesLoadFromTheFileAndAreValidated(t *testing.T) {
	path := writeFile(t, "aggregates:\n  raw:\n    invoice:\n      commands: [send_invoice, void_invoice]\n")
	cfg, err := Load(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Aggregates.Raw["invoice"].Commands; !slices.Equal(got, []string{"send_invoice", "void_invoice"}) {
		t.Fatalf("aggregates.raw.invoice.commands = %v", got)
	}

	bad := Default()
	bad.Aggregates.Raw = map[string]RawType{
		"invoice": {Commands: []string{"send_invoice", "send.invoice", "send_invoice"}},
		"a.b":     {},
	}
	err = bad.Validate()
	var fe *FieldError
	if !errors.As(err, &fe) {
		t.Fatalf("Validate() = %v, want field errors", err)
	}
	for _, want := range []string{`aggregates.raw`, `aggregates.raw.invoice.commands`, `send.invoice`, `listed twice`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %v; want it to mention %s", err, want)
		}
	}

	if _, err := Load(writeFile(t, "aggregates:\n  raw:\n    invoice:\n      comands: [x]\n"), nil); err == nil {
		t.Error("a misspelt key under aggregates.raw loaded; want a strict error")
	}
}

// A raw type named by a word the API routes on could be appended and never
// read back where a type goes: refused, naming the type and the words.
func TestRawTypesThatAreRouteWordsAreRefused(t *testing.T) {
	for _, word := range apiRouteWords {
		c := Default()
		c.Aggregates.Raw = map[string]RawType{word: {}, "invoice": {}}
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), `aggregates.raw: "`+word+`" is not valid: is one of the API's route words`) {
			t.Errorf("raw type %q: Validate() = %v; want a route word error", word, err)
		}
		if strings.Contains(err.Error(), `"invoice"`) {
			t.Errorf("raw type invoice refused: %v", err)
		}
	}
}

// A raw type's event transforms load from the file, and a step that
// contradicts itself or asks for anything but rename, default and remove is
// refused at load, naming the step.
func TestRawEventTransformsLoadAndAreValidated(t *testing.T) {
	path := writeFile(t, `aggregates:
  raw:
    invoice:
      events:
        issued:
          upcast:
            - rename: {amt: amount}
              default: {currency: EUR, lines: []}
            - remove: [legacy]
`)
	cfg, err := Load(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	steps := cfg.Aggregates.Raw["invoice"].Events["issued"].Upcast
	if len(steps) != 2 || steps[0].Rename["amt"] != "amount" || steps[0].Default["currency"] != "EUR" || !slices.Equal(steps[1].Remove, []string{"legacy"}) {
		t.Fatalf("aggregates.raw.invoice.events.issued.upcast = %+v", steps)
	}

	bad := Default()
	bad.Aggregates.Raw = map[string]RawType{"invoice": {Events: map[string]RawEvent{
		"issued": {Upcast: []Transform{
			{Rename: map[string]string{"a": "a"}},
			{Rename: map[string]string{"a": "c", "b": "c"}},
			{Default: map[string]any{"x": 1}, Remove: []string{"x"}},
			{Rename: map[string]string{"address.zip": "address.postcode"}, Default: map[string]any{"/a/b": 1}, Remove: []string{"lines.0"}},
		}},
		"a.b": {},
	}}}
	err = bad.Validate()
	for _, want := range []string{
		`aggregates.raw.invoice.events.issued.upcast[0].rename: "a" is not valid: renames a field to itself`,
		`aggregates.raw.invoice.events.issued.upcast[1].rename: "c" is not valid: both a and b are renamed to it`,
		`aggregates.raw.invoice.events.issued.upcast[2].default: "x" is not valid: is also removed in this step`,
		`aggregates.raw.invoice.events: "a.b" is not valid: an event type is`,
		`aggregates.raw.invoice.events.issued.upcast[3].rename: "address.zip: address.postcode" is not valid: is a path, and a step renames, sets and removes top-level fields only`,
		`aggregates.raw.invoice.events.issued.upcast[3].default: "/a/b" is not valid: is a path`,
		`aggregates.raw.invoice.events.issued.upcast[3].remove: "lines.0" is not valid: is a path`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %v; want it to say %s", err, want)
		}
	}

	_, err = Load(writeFile(t, "aggregates:\n  raw:\n    invoice:\n      events:\n        issued:\n          upcast:\n            - move: {a: b.c}\n"), nil)
	if err == nil || !strings.Contains(err.Error(), `unknown key "move" in aggregates.raw.invoice.events.issued.upcast[0]`) ||
		!strings.Contains(err.Error(), `(the keys there: default, remove, rename)`) {
		t.Errorf("a transform other than rename, default and remove: %v; want it refused, naming it", err)
	}
}

func TestRawPersonalFieldsLoadAndAreValidated(t *testing.T) {
	path := writeFile(t, "aggregates:\n  raw:\n    signup:\n      personal:\n        user_registered: {subject: email, fields: [email, name]}\n")
	cfg, err := Load(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	pf := cfg.Aggregates.Raw["signup"].Personal["user_registered"]
	if pf.Subject != "email" || !slices.Equal(pf.Fields, []string{"email", "name"}) {
		t.Fatalf("aggregates.raw.signup.personal.user_registered = %+v", pf)
	}
	bad := Default()
	bad.Aggregates.Raw = map[string]RawType{"signup": {Personal: map[string]PersonalFields{"user_registered": {}}}}
	err = bad.Validate()
	for _, want := range []string{"aggregates.raw.signup.personal.user_registered.subject", "aggregates.raw.signup.personal.user_registered.fields"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %v; want it to mention %s", err, want)
		}
	}
}
