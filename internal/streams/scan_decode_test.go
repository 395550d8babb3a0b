package streams

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// FuzzDecodeCommandsMatchesDecodeRecord holds the lean decode to the full
// one: a message fails in one exactly when it fails in the other, and what
// both accept is the same decision but for the events the lean one drops.
// Seeds: FuzzDecode's corpus and the shapes the lean path handles itself.
func FuzzDecodeCommandsMatchesDecodeRecord(f *testing.F) {
	files, _ := filepath.Glob("testdata/fuzz/FuzzDecode/*")
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		// go test fuzz v1 files hold one []byte("...") line.
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "[]byte("); ok {
				if s, err := strconv.Unquote(strings.TrimSuffix(v, ")")); err == nil {
					f.Add([]byte(s), "ns.evt.t.i")
				}
			}
		}
	}
	for _, s := range []string{
		`{"v":1,"id":"a","aggregate_type":"t","aggregate_id":"i","events":[{"id":"e","type":"x","schema":1,"version":1,"time":"2026-01-02T03:04:05.123Z","data":{"k":[1,2,"\u00e9"]}}],"commands":[{"id":"c","kind":"k","payload":null,"report":true,"deliver_after":"2026-01-02T03:04:05Z"}]}`,
		`{"v":1,"id":"a","aggregate_type":"t","aggregate_id":"i","events":[{"type":"x","version":1},{"type":"y","version":3}]}`,
		`{"v":1,"id":"a","aggregate_type":"t","aggregate_id":"i","events":[{"type":"x.y","version":0},{"type":"y","version":5}]}`,
		`{"v":1,"id":"a","aggregate_type":"t","aggregate_id":"i","events":[{"type":"x","version":1}],"events":null}`,
		`{"v":1,"id":"a","aggregate_type":"t","aggregate_id":"i","events":[],"events":[{"TYPE":"\u0078","Version":7,"time":"bad"}]}`,
		`{"v":1,"id":"a","aggregate_type":"t","aggregate_id":"i","events":[{"type":"x","version":1,"data":"\"q\\u00e9"}]}`,
		`{"v":1,"id":"a","aggregate_type":"t","aggregate_id":"i","events":[{"type":"é","version":1}]}`,
		`{"v":1,"id":"a","aggregate_type":"t","aggregate_id":"i","events":[{"type":"x","version":1,"id":"\ud800"}]}`,
		`{"v":1,"id":"a","aggregate_type":"t","aggregate_id":"j","events":[{"type":"x","version":1}]}`,
		`{"v":1,"id":"a","aggregate_type":"t","aggregate_id":"i","events":[{"type":"x","version":1,"time":"2026-01-02T03:04:05Z"},{"type":"y","version":2,"time":"2027-01-01T00:00:00Z"}]}`,
	} {
		f.Add([]byte(s), "ns.evt.t.i")
	}
	f.Fuzz(func(t *testing.T, data []byte, subject string) {
		m := &jetstream.RawStreamMsg{Subject: subject, Sequence: 7, Data: data, Time: time.Unix(1, 2)}
		full, fullErr := DecodeRecord(m)
		lean, leanErr := DecodeCommands(m)
		switch {
		case (fullErr == nil) != (leanErr == nil):
			t.Fatalf("DecodeRecord: %v; DecodeCommands: %v\ninput %q", fullErr, leanErr, data)
		case fullErr != nil:
			var de *DecodeError
			// A newer envelope is refused, not a DecodeError (foreign).
			if !(errors.As(leanErr, &de) || errors.Is(leanErr, ErrEnvelopeTooNew)) || leanErr.Error() != fullErr.Error() {
				t.Fatalf("errors differ:\n full %v\n lean %v\ninput %q", fullErr, leanErr, data)
			}
			return
		}
		full.Events = nil
		if !reflect.DeepEqual(full, lean) {
			t.Fatalf("records differ for %q:\n full %#v\n lean %#v", data, full, lean)
		}
	})
}
