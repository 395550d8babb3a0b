package backup

import (
	"bytes"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/natstest"
	"github.com/esjet/esjet/internal/streams"
)

// archiveOf provisions namespace ns on js, writes a few decisions and
// commands, and returns its archive.
func archiveOf(t *testing.T, js jetstream.JetStream, ns string) []byte {
	t.Helper()
	ctx := t.Context()
	if _, err := streams.Provision(ctx, js, ns, streams.ProvisionConfig{}, nil); err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		if _, err := js.Publish(ctx, ns+".evt.trip.t"+strconv.Itoa(i), []byte(`{"n":`+strconv.Itoa(i)+`}`)); err != nil {
			t.Fatal(err)
		}
		if _, err := js.Publish(ctx, ns+".outbox.book_flight", []byte("c"+strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
	}
	var archive bytes.Buffer
	if _, err := Backup(ctx, js, ns, &archive, Options{}); err != nil {
		t.Fatal(err)
	}
	return archive.Bytes()
}

// streamNames lists every stream on the server js reaches.
func streamNames(t *testing.T, js jetstream.JetStream) []string {
	t.Helper()
	var names []string
	l := js.StreamNames(t.Context())
	for n := range l.Name() {
		names = append(names, n)
	}
	if err := l.Err(); err != nil {
		t.Fatal(err)
	}
	return names
}

// A restore of an archive cut short fails having created some objects: it
// deletes them, says so, and the restore of the whole archive that follows
// is not refused for what the first one left.
func TestRestoreOfACutArchiveLeavesNothing(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	_, js := natstest.Connect(t, natstest.RunServer(t))
	ns := natstest.Namespace(t)
	archive := archiveOf(t, js, ns)

	_, js2 := natstest.Connect(t, natstest.RunServer(t))
	cut := archive[:len(archive)*3/4]
	_, err := Restore(ctx, js2, opener(cut), RestoreOptions{Namespace: "zz2"})
	if !errors.Is(err, ErrCutShort) {
		t.Fatalf("restore of a cut archive: %v, want ErrCutShort", err)
	}
	if !strings.HasPrefix(err.Error(), "restore: ") || !strings.Contains(err.Error(), "it left nothing on the server") {
		t.Errorf("restore of a cut archive: %q; want it to start with restore: and say it left nothing", err)
	}
	if left := streamNames(t, js2); len(left) > 0 {
		t.Errorf("a failed restore left %v on the server", left)
	}
	if _, err := Restore(ctx, js2, opener(archive), RestoreOptions{Namespace: "zz2"}); err != nil {
		t.Errorf("restore of the whole archive after a failed one: %v", err)
	}
}

// Restore's own errors say restore, not backup: a user ran esjet restore.
func TestRestoreErrorsSayRestore(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	_, js := natstest.Connect(t, natstest.RunServer(t))
	ns := natstest.Namespace(t)
	archive := archiveOf(t, js, ns)
	for name, err := range map[string]error{
		"not an archive": func() error { _, err := Restore(ctx, js, opener([]byte("junk")), RestoreOptions{}); return err }(),
		"exists":         func() error { _, err := Restore(ctx, js, opener(archive), RestoreOptions{}); return err }(),
	} {
		if err == nil || !strings.HasPrefix(err.Error(), "restore: ") {
			t.Errorf("%s: %v; want an error that starts with restore:", name, err)
		}
	}
}
