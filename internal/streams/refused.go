package streams

import (
	"errors"
	"sort"
	"sync"
)

// TooNew is implemented by the errors of a message this build cannot read
// because a newer build wrote it: [*EnvelopeError] here, the schema error
// of an event newer than its definition (package aggregate). A Log counts
// and logs them, and [Log.Refused] lists them for readiness and the console.
type TooNew interface {
	error
	TooNew() bool
}

// TooNew marks the error as a refusal of a message too new to read.
func (e *EnvelopeError) TooNew() bool { return true }

// maxRefusedRemembered bounds the refused messages listed: a log full of
// newer events must not grow the node's memory; the count goes on.
const maxRefusedRemembered = 100

// refusedSeen are the messages a Log refused to read as too new.
type refusedSeen struct {
	mu       sync.Mutex
	count    int64             // refused reads, each time
	msgs     map[uint64]string // distinct messages → why, up to the bound
	subjects map[uint64]string
}

// Refusal is a message a Log refused to read as too new.
type Refusal struct {
	Seq     uint64 `json:"seq"`
	Subject string `json:"subject"`
	Reason  string `json:"reason"`
}

// noteRefused counts err when it is a [TooNew] refusal of the message at
// seq on subject, and logs it at ERROR the first time this Log meets that
// message.
func (l *Log) noteRefused(err error, seq uint64, subject string) {
	var tn TooNew
	if !errors.As(err, &tn) || !tn.TooNew() {
		return
	}
	l.refused.mu.Lock()
	l.refused.count++
	_, seen := l.refused.msgs[seq]
	if !seen && len(l.refused.msgs) < maxRefusedRemembered {
		if l.refused.msgs == nil {
			l.refused.msgs, l.refused.subjects = map[uint64]string{}, map[uint64]string{}
		}
		l.refused.msgs[seq], l.refused.subjects[seq] = tn.Error(), subject
	}
	l.refused.mu.Unlock()
	if !seen {
		l.logger.Error("a newer build wrote this message; its aggregate is refused here until a node that reads it serves it",
			"subject", subject, "seq", seq, "error", tn.Error())
	}
}

// Refused returns how many reads this Log refused because a newer build
// wrote the message (an envelope or event schema version it does not know),
// and the distinct messages it refused (at most 100), in log order.
func (l *Log) Refused() (int64, []Refusal) {
	l.refused.mu.Lock()
	defer l.refused.mu.Unlock()
	out := make([]Refusal, 0, len(l.refused.msgs))
	for seq, why := range l.refused.msgs {
		out = append(out, Refusal{Seq: seq, Subject: l.refused.subjects[seq], Reason: why})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Seq < out[j].Seq })
	return l.refused.count, out
}
