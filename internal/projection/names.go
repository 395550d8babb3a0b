package projection

import (
	"regexp"
	"strconv"
	"strings"

	"github.com/esjet/esjet/internal/wire"
)

// Keys (the bucket names are wire's: [wire.ProjectionsBucket],
// [wire.ViewBuckets]). The control bucket <ns>_projections holds, per projection,
// its control record, its partitions' leases and the operators' requests;
// each generation of a view is a bucket of its own, holding the documents,
// the partitions' checkpoints and (partitioned) the parked events.
const (
	// internalPrefix starts every key the framework keeps in a view bucket;
	// a handler's document key may not start with it.
	internalPrefix = "_esjet."
	checkpointKey  = internalPrefix + "checkpoint."
	parkedKey      = internalPrefix + "parked."
	skippedKey     = internalPrefix + "skipped."
)

var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_]{0,63}$`)

// ValidateName checks a projection name: lower-case letters, digits and
// '_', 1 to 64 characters, starting with a letter or digit.
func ValidateName(name string) error {
	if !nameRE.MatchString(name) {
		return invalid("projection name %q: use 1-64 lower-case letters, digits and '_' (e.g. trips_by_status)", name)
	}
	return nil
}

var keyRE = regexp.MustCompile(`^[-/_=.a-zA-Z0-9]{1,512}$`)

// ValidateKey checks a document key: what a KV key may be (letters, digits,
// '-', '/', '_', '=', '.', not starting or ending with '.'), not under the
// framework's prefix.
func ValidateKey(key string) error {
	switch {
	case !keyRE.MatchString(key) || strings.HasPrefix(key, ".") || strings.HasSuffix(key, "."):
		return invalid("document key %q: use 1-512 letters, digits and - / _ = . (not at either end)", key)
	case strings.HasPrefix(key, internalPrefix):
		return invalid("document key %q: keys under %s are esjet's own", key, internalPrefix)
	}
	return nil
}

// Slots is how many buckets a view's generations take turns in: the
// active, the previous (kept for a switch back) and the one being built
// never exceed three, so a view has at most three buckets, whose names a
// NATS role can list (a subject wildcard cannot cover part of a bucket
// name, as a per-generation name would need).
const Slots = 3

// ViewBucket is the bucket of generation gen of view name: the slot
// (gen-1) mod [Slots] of [wire.ViewBuckets] (generation 1 is <ns>_view_<name>,
// as it always was). A rebuild picks a generation whose slot neither the
// active nor the previous one holds (see [Views.Rebuild]).
func ViewBucket(ns, name string, gen int) string {
	return wire.ViewBuckets(ns, name)[(max(gen, 1)-1)%Slots]
}

func ctlKey(name string) string { return name + ".ctl" }

func leaseKey(name string, gen, part int) string {
	return name + ".g" + strconv.Itoa(gen) + ".p" + strconv.Itoa(part) + ".lease"
}

func requestKey(name, id string) string { return name + ".req." + id }

func cpKey(part int) string { return checkpointKey + strconv.Itoa(part) }

func parkKey(part int, pos uint64) string {
	return parkedKey + strconv.Itoa(part) + "." + strconv.FormatUint(pos, 10)
}

func skipKey(pos uint64) string { return skippedKey + strconv.FormatUint(pos, 10) }
