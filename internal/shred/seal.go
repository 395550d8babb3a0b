package shred

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/esjet/esjet/internal/wire"
)

// Keys is what sealing needs of a keyring: the current key of a subject to
// seal under, and any version of a subject's key to open with.
type Keys interface {
	// Ref is the keyed digest naming subject in the keys bucket and in
	// sealed values.
	Ref(ctx context.Context, subject string) (string, error)
	// Current returns the version and key new values of ref are sealed
	// under, creating the first one on first use.
	Current(ctx context.Context, ref string) (int, []byte, error)
	// Key returns version v of ref's key: [ErrForgotten] when the subject
	// was forgotten, [ErrKeyMissing] when the key is gone without a
	// tombstone (never taken for erased).
	Key(ctx context.Context, ref string, v int) ([]byte, error)
}

// Sealer seals and opens personal fields of JSON objects.
type Sealer struct {
	Keys Keys
	// KeepUnopened reads a value whose key this node does not have (no
	// bucket, or no such key and no tombstone) as null, listed in the
	// object's "esjet:unopened" member, instead of failing: an edge hub,
	// which holds its sites' sealed values but never their keys. Elsewhere
	// a missing key is an error.
	KeepUnopened bool
}

var marker = []byte(`"` + wire.SealedMember + `"`)

// IsSealed reports whether data holds a sealed value (a fast check before
// any parsing).
func IsSealed(data []byte) bool { return bytes.Contains(data, marker) }

// SealJSON returns data (a JSON object) with the fields of spec sealed
// under their subjects' current keys. A field absent or null is left as it
// is; a non-empty personal field whose subject member is empty, or not a
// string, is an error wrapping [ErrNoSubject] (nothing to key it by).
// Members come back in sorted order.
func (s *Sealer) SealJSON(ctx context.Context, data []byte, spec Spec) ([]byte, error) {
	if spec.Empty() || len(data) == 0 {
		return data, nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(data, &obj); err != nil || obj == nil {
		return data, nil // not an object: no member can be personal
	}
	subjects := map[string]string{} // subject member → id, read before sealing
	for _, f := range spec.Fields {
		if _, done := subjects[f.Subject]; done {
			continue
		}
		var id string
		if raw, ok := obj[f.Subject]; ok && !isNull(raw) {
			if err := json.Unmarshal(raw, &id); err != nil {
				return nil, fmt.Errorf("%w: subject member %q is not a string: %w", ErrNoSubject, f.Subject, err)
			}
		}
		subjects[f.Subject] = id
	}
	for _, f := range spec.Fields {
		raw, ok := obj[f.Name]
		if !ok || isNull(raw) || string(raw) == `""` {
			continue
		}
		id := subjects[f.Subject]
		if id == "" {
			return nil, fmt.Errorf("%w: personal member %q has a value but its subject member %q is empty: nothing to key it by", ErrNoSubject, f.Name, f.Subject)
		}
		ref, err := s.Keys.Ref(ctx, id)
		if err != nil {
			return nil, err
		}
		v, key, err := s.Keys.Current(ctx, ref)
		if err != nil {
			return nil, err
		}
		sealed, err := sealValue(key, ref, v, f.Name, raw)
		if err != nil {
			return nil, err
		}
		obj[f.Name] = sealed
	}
	return json.Marshal(obj)
}

// OpenJSON returns data with every sealed top-level member replaced by its
// plaintext, or by null when its subject was forgotten; erased lists those
// members (sorted), which the object's "esjet:erased" member lists too. Data without a sealed value comes back as it is. A
// missing key or an unreachable keys bucket is an error: nothing is ever
// shown as erased that was not forgotten.
func (s *Sealer) OpenJSON(ctx context.Context, data []byte) (out []byte, erased []string, err error) {
	if !IsSealed(data) {
		return data, nil, nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(data, &obj); err != nil || obj == nil {
		return data, nil, nil
	}
	var unopened []string
	for name, raw := range obj {
		sv, ok := sealedOf(raw)
		if !ok {
			continue
		}
		plain, err := s.open(ctx, name, sv)
		if errors.Is(err, ErrForgotten) {
			obj[name] = json.RawMessage("null")
			erased = append(erased, name)
			continue
		}
		if s.KeepUnopened && (errors.Is(err, ErrKeyMissing) || errors.Is(err, ErrNoBucket)) {
			obj[name] = json.RawMessage("null")
			unopened = append(unopened, name)
			continue
		}
		if err != nil {
			return nil, nil, fmt.Errorf("open personal member %q: %w", name, err)
		}
		obj[name] = plain
	}
	if len(erased) > 0 {
		slices.Sort(erased)
		obj[wire.ErasedMember], _ = json.Marshal(erased)
	}
	if len(unopened) > 0 {
		slices.Sort(unopened)
		obj[wire.UnopenedMember], _ = json.Marshal(unopened)
	}
	out, err = json.Marshal(obj)
	return out, erased, err
}

func (s *Sealer) open(ctx context.Context, name, sv string) (json.RawMessage, error) {
	ref, v, box, err := parseSealed(sv)
	if err != nil {
		return nil, err
	}
	key, err := s.Keys.Key(ctx, ref, v)
	if err != nil {
		return nil, err
	}
	return openValue(key, ref, v, name, box)
}

// sealedOf returns the sealed text of a {"esjet:sealed": "…"} value.
func sealedOf(raw json.RawMessage) (string, bool) {
	if len(raw) == 0 || raw[0] != '{' || !bytes.Contains(raw, marker) {
		return "", false
	}
	var m map[string]string
	if json.Unmarshal(raw, &m) != nil || len(m) != 1 {
		return "", false
	}
	sv, ok := m[wire.SealedMember]
	return sv, ok
}

// SubjectRef is the data subject's ref (an HMAC of its id under the
// namespace's salt, never the id) of a sealed value, and whether raw is
// one: what a worker keys a per-key limit by when the key's field is
// personal, so no KV key name ever spells the person.
func SubjectRef(raw json.RawMessage) (string, bool) {
	sv, ok := sealedOf(raw)
	if !ok {
		return "", false
	}
	ref, _, _, err := parseSealed(sv)
	return ref, err == nil
}

func isNull(raw json.RawMessage) bool { return string(bytes.TrimSpace(raw)) == "null" }

// aad binds a sealed value to its subject, key version and member name: a
// value moved to another member or subject fails to open.
func aad(ref string, v int, name string) []byte {
	return []byte(wire.SealedVersion + "." + ref + "." + strconv.Itoa(v) + "." + name)
}

func sealValue(key []byte, ref string, v int, name string, plain []byte) (json.RawMessage, error) {
	g, err := gcm(key)
	if err != nil {
		return nil, err
	}
	nonce := make([]byte, g.NonceSize(), g.NonceSize()+len(plain)+g.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	box := g.Seal(nonce, nonce, plain, aad(ref, v, name))
	text := wire.SealedVersion + "." + ref + "." + strconv.Itoa(v) + "." + base64.RawURLEncoding.EncodeToString(box)
	return json.Marshal(map[string]string{wire.SealedMember: text})
}

func parseSealed(sv string) (ref string, v int, box []byte, err error) {
	parts := strings.Split(sv, ".")
	if len(parts) != 4 || parts[0] != wire.SealedVersion {
		return "", 0, nil, fmt.Errorf("%w: %.40q is not %s.<ref>.<version>.<box>", ErrCorrupt, sv, wire.SealedVersion)
	}
	v, err = strconv.Atoi(parts[2])
	if err != nil || v < 1 {
		return "", 0, nil, fmt.Errorf("%w: key version %q", ErrCorrupt, parts[2])
	}
	box, err = base64.RawURLEncoding.DecodeString(parts[3])
	if err != nil {
		return "", 0, nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	return parts[1], v, box, nil
}

func openValue(key []byte, ref string, v int, name string, box []byte) (json.RawMessage, error) {
	g, err := gcm(key)
	if err != nil {
		return nil, err
	}
	if len(box) < g.NonceSize()+g.Overhead() {
		return nil, fmt.Errorf("%w: sealed value too short", ErrCorrupt)
	}
	plain, err := g.Open(nil, box[:g.NonceSize()], box[g.NonceSize():], aad(ref, v, name))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	return plain, nil
}

func gcm(key []byte) (cipher.AEAD, error) {
	b, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("shred: data key: %w", err)
	}
	return cipher.NewGCM(b)
}
