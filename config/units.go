package config

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Duration is a time.Duration written as "2m", "168h" or "1h30m" in files and the
// environment. It also accepts whole days as a leading "d" term ("7d", "1d12h"),
// which time.ParseDuration does not.
type Duration time.Duration

// Std returns d as a time.Duration.
func (d Duration) Std() time.Duration { return time.Duration(d) }

// String formats d like time.Duration but without trailing zero units: "2m", not
// "2m0s". The result parses back to the same value.
func (d Duration) String() string {
	s := time.Duration(d).String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// ParseDuration parses a Go duration with an optional leading whole-days term.
func ParseDuration(s string) (Duration, error) {
	in := s
	s = strings.TrimSpace(s)
	i := strings.IndexByte(s, 'd')
	if i < 0 {
		d, err := time.ParseDuration(s)
		if err != nil {
			return 0, fmt.Errorf("invalid duration %q: use a Go duration like \"2m\", \"168h\" or days like \"7d\"", in)
		}
		return Duration(d), nil
	}
	neg := false
	if rest, ok := strings.CutPrefix(s, "-"); ok {
		neg, s, i = true, rest, i-1
	}
	days, err := strconv.ParseUint(s[:i], 10, 63)
	if err != nil {
		return 0, fmt.Errorf("invalid duration %q: use a number of days like \"7d\" or a Go duration like \"2m\", \"168h\"", in)
	}
	if days > math.MaxInt64/uint64(24*time.Hour) {
		return 0, fmt.Errorf("invalid duration %q: out of range", in)
	}
	total := int64(days) * int64(24*time.Hour)
	if s = s[i+1:]; s != "" {
		if s[0] < '0' || s[0] > '9' {
			return 0, fmt.Errorf("invalid duration %q: expected a number after the days", in)
		}
		rest, err := time.ParseDuration(s)
		if err != nil {
			return 0, fmt.Errorf("invalid duration %q: use a Go duration like \"2m\", \"168h\" or days like \"7d\"", in)
		}
		if int64(rest) > math.MaxInt64-total {
			return 0, fmt.Errorf("invalid duration %q: out of range", in)
		}
		total += int64(rest)
	}
	if neg {
		total = -total
	}
	return Duration(total), nil
}

// MarshalText implements encoding.TextMarshaler.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := ParseDuration(string(b))
	if err != nil {
		return err
	}
	*d = v
	return nil
}

// UnmarshalYAML adds the line number to a parse error, which yaml.v3 does not do for
// text unmarshalers.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if err := d.UnmarshalText([]byte(n.Value)); err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	return nil
}

// ByteSize is a number of bytes written as "1MiB", "512KiB", "1MB" or a plain
// integer. Binary units (KiB, MiB, GiB, TiB) are powers of 1024; decimal units (KB,
// MB, GB, TB) are powers of 1000. Units are case-insensitive; "B" is bytes.
type ByteSize int64

// Binary byte-size units.
const (
	KiB ByteSize = 1 << (10 * (iota + 1))
	MiB
	GiB
	TiB
)

var byteUnits = []struct {
	suffix string
	mult   int64
}{
	// Longest suffixes first so "KiB" is not read as "B".
	{"kib", 1 << 10}, {"mib", 1 << 20}, {"gib", 1 << 30}, {"tib", 1 << 40},
	{"kb", 1e3}, {"mb", 1e6}, {"gb", 1e9}, {"tb", 1e12},
	{"b", 1},
}

// ParseByteSize parses a size such as "1MiB", "512KiB", "1MB", "1GB" or "1048576".
func ParseByteSize(s string) (ByteSize, error) {
	in := s
	s = strings.TrimSpace(s)
	mult := int64(1)
	lower := strings.ToLower(s)
	for _, u := range byteUnits {
		if strings.HasSuffix(lower, u.suffix) {
			mult = u.mult
			s = strings.TrimSpace(s[:len(s)-len(u.suffix)])
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || strings.HasPrefix(s, "+") {
		return 0, fmt.Errorf("invalid byte size %q: use a whole number of bytes or a unit like \"512KiB\", \"1MiB\", \"1GB\"", in)
	}
	if n > math.MaxInt64/mult {
		return 0, fmt.Errorf("invalid byte size %q: out of range", in)
	}
	return ByteSize(n * mult), nil
}

// String formats b in the largest binary unit that divides it exactly ("1MiB"), or as
// plain bytes ("1500"). The result parses back to the same value.
func (b ByteSize) String() string {
	if b != 0 {
		for _, u := range []struct {
			name string
			mult ByteSize
		}{{"TiB", TiB}, {"GiB", GiB}, {"MiB", MiB}, {"KiB", KiB}} {
			if b%u.mult == 0 {
				return strconv.FormatInt(int64(b/u.mult), 10) + u.name
			}
		}
	}
	return strconv.FormatInt(int64(b), 10)
}

// MarshalText implements encoding.TextMarshaler.
func (b ByteSize) MarshalText() ([]byte, error) { return []byte(b.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (b *ByteSize) UnmarshalText(t []byte) error {
	v, err := ParseByteSize(string(t))
	if err != nil {
		return err
	}
	*b = v
	return nil
}

// UnmarshalYAML adds the line number to a parse error.
func (b *ByteSize) UnmarshalYAML(n *yaml.Node) error {
	if err := b.UnmarshalText([]byte(n.Value)); err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	return nil
}
