package wire

import (
	"errors"
	"strings"
	"testing"
)

func TestValidateTokenTable(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		value  string
		ok     bool
		reason string // part of the error's reason when !ok
	}{
		{"a", true, ""},
		{"Z", true, ""},
		{"0", true, ""},
		{"_", true, ""},
		{"-", true, ""},
		{"order-42_B", true, ""},
		{strings.Repeat("x", MaxTokenLen), true, ""},
		{"", false, "empty"},
		{strings.Repeat("x", MaxTokenLen+1), false, "129 characters, longer than 128"},
		{"a.b", false, `'.' at 1`},
		{".", false, `'.' at 0`},
		{"*", false, `'*' at 0`},
		{">", false, `'>' at 0`},
		{"a b", false, `' ' at 1`},
		{"tab\t", false, `'\t' at 3`},
		{"nul\x00", false, `'\x00' at 3`},
		{"caf\u00e9", false, "at 3"},
		{"\xff", false, "at 0"},
		{"a/b", false, `'/' at 1`},
		{"a:b", false, `':' at 1`},
		// Unicode is counted and placed by character, not by byte.
		{"ééé", false, `'é' at 0`},
		{"aé", false, `'é' at 1`},
		{strings.Repeat("é", 100), false, `'é' at 0`},
		{strings.Repeat("é", MaxTokenLen+2), false, "130 characters, longer than 128"},
	} {
		err := ValidateToken("aggregate id", tc.value)
		if tc.ok {
			if err != nil {
				t.Errorf("ValidateToken(%q) = %v, want nil", tc.value, err)
			}
			continue
		}
		var te *TokenError
		if !errors.As(err, &te) || !errors.Is(err, ErrInvalidToken) {
			t.Errorf("ValidateToken(%q) = %v, want a *TokenError wrapping ErrInvalidToken", tc.value, err)
			continue
		}
		if te.Field != "aggregate id" || te.Value != tc.value || !strings.Contains(te.Reason, tc.reason) {
			t.Errorf("ValidateToken(%q) = %+v, want field \"aggregate id\" and a reason containing %q", tc.value, te, tc.reason)
		}
		msg := err.Error()
		if !strings.HasPrefix(msg, "invalid aggregate id ") || !strings.Contains(msg, "use 1-128 characters from A-Z a-z 0-9 _ -") {
			t.Errorf("ValidateToken(%q) message %q does not name the field and what is valid", tc.value, msg)
		}
	}
}

func TestTokenErrorTruncatesLongValues(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("y", 300)
	err := ValidateToken("command kind", long)
	if err == nil {
		t.Fatal("a 300-character token was accepted")
	}
	if strings.Contains(err.Error(), long[:41]) || !strings.Contains(err.Error(), long[:40]+"…") {
		t.Fatalf("error %q does not cut the value at 40 characters", err)
	}
	var te *TokenError
	if !errors.As(err, &te) || te.Value != long {
		t.Fatal("the TokenError does not keep the whole value")
	}
}

func TestCommandIDFormat(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		typ, id string
		version uint64
		index   int
		want    string
	}{
		{"trip", "t1", 1, 0, "trip:t1:1:0"},
		{"order", "o-9_x", 42, 3, "order:o-9_x:42:3"},
		{"a", "b", 1<<64 - 1, 999, "a:b:18446744073709551615:999"},
	} {
		if got := CommandID(tc.typ, tc.id, tc.version, tc.index); got != tc.want {
			t.Errorf("CommandID(%q, %q, %d, %d) = %q, want %q", tc.typ, tc.id, tc.version, tc.index, got, tc.want)
		}
	}
}
