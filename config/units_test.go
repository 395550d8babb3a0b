package config

import (
	"reflect"
	"testing"
	"time"
)

func reflectField(c *Config, index []int) reflect.Value {
	return reflect.ValueOf(c).Elem().FieldByIndex(index)
}

func TestParseDuration(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
		str  string
	}{
		{"2m", 2 * time.Minute, "2m"},
		{"168h", 168 * time.Hour, "168h"},
		{"7d", 7 * 24 * time.Hour, "168h"},
		{"1d12h", 36 * time.Hour, "36h"},
		{"0d", 0, "0s"},
		{"1h30m", 90 * time.Minute, "1h30m"},
		{"90s", 90 * time.Second, "1m30s"},
		{"1500ms", 1500 * time.Millisecond, "1.5s"},
		{"-2m", -2 * time.Minute, "-2m"},
		{" 5s ", 5 * time.Second, "5s"},
	}
	for _, tt := range tests {
		got, err := ParseDuration(tt.in)
		if err != nil || got.Std() != tt.want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
			continue
		}
		if got.String() != tt.str {
			t.Errorf("Duration(%v).String() = %q, want %q", tt.want, got.String(), tt.str)
		}
	}
	for _, bad := range []string{"", "2", "d", "2x", "1.5d", "1d-2h", "-", "7dd", "99999999999999d"} {
		if got, err := ParseDuration(bad); err == nil {
			t.Errorf("ParseDuration(%q) = %v, want an error", bad, got)
		}
	}
}

func TestParseByteSize(t *testing.T) {
	tests := []struct {
		in   string
		want ByteSize
		str  string
	}{
		{"1MiB", 1 << 20, "1MiB"},
		{"512KiB", 512 << 10, "512KiB"},
		{"1MB", 1_000_000, "1000000"},
		{"1GB", 1_000_000_000, "1000000000"},
		{"1048576", 1 << 20, "1MiB"},
		{"0", 0, "0"},
		{"1500", 1500, "1500"},
		{"8 mib", 8 << 20, "8MiB"},
		{"2GiB", 2 << 30, "2GiB"},
		{"100B", 100, "100"},
	}
	for _, tt := range tests {
		got, err := ParseByteSize(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("ParseByteSize(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
			continue
		}
		if got.String() != tt.str {
			t.Errorf("ByteSize(%d).String() = %q, want %q", tt.want, got.String(), tt.str)
		}
	}
	for _, bad := range []string{"", "MiB", "-1", "+1", "1.5MiB", "1XB", "9999999TiB", "1 2"} {
		if got, err := ParseByteSize(bad); err == nil {
			t.Errorf("ParseByteSize(%q) = %d, want an error", bad, got)
		}
	}
}

func FuzzParseDuration(f *testing.F) {
	for _, s := range []string{"2m", "7d", "1d12h", "-3h", "1h30m0.5s", "0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDuration(s)
		if err != nil {
			return
		}
		back, err := ParseDuration(d.String())
		if err != nil || back != d {
			t.Fatalf("%q → %v → %q → %v, %v", s, int64(d), d.String(), int64(back), err)
		}
		text, _ := d.MarshalText()
		var u Duration
		if err := u.UnmarshalText(text); err != nil || u != d {
			t.Fatalf("text round trip of %v: %v, %v", d, u, err)
		}
	})
}

func FuzzParseByteSize(f *testing.F) {
	for _, s := range []string{"1MiB", "512KiB", "1MB", "1GB", "1048576", "0", "3TiB"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b, err := ParseByteSize(s)
		if err != nil {
			return
		}
		if b < 0 {
			t.Fatalf("ParseByteSize(%q) = %d, negative", s, b)
		}
		back, err := ParseByteSize(b.String())
		if err != nil || back != b {
			t.Fatalf("%q → %d → %q → %d, %v", s, b, b.String(), back, err)
		}
	})
}
