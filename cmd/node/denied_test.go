package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/esjet/esjet/internal/natstest"
)

// A CLI command whose NATS user's role may not make a request it needs
// fails at once, saying NATS refused it and why, instead of waiting for
// the request's 30 s timeout and failing "context deadline exceeded"; a
// wrong password is named as such, not as a node that is not running.
func TestACommandItsRoleMayNotMakeFailsAtOnceSayingSo(t *testing.T) {
	hash := func(pw string) string {
		h, err := bcrypt.GenerateFromPassword([]byte(pw), bcrypt.MinCost)
		if err != nil {
			t.Fatal(err)
		}
		return string(h)
	}
	dir := t.TempDir()
	addr := natstest.Addr(t)
	conf := filepath.Join(dir, "esjet.yaml")
	if err := os.WriteFile(conf, []byte(fmt.Sprintf(`namespace: rl
http: {listen: none}
demo: {services: false}
nats:
  embedded:
    listen: %s
    data_dir: %s
    users:
      - {name: app, password: %q, role: client}
      - {name: oncall, password: %q, role: operator}
`, addr, filepath.Join(dir, "data"), hash("app-pw"), hash("oncall-pw"))), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var nodeOut, nodeErr natstest.Buffer
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"run", "--config", conf}, nil, &nodeOut, &nodeErr) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("node did not stop")
		}
	})
	waitFor(t, &nodeOut, &nodeErr, done, " ready: ")

	as := func(user, pw string, args ...string) (time.Duration, error) {
		var out, errOut natstest.Buffer
		env := []string{"ESJET_NATS_EMBEDDED_AUTH_USER=" + user, "ESJET_NATS_EMBEDDED_AUTH_PASSWORD=" + pw}
		start := time.Now()
		err := run(t.Context(), append(args, "--config", conf), env, &out, &errOut)
		return time.Since(start), err
	}
	for _, c := range []struct {
		user, pw string
		args     []string
	}{
		{"oncall", "oncall-pw", []string{"send", "trip", "p2", "add_note", "{}"}}, // an operator sends no commands
		{"app", "app-pw", []string{"streams"}},                                    // a client reads no stream info
		{"app", "app-pw", []string{"dlq", "ls"}},                                  // nor dead letters
	} {
		took, err := as(c.user, c.pw, c.args...)
		if err == nil || !strings.Contains(err.Error(), "NATS refused this command") || !strings.Contains(err.Error(), "Permissions Violation") {
			t.Fatalf("%s %v: %v; want NATS's refusal named", c.user, c.args, err)
		}
		if strings.Contains(err.Error(), "start the node once") {
			t.Errorf("%s %v: %v; a refusal is not a stream to provision", c.user, c.args, err)
		}
		if took > 10*time.Second {
			t.Errorf("%s %v took %s: it waited for a timeout", c.user, c.args, took.Round(time.Millisecond))
		}
	}
	_, err := as("oncall", "wrong", "streams")
	if err == nil || !strings.Contains(err.Error(), "refused the credentials") || strings.Contains(err.Error(), "is `esjet run` running") {
		t.Fatalf("a wrong password: %v; want the credentials named, not a node that is not running", err)
	}
	_, err = as("", "", "streams")
	if err == nil || !strings.Contains(err.Error(), "presents none") {
		t.Fatalf("no credentials: %v; want it said that the command presents none", err)
	}
	if _, err := as("oncall", "oncall-pw", "streams"); err != nil {
		t.Fatalf("an operator's esjet streams: %v", err)
	}
}
