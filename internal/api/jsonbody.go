package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"unicode"
	"unicode/utf8"
)

// Duplicate keys: JSON (RFC 8259) says the names in an object should be
// unique and leaves a duplicate's meaning to the reader. encoding/json keeps
// the last, other readers the first or both, so a body with a key twice can
// mean one thing to the check that accepted it and another to the code that
// acts on it (a domain in another language, a receiver, a view). Every body
// the API accepts — on HTTP and NATS: commands, raw appends, multi, view
// requests, operator actions, the console's actions — is refused 400
// duplicate_key before anything is decoded or written. Keys that differ only
// in case count as one: encoding/json matches a struct field whatever the
// case, so {"traveler":"ada","TRAVELER":"eve"} would be read as one key.

// checkDuplicateKeys returns an [*Error] (400 duplicate_key) naming the
// first key that appears twice in one object, at any depth, and where. It
// does not validate otherwise: text that is not JSON is left to the
// decoder that reads it next (nil here).
func checkDuplicateKeys(body []byte) error {
	if !hasDuplicateKey(body) {
		return nil
	}
	key, path, ok := duplicateKey(body)
	if !ok { // the two walks disagree: still refused
		return &Error{Status: 400, Code: CodeDuplicateKey, Message: "request body has a key twice in one object; send each key once"}
	}
	return &Error{Status: 400, Code: CodeDuplicateKey, Message: fmt.Sprintf(
		"request body has the key %s twice in the object at %s (keys that differ only in case count as one); send each key once (readers disagree on which one counts)",
		strconv.Quote(key), path)}
}

// CheckDuplicateKeys is [checkDuplicateKeys] for the console's bodies.
func CheckDuplicateKeys(body []byte) error { return checkDuplicateKeys(body) }

// hasDuplicateKey is the fast walk every body takes: one pass over the
// bytes without decoding, keys compared as they stand in the text (decoded
// only when escaped or not UTF-8, as encoding/json would read them), a set
// per object once it has more than a few keys. For a 100-byte command it
// took 0.44 µs and 3 allocations where the token walk of [duplicateKey]
// took 12 µs and 77 (BenchmarkCheckDuplicateKeys), so that walk runs only
// on a duplicate, to name it.
func hasDuplicateKey(b []byte) bool {
	type open struct {
		object bool
		first  int                 // this object's first key in keys
		set    map[string]struct{} // its keys, once there are more than setAfter
	}
	const setAfter = 8
	var stack []open
	var keys [][]byte
	wantKey := false
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case '"':
			j, escaped := i+1, false
			for ; j < len(b) && b[j] != '"'; j++ {
				if b[j] == '\\' {
					escaped = true
					j++
				}
			}
			if j >= len(b) {
				return false // not JSON: the decoder's to say
			}
			if n := len(stack); n > 0 && stack[n-1].object && wantKey {
				wantKey = false
				k := b[i+1 : j]
				if escaped || !utf8.Valid(k) {
					var s string
					if json.Unmarshal(b[i:j+1], &s) == nil {
						k = []byte(s)
					}
				}
				k = foldKey(k)
				top := &stack[n-1]
				if top.set != nil {
					if _, dup := top.set[string(k)]; dup {
						return true
					}
					top.set[string(k)] = struct{}{}
				} else {
					for _, prev := range keys[top.first:] {
						if bytes.Equal(prev, k) {
							return true
						}
					}
					keys = append(keys, k)
					if len(keys)-top.first > setAfter {
						top.set = make(map[string]struct{}, 2*setAfter)
						for _, prev := range keys[top.first:] {
							top.set[string(prev)] = struct{}{}
						}
					}
				}
			}
			i = j
		case '{':
			stack = append(stack, open{object: true, first: len(keys)})
			wantKey = true
		case '[':
			stack = append(stack, open{first: len(keys)})
		case '}', ']':
			n := len(stack)
			if n == 0 {
				return false
			}
			keys = keys[:stack[n-1].first]
			stack = stack[:n-1]
			wantKey = false
		case ',':
			if n := len(stack); n > 0 && stack[n-1].object {
				wantKey = true
			}
		}
	}
	return false
}

// foldKey folds a key as encoding/json matches a name to a struct field
// (its foldName): ASCII upper-cased, every other rune replaced by the
// smallest rune of its simple case-folding orbit, so that "status",
// "STATUS" and "ſtatus" (U+017F) fold alike.
func foldKey(in []byte) []byte {
	out := make([]byte, 0, len(in))
	for i := 0; i < len(in); {
		if c := in[i]; c < utf8.RuneSelf {
			if 'a' <= c && c <= 'z' {
				c -= 'a' - 'A'
			}
			out = append(out, c)
			i++
			continue
		}
		r, n := utf8.DecodeRune(in[i:])
		for {
			r2 := unicode.SimpleFold(r)
			if r2 <= r {
				r = r2
				break
			}
			r = r2
		}
		out = utf8.AppendRune(out, r)
		i += n
	}
	return out
}

// frame is one open object or array while walking a body.
type frame struct {
	object bool
	keys   map[string]bool // object: the keys seen so far
	key    string          // object: the key whose value comes next
	value  bool            // object: a key was read, its value is next
	index  int             // array: the index of the next element
	name   string          // how the path names this container
}

// duplicateKey walks body's tokens and reports the first duplicate key and
// the path of its object ("$" is the body, then .key and [index]).
func duplicateKey(body []byte) (key, path string, found bool) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var stack []*frame
	// child names the value about to be read inside the top frame, and
	// moves the frame on past it.
	child := func() string {
		if len(stack) == 0 {
			return "$"
		}
		top := stack[len(stack)-1]
		if top.object {
			return top.name + "." + top.key
		}
		top.index++
		return top.name + "[" + strconv.Itoa(top.index-1) + "]"
	}
	for {
		tok, err := dec.Token()
		if err != nil {
			return "", "", false // the end, or not JSON: the decoder's to say
		}
		// In an object, a string token where a key belongs is the key.
		if len(stack) > 0 {
			if top := stack[len(stack)-1]; top.object && !top.value {
				if d, ok := tok.(json.Delim); !ok || d != '}' {
					k, _ := tok.(string)
					if top.keys[string(foldKey([]byte(k)))] {
						return k, top.name, true
					}
					top.keys[string(foldKey([]byte(k)))] = true
					top.key, top.value = k, true
					continue
				}
			}
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &frame{object: true, keys: map[string]bool{}, name: child()})
		case json.Delim('['):
			stack = append(stack, &frame{name: child()})
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
			afterValue(stack)
		default:
			child()
			afterValue(stack)
		}
	}
}

// afterValue marks the top object's pending value as read: the next string
// is a key again.
func afterValue(stack []*frame) {
	if len(stack) > 0 && stack[len(stack)-1].object {
		stack[len(stack)-1].value = false
	}
}
