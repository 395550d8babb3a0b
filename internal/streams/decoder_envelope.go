package streams

import "strings"

// The envelope's fields, read with the JSON primitives of decoder.go.

// decodeEnvelope parses data into env.
func decodeEnvelope(data []byte, env *envelope) error {
	return decodeEnvelopeInto(data, env, nil)
}

// decodeEnvelopeInto parses data into env; with lean set, the events are
// checked into lean instead of kept (env.Events stays nil).
func decodeEnvelopeInto(data []byte, env *envelope, lean *leanEvents) error {
	d := &envDecoder{b: data}
	err := d.object(func(key string) error {
		var err error
		switch fold(key, envelopeKeys) {
		case "v":
			env.V, _, err = d.int()
		case "id":
			env.ID, err = d.strOrNull()
		case "aggregate_type":
			env.AggregateType, err = d.strOrNull()
		case "aggregate_id":
			env.AggregateID, err = d.strOrNull()
		case "correlation_id":
			env.CorrelationID, err = d.strOrNull()
		case "causation_id":
			env.CausationID, err = d.strOrNull()
		case "traceparent":
			env.TraceParent, err = d.strOrNull()
		case "idempotency_key":
			env.IdempotencyKey, err = d.strOrNull()
		case "request_digest":
			env.RequestDigest, err = d.strOrNull()
		case "events":
			if lean != nil {
				err = d.leanEventList(lean)
			} else {
				env.Events, err = decodeList(d, env.Events, d.event)
			}
		case "commands":
			env.Commands, err = decodeList(d, env.Commands, d.command)
		default:
			_, err = d.skipValid()
		}
		return err
	})
	if err != nil {
		return err
	}
	if d.peek() != 0 || d.i < len(d.b) {
		return d.fail("data after the envelope")
	}
	return nil
}

// decodeList decodes an array into a fresh slice (null → nil, like
// encoding/json; [] → empty).
func decodeList[T any](d *envDecoder, _ []T, elem func(*T) error) ([]T, error) {
	out := []T{}
	isNull, err := d.array(func() error {
		var v T
		if err := elem(&v); err != nil {
			return err
		}
		out = append(out, v)
		return nil
	})
	if isNull {
		return nil, err
	}
	return out, err
}

var (
	envelopeKeys = []string{"v", "id", "aggregate_type", "aggregate_id", "correlation_id", "causation_id",
		"traceparent", "idempotency_key", "request_digest", "events", "commands"}
	eventKeys   = []string{"id", "type", "schema", "version", "time", "data"}
	commandKeys = []string{"id", "kind", "payload", "report", "deliver_after", "priority", "schema"}
)

// fold maps key to the known key it names: exactly, else case-insensitively
// (encoding/json's rule); an unknown key is returned unchanged.
func fold(key string, known []string) string {
	for _, k := range known {
		if k == key {
			return k
		}
	}
	for _, k := range known {
		if strings.EqualFold(k, key) {
			return k
		}
	}
	return key
}

func (d *envDecoder) event(e *Event) error {
	return d.object(func(key string) error {
		var err error
		switch fold(key, eventKeys) {
		case "id":
			e.ID, err = d.strOrNull()
		case "type":
			e.Type, err = d.strOrNull()
		case "schema":
			e.Schema, _, err = d.int()
		case "version":
			e.Version, err = d.uint64()
		case "time":
			err = d.time(&e.Time)
		case "data":
			e.Data, err = d.raw()
		default:
			_, err = d.skipValid()
		}
		return err
	})
}

func (d *envDecoder) command(c *Command) error {
	return d.object(func(key string) error {
		var err error
		switch fold(key, commandKeys) {
		case "id":
			c.ID, err = d.strOrNull()
		case "kind":
			c.Kind, err = d.strOrNull()
		case "payload":
			c.Payload, err = d.raw()
		case "report":
			c.Report, _, err = d.bool()
		case "deliver_after":
			err = d.time(&c.DeliverAfter)
		case "priority":
			c.Priority, err = d.strOrNull()
		case "schema":
			c.Schema, _, err = d.int()
		default:
			_, err = d.skipValid()
		}
		return err
	})
}
