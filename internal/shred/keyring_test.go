package shred_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/natstest"
	"github.com/esjet/esjet/internal/shred"
	"github.com/esjet/esjet/internal/wire"
)

type requested struct {
	Traveler    string `json:"traveler" esjet:"personal,subject=traveler"`
	Phone       string `json:"phone" esjet:"personal,subject=traveler"`
	Destination string `json:"destination"`
}

func seal(t *testing.T, s *shred.Sealer, v any) []byte {
	t.Helper()
	spec, err := shred.SpecOf(v)
	if err != nil {
		t.Fatal(err)
	}
	plain, _ := json.Marshal(v)
	out, err := s.SealJSON(t.Context(), plain, spec)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestForgetErasesKeyOnDisk seals a traveler's fields, forgets the
// traveler, and finds neither the data key nor the plaintext in any file
// of the server's store, while the non-personal member stays readable and
// the personal ones read as erased.
func TestForgetErasesKeyOnDisk(t *testing.T) {
	srv := natstest.RunServer(t, natstest.SyncAlways())
	_, js := natstest.Connect(t, srv)
	ns := natstest.Namespace(t)
	ring, err := shred.Open(t.Context(), js, ns, 1)
	if err != nil {
		t.Fatal(err)
	}
	s := &shred.Sealer{Keys: ring}
	sealed := seal(t, s, requested{Traveler: "Zelda Quux", Phone: "+41 79 555", Destination: "Lima"})
	if bytes.Contains(sealed, []byte("Zelda")) || bytes.Contains(sealed, []byte("+41 79 555")) || !bytes.Contains(sealed, []byte("Lima")) {
		t.Fatalf("sealed = %s", sealed)
	}
	out, erased, err := s.OpenJSON(t.Context(), sealed)
	if err != nil || len(erased) != 0 {
		t.Fatalf("open: %s %v %v", out, erased, err)
	}
	var got requested
	_ = json.Unmarshal(out, &got)
	if got != (requested{Traveler: "Zelda Quux", Phone: "+41 79 555", Destination: "Lima"}) {
		t.Fatalf("opened %+v", got)
	}
	ref, _ := ring.Ref(t.Context(), "Zelda Quux")
	key, err := ring.Key(t.Context(), ref, 1)
	if err != nil {
		t.Fatal(err)
	}
	keyText, _ := json.Marshal(key) // as the record holds it: base64 in JSON

	tomb, err := ring.Forget(t.Context(), "Zelda Quux", "alice")
	if err != nil {
		t.Fatal(err)
	}
	if tomb.By != "alice" || tomb.Through != 1 || tomb.Erased != 1 || tomb.Ref != ref {
		t.Fatalf("tombstone %+v", tomb)
	}
	out, erased, err = s.OpenJSON(t.Context(), sealed)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"phone", "traveler"}; !equal(erased, want) {
		t.Fatalf("erased %v, want %v", erased, want)
	}
	if string(out) != `{"destination":"Lima","esjet:erased":["phone","traveler"],"phone":null,"traveler":null}` {
		t.Fatalf("after forget: %s", out)
	}
	// A second node's keyring (nothing cached) reads the same.
	other, err := shred.Open(t.Context(), js, ns, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Key(t.Context(), ref, 1); !errors.Is(err, shred.ErrForgotten) {
		t.Fatalf("other node: %v, want ErrForgotten", err)
	}
	for _, needle := range [][]byte{keyText[1 : len(keyText)-1], []byte("Zelda")} {
		if f := grepDir(t, srv.StoreDir(), needle); f != "" {
			t.Fatalf("%q still on disk in %s", needle, f)
		}
	}
	// The traveler comes back: new values are sealed under a new version.
	again := seal(t, s, requested{Traveler: "Zelda Quux", Destination: "Quito"})
	if out, erased, err := s.OpenJSON(t.Context(), again); err != nil || len(erased) != 0 || !bytes.Contains(out, []byte("Zelda")) {
		t.Fatalf("after return: %s %v %v", out, erased, err)
	}
	if _, err := ring.Key(t.Context(), ref, 2); err != nil {
		t.Fatalf("version 2: %v", err)
	}
}

// TestMissingKeyIsNotErased: a key gone without a tombstone (a lost or
// partly restored bucket) is an error, never an erased value.
func TestMissingKeyIsNotErased(t *testing.T) {
	srv := natstest.RunServer(t)
	_, js := natstest.Connect(t, srv)
	ns := natstest.Namespace(t)
	ring, err := shred.Open(t.Context(), js, ns, 1)
	if err != nil {
		t.Fatal(err)
	}
	s := &shred.Sealer{Keys: ring}
	sealed := seal(t, s, requested{Traveler: "Ann", Destination: "Rome"})
	// Lose the key behind the keyring's back, as a partial restore would.
	st, _ := js.Stream(t.Context(), wire.KVStream(wire.KeysBucket(ns)))
	ref, _ := ring.Ref(t.Context(), "Ann")
	m, err := st.GetLastMsgForSubject(t.Context(), wire.KVSubject(wire.KeysBucket(ns), wire.DataKeyKey(ref, 1)))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.DeleteMsg(t.Context(), m.Sequence); err != nil {
		t.Fatal(err)
	}
	fresh, _ := shred.Open(t.Context(), js, ns, 1)
	if _, _, err := (&shred.Sealer{Keys: fresh}).OpenJSON(t.Context(), sealed); !errors.Is(err, shred.ErrKeyMissing) {
		t.Fatalf("open with the key lost: %v, want ErrKeyMissing", err)
	}
	// The bucket itself gone: an error too.
	if err := js.DeleteStream(t.Context(), wire.KVStream(wire.KeysBucket(ns))); err != nil {
		t.Fatal(err)
	}
	if _, _, err := (&shred.Sealer{Keys: fresh}).OpenJSON(t.Context(), sealed); err == nil || errors.Is(err, shred.ErrForgotten) {
		t.Fatalf("open with the bucket gone: %v, want an error", err)
	}
	// An edge hub, which never has its sites' keys, reads them as unopened.
	lazy := &shred.Lazy{JS: js, Namespace: ns, Replicas: 1}
	out, erased, err := (&shred.Sealer{Keys: lazy, KeepUnopened: true}).OpenJSON(t.Context(), sealed)
	if err != nil || len(erased) != 0 || string(out) != `{"destination":"Rome","esjet:unopened":["traveler"],"phone":"","traveler":null}` {
		t.Fatalf("hub: %s %v %v", out, erased, err)
	}
}

// TestRotateAndRace: keys created by racing keyrings are one key; a
// rotation seals new values under version 2 while version 1 still opens.
func TestRotateAndRace(t *testing.T) {
	srv := natstest.RunServer(t)
	_, js := natstest.Connect(t, srv)
	ns := natstest.Namespace(t)
	rings := make([]*shred.Keyring, 4)
	for i := range rings {
		r, err := shred.Open(t.Context(), js, ns, 1)
		if err != nil {
			t.Fatal(err)
		}
		rings[i] = r
	}
	ref, _ := rings[0].Ref(t.Context(), "Bo")
	keys := make([][]byte, len(rings))
	var wg sync.WaitGroup
	for i, r := range rings {
		wg.Go(func() {
			_, k, err := r.Current(t.Context(), ref)
			if err != nil {
				t.Error(err)
			}
			keys[i] = k
		})
	}
	wg.Wait()
	for i := range keys {
		if !bytes.Equal(keys[i], keys[0]) {
			t.Fatalf("keyring %d made its own key", i)
		}
	}
	s := &shred.Sealer{Keys: rings[0]}
	old := seal(t, s, requested{Traveler: "Bo"})
	if v, err := rings[0].Rotate(t.Context(), "Bo"); err != nil || v != 2 {
		t.Fatalf("rotate: %d %v", v, err)
	}
	fresh := seal(t, s, requested{Traveler: "Bo"})
	if !bytes.Contains(fresh, []byte("."+ref+".2.")) || !bytes.Contains(old, []byte("."+ref+".1.")) {
		t.Fatalf("versions: old %s new %s", old, fresh)
	}
	for _, b := range [][]byte{old, fresh} {
		if out, _, err := s.OpenJSON(t.Context(), b); err != nil || !bytes.Contains(out, []byte(`"Bo"`)) {
			t.Fatalf("open %s: %s %v", b, out, err)
		}
	}
	if tomb, err := rings[1].Forget(t.Context(), "Bo", "ops"); err != nil || tomb.Through != 2 || tomb.Erased != 2 {
		t.Fatalf("forget: %+v %v", tomb, err)
	}
}

func TestSpecOf(t *testing.T) {
	s, err := shred.SpecOf(requested{})
	if err != nil || len(s.Fields) != 2 || s.Fields[0] != (shred.Field{Name: "traveler", Subject: "traveler"}) {
		t.Fatalf("%+v %v", s, err)
	}
	type bad struct {
		Name string `json:"name" esjet:"personal,subject=who"`
	}
	if _, err := shred.SpecOf(bad{}); err == nil {
		t.Fatal("a subject naming no field was accepted")
	}
	if s, err := shred.SpecOf(map[string]any{}); err != nil || !s.Empty() {
		t.Fatalf("map: %+v %v", s, err)
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// grepDir returns the first file under dir holding needle, "" for none.
func grepDir(t *testing.T, dir string, needle []byte) string {
	t.Helper()
	found := ""
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || found != "" {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if bytes.Contains(b, needle) {
			found = p
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

// TestForgetMidwayCachesNoKey: a forget writes the tombstone, then erases
// the keys. Another node that reads the subject in between — after its
// watch has already dropped what it cached for the tombstone — must not
// load the doomed key into its cache (nothing would ever drop it again: it
// would show the forgotten person's data until restarted), nor seal new
// values under it.
func TestForgetMidwayCachesNoKey(t *testing.T) {
	srv := natstest.RunServer(t)
	_, js := natstest.Connect(t, srv)
	ns := natstest.Namespace(t)
	a, err := shred.Open(t.Context(), js, ns, 1)
	if err != nil {
		t.Fatal(err)
	}
	b, err := shred.Open(t.Context(), js, ns, 1)
	if err != nil {
		t.Fatal(err)
	}
	forgotten := make(chan string, 4)
	b.OnForget = func(ref string) {
		select {
		case forgotten <- ref:
		default:
		}
	}
	go func() { _ = b.Run(t.Context()) }()
	sealed := seal(t, &shred.Sealer{Keys: a}, requested{Traveler: "Ivo Ilic", Destination: "Split"})
	ref, _ := a.Ref(t.Context(), "Ivo Ilic")

	// The forget's first step, the tombstone (written again until b's
	// watch, which sees updates only, has seen it); the key not erased yet.
	kv, err := js.KeyValue(t.Context(), wire.KeysBucket(ns))
	if err != nil {
		t.Fatal(err)
	}
	tomb, _ := json.Marshal(shred.Tombstone{Ref: ref, By: "ops", Through: 1, At: time.Now().UTC()})
	natstest.Eventually(t, 10*time.Second, func() bool {
		if _, err := kv.Put(t.Context(), wire.TombstoneKey(ref), tomb); err != nil {
			t.Fatal(err)
		}
		select {
		case <-forgotten: // b dropped its cache for the tombstone
			return true
		case <-time.After(200 * time.Millisecond):
			return false
		}
	})
	sb := &shred.Sealer{Keys: b}
	if out, erased, err := sb.OpenJSON(t.Context(), sealed); err != nil || len(erased) != 1 {
		t.Errorf("b reads mid-forget: %s %v %v, want erased", out, erased, err)
	}
	if v, _, err := b.Current(t.Context(), ref); !errors.Is(err, shred.ErrForgetting) {
		t.Errorf("b seals mid-forget under version %d (%v), want ErrForgetting: the tombstone covers 1, still in the bucket", v, err)
	}
	// The forget's second step: the key erased.
	e, err := kv.Get(t.Context(), wire.DataKeyKey(ref, 1))
	if err != nil {
		t.Fatal(err)
	}
	st, _ := js.Stream(t.Context(), wire.KVStream(wire.KeysBucket(ns)))
	if err := st.SecureDeleteMsg(t.Context(), e.Revision()); err != nil {
		t.Fatal(err)
	}
	if out, erased, err := sb.OpenJSON(t.Context(), sealed); err != nil || len(erased) != 1 || bytes.Contains(out, []byte("Ilic")) {
		t.Fatalf("b reads after the forget: %s %v %v, want erased", out, erased, err)
	}
	// Once erased, a new value gets a new key; the old version is not
	// created again.
	if v, _, err := b.Current(t.Context(), ref); err != nil || v != 2 {
		t.Errorf("b seals after the forget under version %d (%v), want 2", v, err)
	}
	if _, err := kv.Get(t.Context(), wire.DataKeyKey(ref, 1)); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Errorf("key v1 after the forget: %v, want gone", err)
	}
}
