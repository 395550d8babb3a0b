package broker

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"
	"golang.org/x/crypto/bcrypt"

	"github.com/esjet/esjet/config"
)

// violations collects the permission errors the server reports to a client.
type violations struct {
	mu   sync.Mutex
	errs []string
}

func (v *violations) handler(_ *nats.Conn, _ *nats.Subscription, err error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.errs = append(v.errs, err.Error())
}

func (v *violations) has(subject string) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, e := range v.errs {
		if strings.Contains(strings.ToLower(e), "permissions violation") && strings.Contains(e, `"`+subject+`"`) {
			return true
		}
	}
	return false
}

// With nats.embedded.users the node connects in-process as role node (it
// creates a stream and appends, and cannot delete it), TCP clients need
// one of the users, and each gets its role's permissions.
func TestEmbeddedUsersWithRolesAndTheNodeInProcess(t *testing.T) {
	hash, err := bcrypt.GenerateFromPassword([]byte("app-pw"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	cfg := embeddedConfig(t, "127.0.0.1:0")
	cfg.Demo.Services = false
	cfg.NATS.Embedded.Users = []config.User{
		{Name: "app", Password: string(hash), Role: config.RoleClient},
		{Name: "ops", Password: "ops-pw", Role: config.RoleAdmin},
	}
	cfg.NATS.Embedded.AllowPlaintextPasswords = true
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	b := start(t, cfg)
	ctx := t.Context()

	// The node, in-process: owns its streams, may not delete them.
	if _, err := b.JetStream().CreateStream(ctx, jetstream.StreamConfig{Name: "DEMO_EVENTS", Subjects: []string{"demo.evt.>"}}); err != nil {
		t.Fatalf("node: create stream: %v", err)
	}
	if _, err := b.JetStream().Publish(ctx, "demo.evt.trip.t1", []byte("{}")); err != nil {
		t.Fatalf("node: append: %v", err)
	}
	short, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if err := b.JetStream().DeleteStream(short, "DEMO_EVENTS"); err == nil {
		t.Fatal("node: deleted its stream")
	}

	url := b.ClientURL()
	if nc, err := nats.Connect(url); err == nil {
		nc.Close()
		t.Fatal("anonymous connection accepted")
	}
	if nc, err := nats.Connect(url, nats.UserInfo("app", "wrong")); err == nil {
		nc.Close()
		t.Fatal("wrong password accepted")
	}
	var v violations
	app, err := nats.Connect(url, nats.UserInfo("app", "app-pw"), nats.ErrorHandler(v.handler))
	if err != nil {
		t.Fatalf("client with the password its bcrypt hash is of: %v", err)
	}
	defer app.Close()
	if err := app.Publish("demo.evt.trip.t1", []byte("forged")); err != nil {
		t.Fatal(err)
	}
	if _, err := app.QueueSubscribe("esjet.demo.>", APIQueue("demo"), func(*nats.Msg) {}); err != nil {
		t.Fatal(err)
	}
	_ = app.Flush()
	deadline := time.Now().Add(5 * time.Second)
	for !v.has("demo.evt.trip.t1") || !v.has("esjet.demo.>") {
		if time.Now().After(deadline) {
			t.Fatalf("client: append and queue group not refused: %q", v.errs)
		}
		time.Sleep(10 * time.Millisecond)
	}

	ops, err := nats.Connect(url, nats.UserInfo("ops", "ops-pw"))
	if err != nil {
		t.Fatalf("admin: %v", err)
	}
	defer ops.Close()
	js, _ := jetstream.New(ops)
	if err := js.DeleteStream(ctx, "DEMO_EVENTS"); err != nil {
		t.Fatalf("admin: delete stream: %v", err)
	}
}

// A CLI command presents nats.embedded.auth: one of the users.
func TestConnectPresentsAuthAsOneOfTheUsers(t *testing.T) {
	cfg := embeddedConfig(t, "127.0.0.1:0")
	cfg.Demo.Services = false
	cfg.NATS.Embedded.Users = []config.User{{Name: "ops", Password: "ops-pw", Role: config.RoleOperator}}
	cfg.NATS.Embedded.AllowPlaintextPasswords = true
	b := start(t, cfg)
	cli := cfg
	cli.NATS.Embedded.Listen = strings.TrimPrefix(b.ClientURL(), "nats://")
	cli.NATS.Embedded.Auth = config.Auth{User: "ops", Password: "ops-pw"}
	nc, err := Connect(t.Context(), cli, "esjet-test")
	if err != nil {
		t.Fatalf("Connect as ops: %v", err)
	}
	nc.Close()
	cli.NATS.Embedded.Auth = config.Auth{}
	if nc, err := Connect(t.Context(), cli, "esjet-test"); err == nil {
		nc.Close()
		t.Fatal("Connect without auth accepted")
	}
}

// WhoAmI names the user the server authenticated: what a DLQ action records.
func TestWhoAmINamesTheAuthenticatedUser(t *testing.T) {
	cfg := embeddedConfig(t, "127.0.0.1:0")
	cfg.Demo.Services = false
	cfg.NATS.Embedded.Users = []config.User{{Name: "oncall", Password: "pw", Role: config.RoleOperator}}
	cfg.NATS.Embedded.AllowPlaintextPasswords = true
	b := start(t, cfg)
	nc, err := nats.Connect(b.ClientURL(), nats.UserInfo("oncall", "pw"), nats.CustomInboxPrefix(InboxPrefix("oncall")))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	id, err := WhoAmI(t.Context(), nc)
	if err != nil || id.User != "oncall" {
		t.Fatalf("WhoAmI = %+v, %v", id, err)
	}
}

func TestWhoAmIWithoutUsersIsEmpty(t *testing.T) {
	b := start(t, embeddedConfig(t, "127.0.0.1:0"))
	id, err := WhoAmI(t.Context(), b.Conn())
	if err != nil || id.User != "" {
		t.Fatalf("WhoAmI = %+v, %v; want no user", id, err)
	}
}

// A CLI connection receives its replies on its user's own prefix: the
// auth user's, or the name in a creds file's user JWT; none without a user.
func TestUserInboxNamesTheConnectionsUser(t *testing.T) {
	cfg := config.Default()
	if got := userInbox(cfg); got != "" {
		t.Errorf("no user: %q", got)
	}
	cfg.NATS.Embedded.Auth.User = "oncall"
	if got := userInbox(cfg); got != "_INBOX_oncall" {
		t.Errorf("embedded auth user: %q", got)
	}
	acc, _ := nkeys.CreateAccount()
	user, _ := nkeys.CreateUser()
	pub, _ := user.PublicKey()
	seed, _ := user.Seed()
	claims := jwt.NewUserClaims(pub)
	claims.Name = "billing"
	tok, err := claims.Encode(acc)
	if err != nil {
		t.Fatal(err)
	}
	creds, err := jwt.FormatUserConfig(tok, seed)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "billing.creds")
	if err := os.WriteFile(file, creds, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg = config.Default()
	cfg.NATS.Mode = config.ModeExternal
	cfg.NATS.External.CredentialsFile = file
	if got := userInbox(cfg); got != "_INBOX_billing" {
		t.Errorf("creds file: %q", got)
	}
}
