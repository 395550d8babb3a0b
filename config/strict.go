package config

import (
	"encoding"
	"errors"
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// The file and the environment read a value the same way. yaml.v3 alone is
// lenient where a configuration must not be: it truncates 1.5 into an int,
// reads "yes", "on" and "y" — quoted or not — as true (YAML 1.1 booleans,
// strings in YAML 1.2), and its type errors carry only a line, which in a
// flow mapping ({cache_size: lots}) is the section's. So the file's tree is
// checked against Config's fields before it is decoded: every key names a
// field, every value has the field's shape, and every scalar bound for a
// bool or a number is read by [readScalar], as an ESJET_ variable is.

var yamlUnmarshalerType = reflect.TypeFor[yaml.Unmarshaler]()

// readScalar reads text as a value of t, a bool, integer or float type: a
// bool is true or false (or YAML 1.2's True, TRUE, False, FALSE); a whole
// number is decimal digits with an optional sign, no leading zero; a number is a finite
// decimal or exponent form (0.5, 1e3). The error says what t takes.
func readScalar(t reflect.Type, text string) (reflect.Value, error) {
	text = strings.TrimSpace(text)
	v := reflect.New(t).Elem()
	switch t.Kind() {
	case reflect.Bool:
		switch text {
		case "true", "True", "TRUE":
			v.SetBool(true)
		case "false", "False", "FALSE":
		default:
			return v, errors.New("want " + want(t))
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if leadingZero(text) {
			return v, errors.New("want " + want(t) + " without leading zeros (YAML reads 010 as 8)")
		}
		n, err := strconv.ParseInt(text, 10, t.Bits())
		if errors.Is(err, strconv.ErrRange) {
			return v, errors.New("too large: want " + want(t) + " that fits the setting")
		}
		if err != nil {
			return v, errors.New("want " + want(t))
		}
		v.SetInt(n)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if leadingZero(text) {
			return v, errors.New("want " + want(t) + " without leading zeros (YAML reads 010 as 8)")
		}
		n, err := strconv.ParseUint(strings.TrimPrefix(text, "+"), 10, t.Bits())
		if err != nil {
			return v, errors.New("want " + want(t))
		}
		v.SetUint(n)
	case reflect.Float32, reflect.Float64:
		f, err := strconv.ParseFloat(text, t.Bits())
		if err != nil || math.IsInf(f, 0) || math.IsNaN(f) || strings.ContainsAny(text, "xX_") {
			return v, errors.New("want " + want(t))
		}
		v.SetFloat(f)
	default:
		return v, fmt.Errorf("unsupported field type %s", t)
	}
	return v, nil
}

// isScalarKind reports whether [readScalar] reads t.
func isScalarKind(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		return true
	}
	return false
}

// want says what a field of type t takes, in the configuration's words.
func want(t reflect.Type) string {
	switch t {
	case reflect.TypeFor[Duration]():
		return `a duration like "2m", "168h" or "7d"`
	case reflect.TypeFor[ByteSize]():
		return `a size like "1MiB" or a whole number of bytes`
	}
	switch t.Kind() {
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "a whole number"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number, 0 or more"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string (quote it)"
	case reflect.Slice:
		return "a list"
	default:
		return "a mapping of keys"
	}
}

// customType reports whether t reads its own YAML or text (Duration, ByteSize).
func customType(t reflect.Type) bool {
	p := reflect.PointerTo(t)
	return p.Implements(yamlUnmarshalerType) || p.Implements(textUnmarshalerType)
}

// checkDoc walks a YAML document against t's yaml tags and reports every
// key that names no field (with the nearest key there: "did you mean …")
// and every value that does not fit its field, each with its line and its
// full path.
func checkDoc(doc *yaml.Node, t reflect.Type) error {
	var errs []error
	misfit := func(n *yaml.Node, path string, t reflect.Type) {
		is := fmt.Sprintf("%q", n.Value)
		switch n.Kind {
		case yaml.MappingNode:
			is = "a mapping"
		case yaml.SequenceNode:
			is = "a list"
		}
		errs = append(errs, fmt.Errorf("line %d: %s is %s; want %s", n.Line, path, is, want(t)))
	}
	var walk func(n *yaml.Node, t reflect.Type, path string)
	walk = func(n *yaml.Node, t reflect.Type, path string) {
		if n.Kind == 0 {
			return // an empty file, or one of comments only: the defaults
		}
		for n.Kind == yaml.DocumentNode || n.Kind == yaml.AliasNode {
			if n.Kind == yaml.AliasNode {
				n = n.Alias
			} else if len(n.Content) > 0 {
				n = n.Content[0]
			} else {
				return
			}
		}
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if t.Kind() == reflect.Interface || (n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null") {
			return // any value; or none, which keeps the default
		}
		if customType(t) {
			if n.Kind != yaml.ScalarNode {
				misfit(n, path, t)
				return
			}
			if u, ok := reflect.New(t).Interface().(encoding.TextUnmarshaler); ok {
				if err := u.UnmarshalText([]byte(n.Value)); err != nil {
					errs = append(errs, fmt.Errorf("line %d: %s: %w", n.Line, path, err))
				}
			}
			return
		}
		switch t.Kind() {
		case reflect.Slice:
			if n.Kind != yaml.SequenceNode {
				misfit(n, path, t)
				return
			}
			for i, item := range n.Content {
				walk(item, t.Elem(), fmt.Sprintf("%s[%d]", path, i))
			}
		case reflect.Map:
			if n.Kind != yaml.MappingNode {
				misfit(n, path, t)
				return
			}
			for i := 0; i+1 < len(n.Content); i += 2 {
				walk(n.Content[i+1], t.Elem(), join(path, n.Content[i].Value))
			}
		case reflect.Struct:
			if n.Kind != yaml.MappingNode {
				misfit(n, path, t)
				return
			}
			fields := map[string]reflect.Type{}
			for i := range t.NumField() {
				f := t.Field(i)
				tag, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
				if tag != "" && tag != "-" && f.IsExported() {
					fields[tag] = f.Type
				}
			}
			for i := 0; i+1 < len(n.Content); i += 2 {
				key := n.Content[i]
				ft, ok := fields[key.Value]
				if !ok {
					names := slices.Sorted(maps.Keys(fields))
					where := "at the top level"
					if path != "" {
						where = "in " + path
					}
					hint := didYouMean(key.Value, names)
					if t == reflect.TypeFor[Worker]() && slices.Contains([]string{TargetNATS, TargetHTTP, TargetGo}, key.Value) {
						hint = fmt.Sprintf("; did you mean \"target: %s\"?", key.Value) // a target written as a key
					}
					errs = append(errs, fmt.Errorf("line %d: unknown key %q %s%s (the keys there: %s)",
						key.Line, key.Value, where, hint, strings.Join(names, ", ")))
					continue
				}
				walk(n.Content[i+1], ft, join(path, key.Value))
			}
		default:
			if n.Kind != yaml.ScalarNode {
				misfit(n, path, t)
				return
			}
			if !isScalarKind(t) {
				return // a string takes any scalar
			}
			_, err := readScalar(t, n.Value)
			if err == nil && n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle) != 0 {
				err = errors.New("want " + want(t) + ", without quotes")
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("line %d: %s is %q; %w", n.Line, path, n.Value, err))
			}
		}
	}
	walk(doc, t, "")
	return errors.Join(errs...)
}

// leadingZero reports a whole number written with a leading zero (010),
// which YAML reads as octal and the environment as decimal.
func leadingZero(text string) bool {
	digits := strings.TrimLeft(text, "+-")
	return len(digits) > 1 && digits[0] == '0'
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}
