package streams

import (
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/config"
	"github.com/esjet/esjet/internal/wire"
)

// Retention says in words how long a stream or bucket keeps what it holds,
// and why: what `esjet streams` and the console show beside each one.
type Retention struct {
	Kept string `json:"kept"` // "forever", "168h (7d)", "2160h (90d) after the command finished"
	Why  string `json:"why"`
}

// RetentionOf is the retention of namespace ns's stream (a stream's name,
// or a bucket's KV_/OBJ_ stream) as configured in cfg, the stream's actual
// configuration: what it does, not what esjet would want.
func RetentionOf(ns string, cfg jetstream.StreamConfig) Retention {
	n := NamesFor(ns)
	switch name := cfg.Name; {
	case name == n.Events:
		return Retention{keptFor(cfg.MaxAge, ""), "the record of truth: states, views and commands are derived from it"}
	case name == n.Outbox:
		return Retention{keptFor(cfg.MaxAge, ""), "audit and the workers' retries (streams.outbox_max_age)"}
	case name == n.DLQ && cfg.AllowMsgTTL && cfg.MaxAge == 0:
		return Retention{"open letters forever; settled ones for streams.dlq_settled_max_age", "dead letters and their audit records (kept): what failed and who settled it"}
	case name == n.DLQ:
		return Retention{keptFor(cfg.MaxAge, ""), "dead letters and their audit records: what failed and who settled it"}
	case name == wire.KVStream(n.Snapshots):
		return Retention{"the last per aggregate", "a shortcut to an aggregate's state: rebuilt from EVENTS when gone"}
	case name == wire.KVStream(n.Receipts):
		return Retention{keptFor(cfg.MaxAge, " after the command finished"), "stops a done command from running again (streams.receipts_max_age)"}
	case name == wire.KVStream(n.Workers):
		return Retention{"while in force (per-key TTLs)", "pauses, rate limits and per-key leases of the workers"}
	case name == wire.KVStream(wire.ProjectionsBucket(ns)):
		return Retention{"the last per key", "projection leases, control records and operators' requests"}
	case strings.HasPrefix(name, wire.KVStream(wire.ViewBucketPrefix(ns))):
		return Retention{"the last per key", "a read model's generation: rebuildable from EVENTS"}
	case name == wire.KVStream(wire.KeysBucket(ns)):
		return Retention{"until forgotten", "personal data's keys, one per data subject: esjet forget erases one, and what it sealed reads as erased"}
	case name == wire.ObjStream(wire.ReconcileBucket(ns)):
		return Retention{"the last run's", "reconcile's checkpoint: the next run starts from it"}
	case name == wire.ObjStream(wire.ArchiveBucket(ns)):
		return Retention{keptFor(cfg.MaxAge, ""), "archived aggregates' histories: their tombstones in EVENTS read them back"}
	}
	return Retention{Kept: keptFor(cfg.MaxAge, "")}
}

// keptFor reads a max age: "forever" when 0, else the age (and in days
// when it is a number of them) and what it counts from.
func keptFor(age time.Duration, from string) string {
	if age <= 0 {
		return "forever"
	}
	s := config.Duration(age).String()
	if age >= 48*time.Hour && age%(24*time.Hour) == 0 {
		s += fmt.Sprintf(" (%dd)", age/(24*time.Hour))
	}
	return s + from
}
