package wire

import (
	"strings"
	"testing"
)

func TestKeyLeaseKeysAreValidAndDistinct(t *testing.T) {
	seen := map[string]string{}
	for _, v := range []string{"b-1", "B_2", "a.b", "a b", "", "=abc", strings.Repeat("x", 65), "é", "a/b"} {
		k := KeyLeaseKey("book_hotel", v, 0)
		if prev, ok := seen[k]; ok {
			t.Errorf("values %q and %q share key %s", prev, v, k)
		}
		seen[k] = v
		if strings.Count(k, ".") != 3 || strings.Trim(k, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-=.") != "" {
			t.Errorf("value %q: key %q is not four KV tokens", v, k)
		}
		if got := KeyLeasePrefixOf(k); got != KeyLeasePrefix("book_hotel", v) {
			t.Errorf("prefix of %q = %q, want %q", k, got, KeyLeasePrefix("book_hotel", v))
		}
	}
	if k := KeyLeaseKey("book_hotel", "b-1", 2); k != "key.book_hotel.b-1.2" {
		t.Errorf("a plain value: %q, want it readable", k)
	}
	if KeyLeasePrefixOf("pause.x") != "" || KeyLeasePrefixOf("key.x.y") != "" {
		t.Error("a key that is no lease has a prefix")
	}
}
