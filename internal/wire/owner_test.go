package wire_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// notYet are files that still spell names wire owns, each with the reason
// (none now: the edge hub's names are wire's too).
var notYet = map[string]string{}

// spelled are the shapes of a name wire owns, as a string literal with no
// space in it (prose — a help text, an error message — may name them).
var spelled = []struct {
	what string
	re   *regexp.Regexp
}{
	{"a header", regexp.MustCompile(`^(Esjet|Nats)-`)},
	{"the API prefix", regexp.MustCompile(`^esjet\.$`)},
	// A fragment glued to a namespace: ".evt.", ".outbox.<kind>" (not a
	// config key such as "outbox.ack_wait").
	{"a subject token of a namespace stream", regexp.MustCompile(`^\.(evt|outbox|schedule|dlq|outcome)(\.|$)`)},
	{"a bucket or stream name", regexp.MustCompile(`KV_|OBJ_|\$KV\.|^_(snapshots|receipts|reconcile|EVENTS|OUTBOX|DLQ|OUTCOMES)$|_view_`)},
	{"a KV operation", regexp.MustCompile(`^KV-Operation$`)},
}

// TestNoNameIsSpelledOutsideWire: a subject, header, stream or bucket
// name is written once, in package wire; every other non-test file of the
// module builds it with wire's functions. Changing a name is then a change
// to one package.
func TestNoNameIsSpelledOutsideWire(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	checked := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel == "internal/wire" || strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "node_modules" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") || notYet[rel] != "" {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		checked++
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			s, err := strconv.Unquote(lit.Value)
			if err != nil || strings.ContainsAny(s, " \t\n") {
				return true
			}
			for _, sp := range spelled {
				if sp.re.MatchString(s) {
					t.Errorf("%s: %q spells %s: use package wire's name for it", fset.Position(lit.Pos()), s, sp.what)
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 100 {
		t.Fatalf("checked %d files: the walk missed the module", checked)
	}
}
