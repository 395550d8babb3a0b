package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/esjet/esjet/config"
)

// TestReadmeConfigTableMatchesDefaults holds the configuration table of
// docs/configuration.md to config.Default() (and config.DefaultWorker() for
// workers.<kind>.*): a row says `path` (or `path`, `sibling`) and its
// default in backticks (one for all, or one per field); "empty" and "none"
// mean the zero value, "—" nothing to check.
func TestReadmeConfigTableMatchesDefaults(t *testing.T) {
	raw, err := os.ReadFile("../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(raw)
	start := strings.Index(text, "| field | default | meaning |")
	if start < 0 {
		t.Fatal("docs/configuration.md has no configuration table (| field | default | meaning |)")
	}
	ticked := regexp.MustCompile("`([^`]*)`")
	rows := 0
	for _, line := range strings.Split(text[start:], "\n")[2:] {
		if !strings.HasPrefix(line, "|") {
			break
		}
		cells := strings.Split(line, "|")
		if len(cells) < 4 {
			t.Errorf("docs/configuration.md row %q: want | field | default | meaning |", line)
			continue
		}
		var paths []string
		for i, m := range ticked.FindAllStringSubmatch(cells[1], -1) {
			p := m[1]
			if i > 0 && !strings.Contains(p, ".") { // a sibling of the first
				p = paths[0][:strings.LastIndex(paths[0], ".")+1] + p
			}
			paths = append(paths, p)
		}
		def := strings.TrimSpace(cells[2])
		var values []string
		for _, m := range ticked.FindAllStringSubmatch(def, -1) {
			values = append(values, m[1])
		}
		switch {
		case def == "—":
			continue
		case def == "empty" || def == "none":
			values = []string{""}
		case len(values) == 0:
			t.Errorf("docs/configuration.md row %q: the default is not in backticks", line)
			continue
		}
		for i, p := range paths {
			want := values[0]
			if len(values) == len(paths) {
				want = values[i]
			} else if len(values) != 1 {
				t.Errorf("docs/configuration.md row %q: %d defaults for %d fields", line, len(values), len(paths))
				break
			}
			got, ok := defaultOf(p)
			if !ok {
				if !strings.Contains(p, "<type>") {
					t.Errorf("docs/configuration.md row for %s: no such field in config.Config", p)
				}
				continue
			}
			rows++
			if want == "" && got == "[]" { // "empty" or "none" for an empty list
				continue
			}
			if got != want {
				t.Errorf("docs/configuration.md: %s defaults to %q, the table says %q", p, got, want)
			}
		}
	}
	if rows < 20 {
		t.Fatalf("checked only %d config fields of docs/configuration.md: is the table still there?", rows)
	}
}

// defaultOf returns the default of a yaml path, formatted as the table
// writes it ("" for a zero struct or empty list).
func defaultOf(path string) (string, bool) {
	var v reflect.Value
	if rest, ok := strings.CutPrefix(path, "workers.<kind>."); ok {
		v, path = reflect.ValueOf(config.DefaultWorker()), rest
	} else {
		v = reflect.ValueOf(config.Default())
	}
	for _, name := range strings.Split(path, ".") {
		if v.Kind() != reflect.Struct {
			return "", false
		}
		found := false
		for i := 0; i < v.NumField(); i++ {
			if strings.Split(v.Type().Field(i).Tag.Get("yaml"), ",")[0] == name {
				v, found = v.Field(i), true
				break
			}
		}
		if !found {
			return "", false
		}
	}
	if s, ok := v.Interface().(fmt.Stringer); ok {
		return s.String(), true
	}
	switch v.Kind() {
	case reflect.Struct:
		if v.IsZero() {
			return "", true
		}
		return fmt.Sprintf("%+v", v.Interface()), true
	case reflect.Slice, reflect.Map:
		if v.Len() == 0 && v.Kind() == reflect.Slice {
			return "[]", true
		}
		if v.Len() == 0 {
			return "", true
		}
	}
	return fmt.Sprint(v.Interface()), true
}

// TestReadmeCodeMapNamesEveryPackage holds the code map of
// docs/development.md to the module: every package in it exists, and every package is in it (the root
// package as `esjet`).
func TestReadmeCodeMapNamesEveryPackage(t *testing.T) {
	raw, err := os.ReadFile("../docs/development.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(raw)
	start := strings.Index(text, "## Code map")
	if start < 0 {
		t.Fatal("docs/development.md has no ## Code map")
	}
	table := text[strings.Index(text[start:], "| package |")+start:]
	inMap := map[string]bool{}
	ticked := regexp.MustCompile("`([^`]*)`")
	for _, line := range strings.Split(table, "\n")[2:] {
		if !strings.HasPrefix(line, "|") {
			break
		}
		for _, m := range ticked.FindAllStringSubmatch(strings.Split(line, "|")[1], -1) {
			inMap[m[1]] = true
		}
	}
	list := exec.Command("go", "list", "-f", "{{.ImportPath}}", "./...")
	list.Dir = ".."
	out, err := list.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	pkgs := map[string]bool{}
	for _, p := range strings.Fields(string(out)) {
		name := strings.TrimPrefix(strings.TrimPrefix(p, "github.com/esjet/esjet"), "/")
		if name == "" {
			name = "esjet"
		}
		pkgs[name] = true
		if !inMap[name] {
			t.Errorf("docs/development.md code map: package %s is missing", name)
		}
	}
	for name := range inMap {
		if !pkgs[name] {
			t.Errorf("docs/development.md code map: %s is not a package of the module", name)
		}
	}
}
