package receiver

// KV keys allow only [-/_=.a-zA-Z0-9] and treat '.' as a token separator,
// while idempotency keys are arbitrary (esjet command ids look like
// trip:t1:4:0). encodeKey keeps letters, digits, '-' and '_' and writes
// every other byte as =XX (upper-case hex), so trip:t1:4:0 is stored as
// trip=3At1=3A4=3A0: readable with `nats kv ls`, and injective because '='
// itself is always escaped.

const hexDigits = "0123456789ABCDEF"

// MaxKeyLen is the longest idempotency key Do accepts, in bytes.
const MaxKeyLen = 512

func encodeKey(key string) string {
	b := make([]byte, 0, len(key)+8)
	for i := 0; i < len(key); i++ {
		c := key[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_':
			b = append(b, c)
		default:
			b = append(b, '=', hexDigits[c>>4], hexDigits[c&0x0f])
		}
	}
	return string(b)
}
