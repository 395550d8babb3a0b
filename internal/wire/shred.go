package wire

import (
	"strconv"
	"strings"
)

// Crypto-shredding (personal data, docs/personal-data.md): each data subject
// (a traveler, a customer) has data keys in the namespace's keys bucket
// <ns>_keys, only the node's. The keys of that bucket:
//
//	salt                 the namespace's secret for [DataSubjectRef]s (32 random bytes)
//	key.<ref>.<version>  a data key (AES-256), created once, never updated
//	forgot.<ref>         the tombstone of a forgotten subject: who, when, and
//	                     the last key version destroyed (the audit record)
//
// <ref> is a keyed digest of the subject's id, never the id itself: the
// id is often personal (a name, an e-mail) and key names are kept in
// block files, backups and purge markers.
const (
	KeysSaltKey    = "salt"
	keysDataPrefix = "key."
	keysTombPrefix = "forgot."
)

// KeysBucket is the namespace's bucket of data keys: <ns>_keys.
func KeysBucket(ns string) string { return ns + "_keys" }

// DataKeyKey is the key of version v of subject ref's data key.
func DataKeyKey(ref string, v int) string { return keysDataPrefix + ref + "." + strconv.Itoa(v) }

// TombstoneKey is the key of subject ref's tombstone.
func TombstoneKey(ref string) string { return keysTombPrefix + ref }

// TombstoneFilter matches every tombstone key; DataKeyFilter every
// version of ref's data key.
const TombstoneFilter = keysTombPrefix + ">"

// DataKeyFilter matches every version of subject ref's data key.
func DataKeyFilter(ref string) string { return keysDataPrefix + ref + ".*" }

// RefOfKey returns the subject ref a keys-bucket key names ("" for salt).
func RefOfKey(key string) string {
	if r, ok := strings.CutPrefix(key, keysTombPrefix); ok {
		return r
	}
	if r, ok := strings.CutPrefix(key, keysDataPrefix); ok {
		if i := strings.LastIndexByte(r, '.'); i > 0 {
			return r[:i]
		}
	}
	return ""
}

// A personal field's value is stored as a one-member JSON object,
//
//	{"esjet:sealed": "v1.<ref>.<version>.<base64url(nonce || ciphertext)>"}
//
// and read back as its plaintext while the key exists, as JSON null after
// the subject was forgotten; the object then also has the member
// "esjet:erased": the sorted names of its erased members.
const (
	SealedMember  = "esjet:sealed"
	SealedVersion = "v1"
	ErasedMember  = "esjet:erased"
	// UnopenedMember lists the members an edge hub read as null because
	// their keys are its sites' (not erased: the site reads them).
	UnopenedMember = "esjet:unopened"
)

// TagName is the Go struct tag that marks personal fields:
// `esjet:"personal,subject=<json name of the field holding the subject id>"`.
const TagName = "esjet"
