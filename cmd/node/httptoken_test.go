package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/esjet/esjet/config"
)

// esjet http-token prints a config entry that loads and validates, whose
// hash is the SHA-256 of the token printed last; tokens differ run to run.
func TestHTTPToken_PrintsAnEntryWhoseHashIsTheToken(t *testing.T) {
	var tokens []string
	for range 2 {
		var stdout, stderr bytes.Buffer
		if err := run(t.Context(), []string{"http-token", "--name", "oncall", "--role", "operator"}, nil, &stdout, &stderr); err != nil {
			t.Fatalf("http-token: %v (%s)", err, stderr.String())
		}
		lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
		tok := lines[len(lines)-1]
		if !strings.HasPrefix(tok, tokenPrefix) || len(tok) < 40 {
			t.Fatalf("last line %q is not a token", tok)
		}
		var entries []config.HTTPToken
		if err := yaml.Unmarshal([]byte(strings.Join(lines[:len(lines)-1], "\n")), &entries); err != nil || len(entries) != 1 {
			t.Fatalf("the lines before the token are not one YAML list entry: %v\n%s", err, stdout.String())
		}
		sum := sha256.Sum256([]byte(tok))
		if e := entries[0]; e.Name != "oncall" || e.Role != "operator" || e.SHA256 != hex.EncodeToString(sum[:]) {
			t.Fatalf("entry %+v, want oncall, operator and the token's SHA-256", e)
		}
		c := config.Default()
		c.HTTP.Auth.Tokens = entries
		if err := c.Validate(); err != nil {
			t.Fatalf("the printed entry does not validate: %v", err)
		}
		tokens = append(tokens, tok)
	}
	if tokens[0] == tokens[1] {
		t.Fatal("two runs printed the same token")
	}
	for _, args := range [][]string{{"--name", "app", "--role", "node"}, {"--name", "a b", "--role", "client"}, {"--role", "client"}} {
		var stdout, stderr bytes.Buffer
		if err := run(t.Context(), append([]string{"http-token"}, args...), nil, &stdout, &stderr); err == nil || stdout.Len() > 0 {
			t.Errorf("http-token %v: %v, printed %q; want an error and no token", args, err, stdout.String())
		}
	}
}
