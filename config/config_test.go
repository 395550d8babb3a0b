package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestDefaultValidates(t *testing.T) {
	cfg := Default()
	if err := cfg.Validate(); err != nil {
		t.Fatalf("Default().Validate() = %v", err)
	}
	if got := cfg.StreamPrefix(); got != "DEMO" {
		t.Errorf("StreamPrefix() = %q, want DEMO", got)
	}
}

// The shipped file is user documentation: it must list the real defaults.
func TestShippedFileEqualsDefault(t *testing.T) {
	cfg, err := Load("esjet.yaml", nil)
	if err != nil {
		t.Fatalf("Load(esjet.yaml) = %v", err)
	}
	if want := Default(); !reflect.DeepEqual(cfg, want) {
		t.Errorf("esjet.yaml differs from Default():\n got %+v\nwant %+v", cfg, want)
	}
}

func TestShippedFileListsEveryField(t *testing.T) {
	data, err := os.ReadFile("esjet.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for name, f := range envFields() {
		leaf := f.path[strings.LastIndex(f.path, ".")+1:]
		if !strings.Contains(string(data), leaf+":") {
			t.Errorf("esjet.yaml does not mention %s (%s)", f.path, name)
		}
	}
}

func writeFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "esjet.yaml")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestLoadFile(t *testing.T) {
	path := writeFile(t, "namespace: trips\nstreams:\n  duplicate_window: 5m\n  max_message_size: 2MiB\n")
	cfg, err := Load(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Namespace != "trips" || cfg.Streams.DuplicateWindow.Std() != 5*time.Minute || cfg.Streams.MaxMessageSize != 2*MiB {
		t.Errorf("got %+v", cfg)
	}
	if cfg.NATS.Embedded.Listen != "127.0.0.1:4222" {
		t.Errorf("unset field lost its default: listen = %q", cfg.NATS.Embedded.Listen)
	}
}

func TestLoadErrors(t *testing.T) {
	tests := []struct {
		name    string
		content string
		want    []string
	}{
		{"unknown key", "namespace: demo\nnats:\n  embeded:\n    listen: none\n", []string{"line 3", "embeded"}},
		{"bad duration", "streams:\n  duplicate_window: 2x\n", []string{"line 2", `"2x"`}},
		{"bad size", "streams:\n  max_message_size: lots\n", []string{"line 2", `"lots"`}},
		{"wrong type", "streams:\n  replicas: three\n", []string{"line 2", "three"}},
		{"two documents", "namespace: a\n---\nnamespace: b\n", []string{"more than one YAML document"}},
		{"invalid value", "nats:\n  embedded:\n    sync: sometimes\n", []string{`nats.embedded.sync: "sometimes" is not valid: use "always" or "interval"`}},
	}
	for _, tt := range tests {
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
		})
	}
}

func TestLoadMissingExplicitFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nope.yaml")
	_, err := Load(path, nil)
	if err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("Load(%s) = %v, want an error naming the file", path, err)
	}
}

func TestLoadEmptyPathWithoutDefaultFileUsesDefaults(t *testing.T) {
	t.Chdir(t.TempDir())
	cfg, err := Load("", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(cfg, Default()) {
		t.Errorf("got %+v", cfg)
	}
}

func TestLoadEmptyPathReadsDefaultFileOrEnvConfig(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	if err := os.Mkdir("config", 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(DefaultPath, []byte("namespace: fromfile\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load("", nil)
	if err != nil || cfg.Namespace != "fromfile" {
		t.Fatalf("Load(\"\") = %q, %v; want namespace from %s", cfg.Namespace, err, DefaultPath)
	}
	other := writeFile(t, "namespace: fromenv\n")
	cfg, err = Load("", []string{EnvConfigFile + "=" + other})
	if err != nil || cfg.Namespace != "fromenv" {
		t.Fatalf("Load with ESJET_CONFIG = %q, %v; want namespace from %s", cfg.Namespace, err, other)
	}
}

func TestEnvOverrides(t *testing.T) {
	file := writeFile(t, "namespace: fromfile\n")
	// R3 is only valid against a cluster, and a cluster needs URLs.
	cluster := []string{"ESJET_NATS_MODE=external", "ESJET_NATS_EXTERNAL_URLS=nats://x:4222"}
	tests := []struct {
		name  string
		env   []string
		check func(Config) bool
	}{
		{"string beats file", []string{"ESJET_NAMESPACE=fromenv"}, func(c Config) bool { return c.Namespace == "fromenv" }},
		{"nested string", []string{"ESJET_NATS_EMBEDDED_DATA_DIR=/var/lib/esjet"}, func(c Config) bool { return c.NATS.Embedded.DataDir == "/var/lib/esjet" }},
		{"int", append([]string{"ESJET_STREAMS_REPLICAS=3"}, cluster...), func(c Config) bool { return c.Streams.Replicas == 3 }},
		{"list", []string{"ESJET_NATS_MODE=external", "ESJET_NATS_EXTERNAL_URLS=nats://a:4222, nats://b:4222"}, func(c Config) bool {
			return slices.Equal(c.NATS.External.URLs, []string{"nats://a:4222", "nats://b:4222"})
		}},
		{"duration", []string{"ESJET_STREAMS_DUPLICATE_WINDOW=5m"}, func(c Config) bool { return c.Streams.DuplicateWindow.Std() == 5*time.Minute }},
		{"duration in days", []string{"ESJET_STREAMS_OUTBOX_MAX_AGE=30d"}, func(c Config) bool { return c.Streams.OutboxMaxAge.Std() == 30*24*time.Hour }},
		{"byte size", []string{"ESJET_STREAMS_MAX_MESSAGE_SIZE=512KiB"}, func(c Config) bool { return c.Streams.MaxMessageSize == 512*KiB }},
		{"other variables ignored", []string{"PATH=/bin", "ESJETX=1", "esjet_namespace=x"}, func(c Config) bool { return c.Namespace == "fromfile" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Load(file, tt.env)
			if err != nil {
				t.Fatal(err)
			}
			if !tt.check(cfg) {
				t.Errorf("%s not applied: %+v", tt.env, cfg)
			}
		})
	}
}

func TestEveryFieldHasAnEnvVariable(t *testing.T) {
	fields := envFields()
	for _, name := range []string{
		"ESJET_NAMESPACE", "ESJET_NATS_MODE", "ESJET_NATS_EMBEDDED_DATA_DIR",
		"ESJET_NATS_EMBEDDED_AUTH_PASSWORD", "ESJET_NATS_EXTERNAL_TLS_CA_FILE",
		"ESJET_NATS_EXTERNAL_URLS", "ESJET_STREAMS_DUPLICATE_WINDOW", "ESJET_LOG_FORMAT",
		"ESJET_AGGREGATES_SNAPSHOT_EVERY", "ESJET_AGGREGATES_IDEMPOTENCY_HORIZON",
		"ESJET_CONSOLE_ALLOW_ACTIONS",
		"ESJET_HTTP_METRICS_LISTEN",
		"ESJET_PROJECTIONS_LEASE_TTL", "ESJET_PROJECTIONS_HEARTBEAT", "ESJET_STREAMS_RECEIPTS_MAX_AGE", "ESJET_STREAMS_UNSERVED_VIEWS_MAX_AGE", "ESJET_ARCHIVE_DIR", "ESJET_ARCHIVE_EVERY", "ESJET_DEMO_BUILD",
	} {
		if _, ok := fields[name]; !ok {
			t.Errorf("no field for %s", name)
		}
	}
	// Every leaf can be set from text; an unsupported type would fail here.
	if len(fields) != 77 {
		t.Errorf("got %d env fields, want 77 (update this count when the schema changes)", len(fields))
	}
	for name, f := range fields {
		var c Config
		v := reflectField(&c, f.index)
		val := "1"
		if _, ok := v.Addr().Interface().(*Duration); ok {
			val = "1s"
		}
		if v.Kind() == reflect.Bool {
			val = "true"
		}
		if err := setField(v, val); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestEnvErrors(t *testing.T) {
	tests := []struct {
		env  string
		want []string
	}{
		{"ESJET_NATS_EMBEDED_LISTEN=none", []string{"ESJET_NATS_EMBEDED_LISTEN", "matches no config field"}},
		{"ESJET_STREAMS_REPLICAS=three", []string{"ESJET_STREAMS_REPLICAS", `"three"`, "streams.replicas"}},
		{"ESJET_STREAMS_DUPLICATE_WINDOW=soon", []string{"ESJET_STREAMS_DUPLICATE_WINDOW", `"soon"`}},
		{"ESJET_STREAMS_MAX_MESSAGE_SIZE=1XB", []string{"ESJET_STREAMS_MAX_MESSAGE_SIZE", `"1XB"`}},
	}
	for _, tt := range tests {
		t.Run(tt.env, func(t *testing.T) {
			t.Chdir(t.TempDir())
			_, err := Load("", []string{tt.env})
			if err == nil {
				t.Fatal("Load succeeded")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func fieldErrors(t *testing.T, err error) map[string]*FieldError {
	t.Helper()
	got := map[string]*FieldError{}
	var walk func(error)
	walk = func(err error) {
		var fe *FieldError
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range j.Unwrap() {
				walk(e)
			}
		} else if errors.As(err, &fe) {
			got[fe.Path] = fe
		} else if err != nil {
			t.Errorf("not a *FieldError: %v", err)
		}
	}
	walk(err)
	return got
}

func TestValidateReportsEveryProblem(t *testing.T) {
	cfg := Default()
	cfg.Namespace = "Bad.NS"
	cfg.NATS.Embedded.Sync = "sometimes"
	cfg.Streams.Replicas = 2
	cfg.Streams.MaxMessageSize = 16 * MiB
	cfg.Log.Format = "xml"
	got := fieldErrors(t, cfg.Validate())
	want := []string{"namespace", "nats.embedded.sync", "streams.replicas", "streams.max_message_size", "log.format"}
	if len(got) != len(want) {
		t.Errorf("got %d problems, want %d: %v", len(got), len(want), cfg.Validate())
	}
	for _, p := range want {
		if got[p] == nil {
			t.Errorf("no problem reported for %s", p)
		}
	}
	if e := got["nats.embedded.sync"]; e != nil && e.Error() != `nats.embedded.sync: "sometimes" is not valid: use "always" or "interval"` {
		t.Errorf("message = %q", e.Error())
	}
}

func TestValidateRules(t *testing.T) {
	tests := []struct {
		name   string
		modify func(*Config)
		path   string // "" = valid
	}{
		{"sync interval needs a period", func(c *Config) { c.NATS.Embedded.Sync = SyncInterval; c.NATS.Embedded.SyncInterval = 0 }, "nats.embedded.sync_interval"},
		{"sync interval ok", func(c *Config) { c.NATS.Embedded.Sync = SyncInterval }, ""},
		{"namespace named like another's clients account", func(c *Config) { c.Namespace = "demo_clients" }, "namespace"},
		{"namespace named like another's receiver account", func(c *Config) { c.Namespace = "a_recv_b" }, "namespace"},
		{"namespace with a dash is fine", func(c *Config) { c.Namespace = "demo-clients" }, ""},
		{"memory limit off", func(c *Config) { c.Memory.Limit = 0 }, ""},
		{"memory limit too small", func(c *Config) { c.Memory.Limit = 16 * MiB }, "memory.limit"},
		{"cache bytes negative", func(c *Config) { c.Aggregates.CacheBytes = -1 }, "aggregates.cache_bytes"},
		{"snapshot span negative", func(c *Config) { c.Aggregates.SnapshotSpan = -1 }, "aggregates.snapshot_span"},
		{"projection heartbeat too short", func(c *Config) { c.Projections.Heartbeat = Duration(10 * time.Millisecond) }, "projections.heartbeat"},
		{"projection lease not past two heartbeats", func(c *Config) { c.Projections.LeaseTTL = Duration(1500 * time.Millisecond) }, "projections.lease_ttl"},
		{"projection lease as long as the heartbeat", func(c *Config) { c.Projections.Heartbeat = c.Projections.LeaseTTL }, "projections.lease_ttl"},
		{"projection lease twice the heartbeat", func(c *Config) {
			c.Projections.Heartbeat, c.Projections.LeaseTTL = Duration(200*time.Millisecond), Duration(400*time.Millisecond)
		}, ""},
		{"listen none", func(c *Config) { c.NATS.Embedded.Listen = ListenNone }, ""},
		{"listen port 0", func(c *Config) { c.NATS.Embedded.Listen = "127.0.0.1:0" }, ""},
		{"listen ipv6 loopback", func(c *Config) { c.NATS.Embedded.Listen = "[::1]:4222" }, ""},
		{"listen localhost", func(c *Config) { c.NATS.Embedded.Listen = "localhost:4222" }, ""},
		{"listen port too big", func(c *Config) { c.NATS.Embedded.Listen = "127.0.0.1:70000" }, "nats.embedded.listen"},
		{"listen port not numeric", func(c *Config) { c.NATS.Embedded.Listen = "127.0.0.1:nats" }, "nats.embedded.listen"},
		{"listen without port", func(c *Config) { c.NATS.Embedded.Listen = "127.0.0.1" }, "nats.embedded.listen"},
		{"non-loopback listen in external mode is not used", func(c *Config) {
			c.NATS.Mode = ModeExternal
			c.NATS.External.URLs = []string{"nats://n1:4222"}
			c.NATS.Embedded.Listen = "0.0.0.0:4222"
		}, ""},
		{"user without password", func(c *Config) { c.NATS.Embedded.Auth.User = "u" }, "nats.embedded.auth"},
		{"password without user", func(c *Config) { c.NATS.External.Auth.Password = "p" }, "nats.external.auth"},
		{"token and user", func(c *Config) { c.NATS.Embedded.Auth = Auth{User: "u", Password: "p", Token: "t"} }, "nats.embedded.auth"},
		{"cert without key", func(c *Config) { c.NATS.Embedded.TLS.CertFile = "c.pem" }, "nats.embedded.tls"},
		{"external needs urls", func(c *Config) { c.NATS.Mode = ModeExternal }, "nats.external.urls"},
		{"external bad scheme", func(c *Config) {
			c.NATS.Mode = ModeExternal
			c.NATS.External.URLs = []string{"http://n1:4222"}
		}, "nats.external.urls[0]"},
		{"external ok", func(c *Config) {
			c.NATS.Mode = ModeExternal
			c.NATS.External.URLs = []string{"nats://n1:4222", "tls://n2:4222", "wss://n3"}
			c.Streams.Replicas = 3
		}, ""},
		{"mode", func(c *Config) { c.NATS.Mode = "cluster" }, "nats.mode"},
		{"embedded R3", func(c *Config) { c.Streams.Replicas = 3 }, "streams.replicas"},
		{"duplicate window zero", func(c *Config) { c.Streams.DuplicateWindow = 0 }, "streams.duplicate_window"},
		{"outbox shorter than window", func(c *Config) { c.Streams.OutboxMaxAge = Duration(time.Minute) }, "streams.outbox_max_age"},
		{"receipts kept no longer than OUTBOX", func(c *Config) { c.Streams.ReceiptsMaxAge = Duration(168 * time.Hour) }, "streams.receipts_max_age"},
		{"receipts kept inside the margin", func(c *Config) { c.Streams.ReceiptsMaxAge = Duration(191 * time.Hour) }, "streams.receipts_max_age"},
		{"receipts kept outbox age + margin", func(c *Config) { c.Streams.ReceiptsMaxAge = Duration(192 * time.Hour) }, ""},
		{"receipts negative", func(c *Config) { c.Streams.ReceiptsMaxAge = -1 }, "streams.receipts_max_age"},
		{"unserved views negative", func(c *Config) { c.Streams.UnservedViewsMaxAge = -1 }, "streams.unserved_views_max_age"},
		{"unserved views kept until a rebuild", func(c *Config) { c.Streams.UnservedViewsMaxAge = 0 }, ""},
		{"message size too small", func(c *Config) { c.Streams.MaxMessageSize = 1000 }, "streams.max_message_size"},
		{"message size 8MiB", func(c *Config) { c.Streams.MaxMessageSize = 8 * MiB }, ""},
		{"http none", func(c *Config) { c.HTTP.Listen = ListenNone }, ""},
		{"http bad", func(c *Config) { c.HTTP.Listen = "8080" }, "http.listen"},
		{"metrics listener bad", func(c *Config) { c.HTTP.MetricsListen = "9090" }, "http.metrics_listen"},
		{"metrics listener remote", func(c *Config) { c.HTTP.MetricsListen = "0.0.0.0:9090" }, ""},
		{"log level", func(c *Config) { c.Log.Level = "trace" }, "log.level"},
		{"connect timeout", func(c *Config) { c.NATS.External.ConnectTimeout = 0 }, "nats.external.connect_timeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := Default()
			tt.modify(&cfg)
			got := fieldErrors(t, cfg.Validate())
			if tt.path == "" {
				if len(got) != 0 {
					t.Fatalf("Validate() = %v, want nil", cfg.Validate())
				}
				return
			}
			if got[tt.path] == nil || len(got) != 1 {
				t.Fatalf("Validate() = %v, want one problem at %s", cfg.Validate(), tt.path)
			}
		})
	}
}

func TestNonLoopbackListenNeedsAuthAndTLS(t *testing.T) {
	tests := []struct {
		name   string
		listen string
		auth   Auth
		tls    TLS
		refuse string // substring of the reason, "" = accepted
	}{
		{"all interfaces bare", "0.0.0.0:4222", Auth{}, TLS{}, "listening on 0.0.0.0:4222 without auth and TLS would expose the event log to the network; set nats.embedded.users (or auth) and nats.embedded.tls, or listen on 127.0.0.1"},
		{"empty host", ":4222", Auth{}, TLS{}, "without auth and TLS"},
		{"hostname", "nats.example.com:4222", Auth{}, TLS{}, "without auth and TLS"},
		{"auth only", "10.0.0.5:4222", Auth{Token: "s3cret"}, TLS{}, "without TLS"},
		{"tls only", "10.0.0.5:4222", Auth{}, TLS{CertFile: "c.pem", KeyFile: "k.pem"}, "without auth"},
		{"auth and tls", "0.0.0.0:4222", Auth{User: "u", Password: "p"}, TLS{CertFile: "c.pem", KeyFile: "k.pem"}, ""},
		{"loopback bare", "127.0.0.2:4222", Auth{}, TLS{}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := Default()
			cfg.NATS.Embedded.Listen = tt.listen
			cfg.NATS.Embedded.Auth = tt.auth
			cfg.NATS.Embedded.TLS = tt.tls
			err := cfg.Validate()
			if tt.refuse == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if e := fieldErrors(t, err)["nats.embedded.listen"]; e == nil || !strings.Contains(e.Reason, tt.refuse) {
				t.Fatalf("Validate() = %v, want a listen error containing %q", err, tt.refuse)
			}
		})
	}
}

func TestRedacted(t *testing.T) {
	cfg := Default()
	cfg.NATS.Embedded.Auth = Auth{User: "u", Password: "hunter2"}
	cfg.NATS.External.Auth = Auth{Token: "tok3n"}
	cfg.NATS.External.URLs = []string{"nats://u:pw9@a:4222", "nats://b:4222"}
	r := cfg.Redacted()
	s := strings.Join(append(r.NATS.External.URLs, r.NATS.Embedded.Auth.Password, r.NATS.External.Auth.Token), " ")
	for _, secret := range []string{"hunter2", "tok3n", "pw9"} {
		if strings.Contains(s, secret) {
			t.Errorf("redacted config still holds %q: %s", secret, s)
		}
	}
	if r.NATS.Embedded.Auth.User != "u" || r.NATS.External.URLs[1] != "nats://b:4222" {
		t.Errorf("redaction removed too much: %+v", r.NATS)
	}
	if cfg.NATS.Embedded.Auth.Password != "hunter2" || cfg.NATS.External.URLs[0] != "nats://u:pw9@a:4222" {
		t.Error("Redacted modified the original")
	}
}

func TestRemoteHTTPNeedsAllowRemote(t *testing.T) {
	c := Default()
	c.HTTP.Listen = "0.0.0.0:8080"
	err := c.Validate()
	if err == nil || !strings.Contains(err.Error(), "http.listen") || !strings.Contains(err.Error(), "allow_remote") {
		t.Fatalf("non-loopback http.listen: %v", err)
	}
	c.HTTP.AllowRemote = true
	if err := c.Validate(); err != nil {
		t.Fatalf("with allow_remote: %v", err)
	}
	c = Default()
	c.HTTP.Listen = "localhost:0"
	if err := c.Validate(); err != nil {
		t.Fatalf("loopback: %v", err)
	}
}

func TestWorkersAreValidatedPerKind(t *testing.T) {
	c := Default()
	c.Workers = map[string]Worker{
		"ok_nats":  {Target: TargetNATS, Subject: "svc.do"},
		"ok_http":  {Target: TargetHTTP, URL: "http://127.0.0.1:9/x"},
		"bad.kind": {Target: TargetGo},
		"no_subj":  {Target: TargetNATS},
		"bad_url":  {Target: TargetHTTP, URL: "ftp://x"},
		"bad_tgt":  {Target: "smtp"},
		"neg":      {Target: TargetGo, Pool: -1, AckWait: Duration(time.Millisecond)},
	}
	err := c.Validate()
	if err == nil {
		t.Fatal("invalid workers accepted")
	}
	for _, want := range []string{"workers.bad.kind", "workers.no_subj.subject", "workers.bad_url.url", "workers.bad_tgt.target", "workers.neg.pool", "workers.neg.ack_wait"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %s:\n%v", want, err)
		}
	}
	if strings.Contains(err.Error(), "ok_nats") || strings.Contains(err.Error(), "ok_http") {
		t.Errorf("valid workers reported:\n%v", err)
	}
}

func TestEmbeddedUsersAreValidated(t *testing.T) {
	const hash = "$2a$11$abcdefghijklmnopqrstuuQ9n0VhV3gFfJ3r0m2x9J6z4mJ0K9P6e"
	const nkey = "UDXU4RCSJNZOIQHZNWXHXORDPRTGNJAHAHFRGZNEEJCPQTT2M7NLCNF4"
	cases := []struct {
		name  string
		users []User
		plain bool
		want  string // "" = valid
	}{
		{"bcrypt client", []User{{Name: "app", Password: hash, Role: RoleClient}}, false, ""},
		{"nkey receiver", []User{{Name: "billing", NKey: nkey, Role: RoleReceiver, Subject: "billing.charge", Bucket: "keys"}}, false, ""},
		{"plaintext refused", []User{{Name: "app", Password: "secret", Role: RoleClient}}, false, "nats.embedded.users[0].password: \"[redacted]\" is not valid: is not a bcrypt hash"},
		{"plaintext allowed", []User{{Name: "app", Password: "secret", Role: RoleClient}}, true, ""},
		{"both", []User{{Name: "app", Password: hash, NKey: nkey, Role: RoleClient}}, false, "set either password"},
		{"neither", []User{{Name: "app", Role: RoleClient}}, false, "set either password"},
		{"bad nkey", []User{{Name: "app", NKey: "SUABC", Role: RoleClient}}, false, "public user nkey"},
		{"unknown role", []User{{Name: "app", Password: hash, Role: "root"}}, false, `nats.embedded.users[0].role: "root" is not valid`},
		{"receiver without subject", []User{{Name: "r", Password: hash, Role: RoleReceiver}}, false, "one literal subject"},
		{"receiver wildcard", []User{{Name: "r", Password: hash, Role: RoleReceiver, Subject: "billing.>"}}, false, "one literal subject"},
		{"subject on a client", []User{{Name: "c", Password: hash, Role: RoleClient, Subject: "x"}}, false, "for role receiver only"},
		{"duplicate", []User{{Name: "a", Password: hash, Role: RoleClient}, {Name: "a", Password: hash, Role: RoleAdmin}}, false, "listed twice"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := Default()
			cfg.NATS.Embedded.Users = c.users
			cfg.NATS.Embedded.AllowPlaintextPasswords = c.plain
			err := cfg.Validate()
			if c.want == "" {
				if err != nil {
					t.Fatalf("Validate() = %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Validate() = %v, want %q", err, c.want)
			}
			if strings.Contains(err.Error(), "secret") {
				t.Errorf("the error shows the password: %v", err)
			}
		})
	}
	cfg := Default()
	cfg.NATS.Embedded.Listen = "0.0.0.0:4222"
	cfg.NATS.Embedded.Users = []User{{Name: "app", Password: hash, Role: RoleClient}}
	cfg.NATS.Embedded.TLS = TLS{CertFile: "c.pem", KeyFile: "k.pem"}
	if err := cfg.Validate(); err != nil {
		t.Errorf("users and TLS on 0.0.0.0: %v", err)
	}
	if r := cfg.Redacted(); r.NATS.Embedded.Users[0].Password != "[redacted]" || cfg.NATS.Embedded.Users[0].Password != hash {
		t.Errorf("Redacted users: %+v (original %+v)", r.NATS.Embedded.Users, cfg.NATS.Embedded.Users)
	}
}

func TestExternalPasswordOverPlaintextToARemoteHostIsRefused(t *testing.T) {
	cases := []struct {
		urls  []string
		auth  Auth
		tls   TLS
		allow bool
		ok    bool
	}{
		{[]string{"nats://n1:4222"}, Auth{User: "u", Password: "pw"}, TLS{}, false, false},
		{[]string{"nats://tok3n@n1:4222"}, Auth{}, TLS{}, false, false},
		{[]string{"nats://n1:4222"}, Auth{Token: "t"}, TLS{}, false, false},
		{[]string{"tls://n1:4222"}, Auth{User: "u", Password: "pw"}, TLS{}, false, true},
		{[]string{"nats://n1:4222"}, Auth{User: "u", Password: "pw"}, TLS{CAFile: "ca.pem"}, false, true},
		{[]string{"nats://127.0.0.1:4222"}, Auth{User: "u", Password: "pw"}, TLS{}, false, true},
		{[]string{"nats://n1:4222"}, Auth{}, TLS{}, false, true},
		{[]string{"nats://n1:4222"}, Auth{User: "u", Password: "pw"}, TLS{}, true, true},
	}
	for _, c := range cases {
		cfg := Default()
		cfg.NATS.Mode = ModeExternal
		cfg.NATS.External.URLs, cfg.NATS.External.Auth, cfg.NATS.External.TLS, cfg.NATS.External.AllowPlaintextAuth = c.urls, c.auth, c.tls, c.allow
		err := cfg.Validate()
		if c.ok != (err == nil) {
			t.Errorf("%v %+v %+v allow=%v: %v", c.urls, c.auth, c.tls, c.allow, err)
		}
		if err != nil && (strings.Contains(err.Error(), "tok3n") || !strings.Contains(err.Error(), "allow_plaintext_auth")) {
			t.Errorf("%v: %v", c.urls, err)
		}
	}
}
