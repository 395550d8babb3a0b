package streams

// validJSON reports whether v is exactly one JSON value with optional
// surrounding white space — what encoding/json.Valid reports (no UTF-8
// check, the same nesting limit) — by recursive descent rather than
// json.Valid's state machine with a call per byte: an event's data is
// checked on every read, and this is about five times faster.
// FuzzValidJSONMatchesEncodingJSON holds it to json.Valid.
func validJSON(v []byte) bool {
	i := skipWS(v, 0)
	i, ok := validValue(v, i, 0)
	return ok && skipWS(v, i) == len(v)
}

// maxNesting is encoding/json's limit on nested arrays and objects.
const maxNesting = 10000

func skipWS(v []byte, i int) int {
	for i < len(v) && (v[i] == ' ' || v[i] == '\t' || v[i] == '\n' || v[i] == '\r') {
		i++
	}
	return i
}

// validValue checks the value at v[i:] (no leading white space) and returns
// where it ends.
func validValue(v []byte, i, depth int) (int, bool) {
	if i >= len(v) {
		return i, false
	}
	switch c := v[i]; {
	case c == '"':
		return validString(v, i)
	case c == '{':
		return validObject(v, i, depth+1)
	case c == '[':
		return validArray(v, i, depth+1)
	case c == 't':
		return literal(v, i, "true")
	case c == 'f':
		return literal(v, i, "false")
	case c == 'n':
		return literal(v, i, "null")
	case c == '-' || (c >= '0' && c <= '9'):
		j := i
		for j < len(v) && (v[j] == '-' || v[j] == '+' || v[j] == '.' || v[j] == 'e' || v[j] == 'E' || (v[j] >= '0' && v[j] <= '9')) {
			j++
		}
		return j, isJSONNumber(v[i:j])
	}
	return i, false
}

func literal(v []byte, i int, word string) (int, bool) {
	if len(v)-i < len(word) || string(v[i:i+len(word)]) != word {
		return i, false
	}
	return i + len(word), true
}

// validString checks the string starting at v[i] == '"'.
func validString(v []byte, i int) (int, bool) {
	for i++; i < len(v); i++ {
		switch c := v[i]; {
		case c == '"':
			return i + 1, true
		case c < 0x20:
			return i, false
		case c == '\\':
			i++
			if i >= len(v) {
				return i, false
			}
			switch v[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if len(v)-i < 5 {
					return i, false
				}
				for _, h := range v[i+1 : i+5] {
					if !(h >= '0' && h <= '9' || h >= 'a' && h <= 'f' || h >= 'A' && h <= 'F') {
						return i, false
					}
				}
				i += 4
			default:
				return i, false
			}
		}
	}
	return i, false
}

func validArray(v []byte, i, depth int) (int, bool) {
	if depth > maxNesting {
		return i, false
	}
	i = skipWS(v, i+1)
	if i < len(v) && v[i] == ']' {
		return i + 1, true
	}
	for {
		var ok bool
		if i, ok = validValue(v, i, depth); !ok {
			return i, false
		}
		i = skipWS(v, i)
		if i >= len(v) {
			return i, false
		}
		switch v[i] {
		case ']':
			return i + 1, true
		case ',':
			i = skipWS(v, i+1)
		default:
			return i, false
		}
	}
}

func validObject(v []byte, i, depth int) (int, bool) {
	if depth > maxNesting {
		return i, false
	}
	i = skipWS(v, i+1)
	if i < len(v) && v[i] == '}' {
		return i + 1, true
	}
	for {
		if i >= len(v) || v[i] != '"' {
			return i, false
		}
		var ok bool
		if i, ok = validString(v, i); !ok {
			return i, false
		}
		if i = skipWS(v, i); i >= len(v) || v[i] != ':' {
			return i, false
		}
		if i, ok = validValue(v, skipWS(v, i+1), depth); !ok {
			return i, false
		}
		i = skipWS(v, i)
		if i >= len(v) {
			return i, false
		}
		switch v[i] {
		case '}':
			return i + 1, true
		case ',':
			i = skipWS(v, i+1)
		default:
			return i, false
		}
	}
}
