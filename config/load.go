package config

import (
	"bytes"
	"encoding"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"reflect"
	"slices"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

// DefaultPath is the config file [Load] reads when given no path and ESJET_CONFIG is
// unset, if the file exists.
const DefaultPath = "config/esjet.yaml"

// EnvConfigFile names the config file when [Load] is given no path. It is the only
// ESJET_ variable that is not a field.
const EnvConfigFile = "ESJET_CONFIG"

// EnvFailpoint arms a crash-test failpoint (package internal/failpoint); it
// is not a config field, and the typo check leaves it alone.
const EnvFailpoint = "ESJET_FAILPOINT"

// EnvFailpoints is the many-point form of [EnvFailpoint].
const EnvFailpoints = "ESJET_FAILPOINTS"

// EnvPrefix starts every environment override.
const EnvPrefix = "ESJET_"

// Load returns the configuration: [Default], then the YAML file at path, then the
// ESJET_ variables in environ (pass os.Environ()), then [Config.Validate].
//
// With path == "" it reads $ESJET_CONFIG if set, else [DefaultPath] if that exists,
// else no file. A named file that does not exist is an error. Unknown YAML keys and
// ESJET_ variables that name no field are errors. A validation error is returned
// together with the loaded config, so a caller can still print it.
func Load(path string, environ []string) (Config, error) {
	cfg := Default()
	if path == "" {
		path = lookupEnv(environ, EnvConfigFile)
		if path == "" {
			if _, err := os.Stat(DefaultPath); err == nil {
				path = DefaultPath
			}
		}
	}
	if path != "" {
		data, err := os.ReadFile(path)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return cfg, fmt.Errorf("config file %s does not exist", path)
			}
			return cfg, fmt.Errorf("read config: %w", err)
		}
		if err := decodeYAML(data, &cfg); err != nil {
			return cfg, fmt.Errorf("config file %s: %w", path, err)
		}
	}
	if err := applyEnv(&cfg, environ); err != nil {
		return cfg, err
	}
	if err := cfg.Validate(); err != nil {
		return cfg, err
	}
	return cfg, nil
}

// decodeYAML decodes data onto cfg strictly ([checkDoc]): unknown keys and
// values that do not fit their field are errors with their line, their full
// path and the nearest known key or what the field takes.
func decodeYAML(data []byte, cfg *Config) error {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return errors.New(strings.TrimPrefix(err.Error(), "yaml: "))
	}
	if err := checkDoc(&doc, reflect.TypeFor[Config]()); err != nil {
		return err
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(cfg); err != nil && !errors.Is(err, io.EOF) {
		return yamlError(err)
	}
	// A second document would be silently ignored otherwise.
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return errors.New("more than one YAML document; use one")
	}
	return nil
}

func lookupEnv(environ []string, name string) string {
	val := ""
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok && k == name {
			val = v // the last one wins, as with os.Getenv on duplicates
		}
	}
	return val
}

// envField is one overridable leaf of Config.
type envField struct {
	path  string // yaml path, e.g. "nats.embedded.data_dir"
	index []int  // reflect field index from Config
}

var textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()

// envFields maps every ESJET_ variable name to its field, by walking the yaml tags.
func envFields() map[string]envField {
	fields := map[string]envField{}
	var walk func(t reflect.Type, path string, index []int)
	walk = func(t reflect.Type, path string, index []int) {
		for i := range t.NumField() {
			f := t.Field(i)
			tag, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if tag == "" || tag == "-" || !f.IsExported() {
				continue
			}
			p := tag
			if path != "" {
				p = path + "." + tag
			}
			idx := append(append([]int(nil), index...), i)
			if f.Type.Kind() == reflect.Map || (f.Type.Kind() == reflect.Slice && f.Type.Elem().Kind() == reflect.Struct) {
				continue // set in the file only (workers, nats.embedded.users)
			}
			if f.Type.Kind() == reflect.Struct && !reflect.PointerTo(f.Type).Implements(textUnmarshalerType) {
				walk(f.Type, p, idx)
				continue
			}
			name := EnvName(p)
			fields[name] = envField{path: p, index: idx}
		}
	}
	walk(reflect.TypeFor[Config](), "", nil)
	return fields
}

// EnvNames lists every environment variable [Load] understands, sorted, for help text.
func EnvNames() []string {
	fields := envFields()
	names := make([]string, 0, len(fields)+1)
	for name := range fields {
		names = append(names, name)
	}
	names = append(names, EnvConfigFile)
	sort.Strings(names)
	return names
}

// applyEnv sets the fields named by ESJET_ variables. All bad variables are reported.
func applyEnv(cfg *Config, environ []string) error {
	fields := envFields()
	root := reflect.ValueOf(cfg).Elem()
	var errs []error
	for _, kv := range environ {
		name, val, ok := strings.Cut(kv, "=")
		if !ok || !strings.HasPrefix(name, EnvPrefix) || name == EnvConfigFile || name == EnvFailpoint || name == EnvFailpoints {
			continue
		}
		f, ok := fields[name]
		if !ok {
			errs = append(errs, fmt.Errorf("environment variable %s matches no config field%s (see config/esjet.yaml for the names)", name, didYouMean(name, slices.Collect(maps.Keys(fields)))))
			continue
		}
		if err := setField(root.FieldByIndex(f.index), val); err != nil {
			errs = append(errs, fmt.Errorf("environment variable %s=%q (%s): %w", name, val, f.path, err))
		}
	}
	return errors.Join(errs...)
}

func setField(v reflect.Value, val string) error {
	if u, ok := v.Addr().Interface().(encoding.TextUnmarshaler); ok {
		return u.UnmarshalText([]byte(val))
	}
	if isScalarKind(v.Type()) {
		x, err := readScalar(v.Type(), val)
		if err != nil {
			return err
		}
		v.Set(x)
		return nil
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(val)
	case reflect.Slice:
		if v.Type().Elem().Kind() != reflect.String {
			return fmt.Errorf("unsupported field type %s", v.Type())
		}
		list := []string{}
		for item := range strings.SplitSeq(val, ",") {
			if item = strings.TrimSpace(item); item != "" {
				list = append(list, item)
			}
		}
		v.Set(reflect.ValueOf(list))
	default:
		return fmt.Errorf("unsupported field type %s", v.Type())
	}
	return nil
}

// yamlError words what the decoder still refuses after [checkDoc] (which
// reads every value itself), without its "yaml: " prefix.
func yamlError(err error) error {
	var te *yaml.TypeError
	if errors.As(err, &te) {
		return errors.New(strings.Join(te.Errors, "; "))
	}
	return errors.New(strings.TrimPrefix(err.Error(), "yaml: "))
}

// didYouMean suggests the candidate nearest to name by edit distance
// (case-insensitive, a swap of two neighbours counting one edit), when it
// is near enough to be a typo — one edit in a name of up to five
// characters, a third of it beyond: "; did you mean \"embedded\"?", or "".
// Two edits in four letters would pass "nats" for "rate".
func didYouMean(name string, candidates []string) string {
	best, bestDist := "", -1
	for _, c := range candidates {
		d := EditDistance(strings.ToLower(name), strings.ToLower(c))
		if bestDist < 0 || d < bestDist || (d == bestDist && c < best) {
			best, bestDist = c, d
		}
	}
	limit := max(1, len([]rune(name))/3)
	if bestDist < 0 || bestDist > limit {
		return ""
	}
	return fmt.Sprintf("; did you mean %q?", best)
}

// DidYouMean is didYouMean for other packages' names: "; did you mean
// \"trip\"?" when name is near enough to one of candidates, else "".
func DidYouMean(name string, candidates []string) string { return didYouMean(name, candidates) }

// EditDistance is the optimal-string-alignment distance between a and b,
// by rune: insertions, deletions, substitutions and swaps of two
// neighbours. The CLI's flag suggestions use it too.
func EditDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	d := make([][]int, len(ra)+1)
	for i := range d {
		d[i] = make([]int, len(rb)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(ra)][len(rb)]
}
