package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/esjet/esjet/internal/backup"
	"github.com/esjet/esjet/internal/natstest"
)

// esjet backup --out FILE refuses a FILE that exists, says what to do, and
// leaves the file as it was.
func TestBackupRefusesAnExistingFile(t *testing.T) {
	t.Parallel()
	s, ns := provisionedServer(t)
	out := filepath.Join(t.TempDir(), "old.esjet-backup.gz")
	if err := os.WriteFile(out, []byte("the only copy"), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	err := run(t.Context(), []string{"backup", "--url", s.ClientURL(), "--namespace", ns, "--out", out}, nil, &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), "exists") || !strings.Contains(err.Error(), "another --out") {
		t.Errorf("backup onto an existing file: %v; want a refusal naming another --out", err)
	}
	if b, _ := os.ReadFile(out); string(b) != "the only copy" {
		t.Errorf("the existing file holds %.40q… after the backup", b)
	}
	if _, err := os.Stat(out + ".partial"); err == nil {
		t.Error("the refused backup left a .partial file")
	}
	fresh := filepath.Join(t.TempDir(), "new.esjet-backup.gz")
	if err := run(t.Context(), []string{"backup", "--url", s.ClientURL(), "--namespace", ns, "--out", fresh}, nil, &stdout, &stderr); err != nil {
		t.Fatalf("backup to a new file: %v\n%s", err, stderr.String())
	}
	if _, err := os.Stat(fresh); err != nil {
		t.Errorf("backup to a new file: %v", err)
	}
}

// The archive's objects are listed with a count in good English: an
// object of one message says "1 message".
func TestBackupListsOneMessageInTheSingular(t *testing.T) {
	var b bytes.Buffer
	printObjects(&b, backup.Header{Objects: []backup.Object{{Name: "KV_demo_projections", Messages: 1}, {Name: "DEMO_EVENTS", Messages: 2}}})
	if got := b.String(); !strings.Contains(got, "KV_demo_projections") || !regexp.MustCompile(`KV_demo_projections +1 message\n`).MatchString(got) || !strings.Contains(got, "2 messages") {
		t.Errorf("objects listed as\n%s\nwant 1 message and 2 messages", got)
	}
}

// esjet restore --force refuses while a node serves the namespace: the
// restore would delete the streams under its relay, workers and
// projections, and the node would go on reporting ready, wedged.
func TestRestoreRefusesWhileANodeServesTheNamespace(t *testing.T) {
	t.Parallel()
	ns := natstest.Namespace(t)
	flags := startTestNode(t, ns)
	archive := filepath.Join(t.TempDir(), "a.esjet-backup.gz")
	var stdout, stderr bytes.Buffer
	if err := run(t.Context(), append([]string{"backup", "--out", archive}, flags...), nil, &stdout, &stderr); err != nil {
		t.Fatalf("backup: %v\n%s", err, stderr.String())
	}
	stdout.Reset()
	err := run(t.Context(), append([]string{"restore", archive, "--force"}, flags...), nil, &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), "stop the nodes serving namespace "+ns+" first") {
		t.Errorf("restore --force under a live node: %v\n%s; want a refusal saying to stop the nodes first", err, stdout.String())
	}
	if strings.Contains(stdout.String(), "restored namespace") {
		t.Errorf("restore under a live node printed %q", stdout.String())
	}
}
