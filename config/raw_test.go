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
