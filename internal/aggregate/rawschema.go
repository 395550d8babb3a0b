package aggregate

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/esjet/esjet/config"
)

// RawUpcasts turns the raw types' event transforms of the configuration
// (aggregates.raw.<type>.events) into upcasters for [NewUpcasters].
func RawUpcasts(raw map[string]config.RawType) (map[string]map[string][]UpcastFunc, error) {
	out := map[string]map[string][]UpcastFunc{}
	for typ, rt := range raw {
		for et, ev := range rt.Events {
			steps := make([]UpcastFunc, len(ev.Upcast))
			for i, t := range ev.Upcast {
				f, err := transform(t)
				if err != nil {
					return nil, fmt.Errorf("aggregates.raw.%s.events.%s.upcast[%d]: %w", typ, et, i, err)
				}
				steps[i] = f
			}
			if out[typ] == nil {
				out[typ] = map[string][]UpcastFunc{}
			}
			out[typ][et] = steps
		}
	}
	return out, nil
}

// transform is the upcaster of one configured step: rename, then default,
// then remove, on the top-level fields of a JSON object.
func transform(t config.Transform) (UpcastFunc, error) {
	defaults := make(map[string]json.RawMessage, len(t.Default))
	for f, v := range t.Default {
		b, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("default %s: %w", f, err)
		}
		defaults[f] = b
	}
	return func(data json.RawMessage) (json.RawMessage, error) {
		obj := map[string]json.RawMessage{}
		if d := bytes.TrimSpace(data); len(d) > 0 && !bytes.Equal(d, []byte("null")) {
			if err := json.Unmarshal(d, &obj); err != nil {
				return nil, fmt.Errorf("the configured transform reads a JSON object: %w", err)
			}
		}
		for from, to := range t.Rename {
			if v, ok := obj[from]; ok {
				obj[to] = v
				delete(obj, from)
			}
		}
		for f, v := range defaults {
			if _, ok := obj[f]; !ok {
				obj[f] = v
			}
		}
		for _, f := range t.Remove {
			delete(obj, f)
		}
		return json.Marshal(obj)
	}, nil
}
