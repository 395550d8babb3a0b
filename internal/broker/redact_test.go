package broker

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/esjet/esjet/config"
)

// A password in an external URL reaches neither ClientURL (the ready line,
// the "esjet ready" log) nor the broker's log.
func TestExternalURLCredentialsAreNotShown(t *testing.T) {
	cfg := embeddedConfig(t, "127.0.0.1:0")
	cfg.NATS.Embedded.Auth = config.Auth{User: "esjet", Password: "s3cret-pw"}
	emb := start(t, cfg)
	ext := config.Default()
	ext.NATS.Mode = config.ModeExternal
	ext.NATS.External.URLs = []string{strings.Replace(emb.ClientURL(), "nats://", "nats://esjet:s3cret-pw@", 1)}
	if err := ext.Validate(); err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	b, err := Start(t.Context(), ext, slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelDebug})))
	if err != nil {
		t.Fatalf("Start with credentials in the URL: %v", err)
	}
	defer b.Close(t.Context())
	if got := b.ClientURL(); strings.Contains(got, "s3cret") || !strings.Contains(got, "esjet:[redacted]@127.0.0.1") {
		t.Errorf("ClientURL() = %q", got)
	}
	if strings.Contains(log.String(), "s3cret") {
		t.Errorf("the log shows the password:\n%s", log.String())
	}

	bad := config.Default()
	bad.NATS.Mode = config.ModeExternal
	bad.NATS.External.URLs = []string{"http://esjet:s3cret-pw@a:4222", "nats://tok3n@:4222"}
	err = bad.Validate()
	if err == nil || strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), "tok3n") || !strings.Contains(err.Error(), "urls[0]") {
		t.Errorf("validation error: %v", err)
	}
}
