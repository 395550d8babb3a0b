package main

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/esjet/esjet/config"
)

// tokenPrefix marks an esjet HTTP token, for secret scanners and readers.
const tokenPrefix = "esjet_"

func newHTTPTokenCmd(g *globals) *cobra.Command {
	var name, role string
	cmd := &cobra.Command{
		Use:   "http-token",
		Short: "Make a bearer token for the HTTP API and console, and the http.auth.tokens entry that holds its hash",
		Long: `Make a random bearer token (32 bytes from the OS) for the HTTP listener and print
the line to add under http.auth.tokens (its SHA-256: the config never holds the
token), then the token itself, last, once. Give the token to its holder; it is
sent as "Authorization: Bearer <token>".

Roles: client uses the API under /v1/ (commands, state, history, raw appends,
multi, views, the log); operator reads everything (the API, the console,
/metrics) and retries or discards dead letters in the console
(console.allow_actions); admin may do everything.`,
		Example: `  esjet http-token --name app --role client
  TOKEN=$(esjet http-token --name oncall --role operator | tail -1)`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			tok, entry, err := makeHTTPToken(name, role)
			if err != nil {
				return err
			}
			fmt.Fprintf(g.stdout, "# add under http.auth.tokens (the hash only):\n- {name: %s, role: %s, sha256: %s}\n# the token, shown once: give it to %s, keep it secret\n%s\n",
				entry.Name, entry.Role, entry.SHA256, entry.Name, tok)
			return nil
		},
	}
	cmd.Flags().StringVar(&name, "name", "", "who holds the token (in logs and audit records), e.g. app or oncall")
	cmd.Flags().StringVar(&role, "role", "", "client, operator or admin")
	_ = cmd.MarkFlagRequired("name")
	_ = cmd.MarkFlagRequired("role")
	return cmd
}

// makeHTTPToken returns a new token and its config entry, refusing a name
// or role the config would refuse (with the config's own words).
func makeHTTPToken(name, role string) (string, config.HTTPToken, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", config.HTTPToken{}, fmt.Errorf("http-token: read random bytes: %w", err)
	}
	tok := tokenPrefix + base64.RawURLEncoding.EncodeToString(b)
	sum := sha256.Sum256([]byte(tok))
	entry := config.HTTPToken{Name: name, Role: role, SHA256: hex.EncodeToString(sum[:])}
	check := config.Default()
	check.HTTP.Auth.Tokens = []config.HTTPToken{entry}
	if err := check.Validate(); err != nil {
		return "", config.HTTPToken{}, fmt.Errorf("http-token: %w", err)
	}
	return tok, entry, nil
}
