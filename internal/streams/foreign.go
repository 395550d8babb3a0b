package streams

import (
	"sync"
	"time"
)

// Foreign is a message on an aggregate's subject that esjet did not write
// — a `nats pub` to the subject, a program publishing where it should not —
// or that is not a decision it can read. EVENTS denies deletes, so it can
// never be removed: readers step over it, and the aggregate's position
// counts it, because the subject's last sequence is what the next append
// must expect.
type Foreign struct {
	Seq     uint64    `json:"seq"`
	Subject string    `json:"subject"`
	Stored  time.Time `json:"stored"`
	Size    int       `json:"size"`   // payload bytes
	Reason  string    `json:"reason"` // why it is not a decision
}

// Tail is what [Log.LoadTail] read of one aggregate after a position.
type Tail struct {
	Records []Record
	Foreign []Foreign
	// LastSeq is the stream sequence of the last message read on the
	// subject, a foreign one included; 0 when nothing was read.
	LastSeq uint64
}

// Position is where the aggregate stands after the tail read after after:
// the last record's version, at the subject's last sequence read (a foreign
// message after the last decision moves the sequence, not the version).
func (t Tail) Position(after Position) Position {
	p := after
	if n := len(t.Records); n > 0 {
		p = t.Records[n-1].Position()
	}
	if t.LastSeq > p.Seq {
		p.Seq = t.LastSeq
	}
	return p
}

// maxForeignRemembered bounds the set of foreign messages already logged:
// a flood of stray messages must not grow the node's memory. Past it the set
// starts over (a message may then be logged again).
const maxForeignRemembered = 10_000

// foreignSeen remembers which foreign messages were logged, so each is
// logged once per Log however often its aggregate is loaded, and counts them.
type foreignSeen struct {
	mu    sync.Mutex
	seqs  map[uint64]struct{}
	count int64
}

// noteForeign logs f at WARN and counts it the first time this Log meets it.
func (l *Log) noteForeign(f Foreign) {
	l.foreign.mu.Lock()
	_, seen := l.foreign.seqs[f.Seq]
	if !seen {
		if l.foreign.seqs == nil || len(l.foreign.seqs) >= maxForeignRemembered {
			l.foreign.seqs = map[uint64]struct{}{}
		}
		l.foreign.seqs[f.Seq] = struct{}{}
		l.foreign.count++
	}
	l.foreign.mu.Unlock()
	if !seen {
		l.logger.Warn("not an esjet decision on an aggregate subject; skipped (it cannot be deleted: the aggregate reads past it)",
			"subject", f.Subject, "seq", f.Seq, "size", f.Size, "reason", f.Reason)
	}
}

// ForeignSkipped is how many distinct foreign messages this Log has stepped
// over (and logged) since it was opened.
func (l *Log) ForeignSkipped() int64 {
	l.foreign.mu.Lock()
	defer l.foreign.mu.Unlock()
	return l.foreign.count
}
