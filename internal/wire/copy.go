package wire

import "strings"

// KeptOnCopy reports whether header name of a message read back from a
// stream (by direct get) belongs to the message when it is stored again
// elsewhere: not the headers the direct get's reply adds (the stream, the
// subject, the sequence, the time, what is pending), and not the publish's
// expectations (the copy makes its own). For golden logs (esjettest).
func KeptOnCopy(name string) bool {
	switch name {
	case "Nats-Stream", "Nats-Subject", "Nats-Sequence", "Nats-Time-Stamp", "Nats-Last-Sequence", "Nats-Num-Pending", "Nats-UpTo-Sequence":
		return false
	}
	return !strings.HasPrefix(name, "Nats-Expected-")
}
