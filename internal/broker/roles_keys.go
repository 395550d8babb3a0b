package broker

import "github.com/esjet/esjet/internal/wire"

// The keys bucket of personal data (<ns>_keys, internal/shred) is the
// node's alone, with one power no other stream of the node has: deleting
// a message, which a forget does to erase a data key on disk (a secure
// delete). Operators, who read every other stream of the namespace, may
// not read it: its messages are the keys.

// keysStream is the stream of namespace ns's keys bucket.
func keysStream(ns string) string { return wire.KVStream(wire.KeysBucket(ns)) }

// nodeKeys are the node's requests on the keys bucket: its keys, creating
// the bucket when missing, reading and watching it, erasing a message.
func nodeKeys(ns string) []string {
	s := keysStream(ns)
	return append(streamOwner(s), wire.KVFilter(wire.KeysBucket(ns)), "$JS.API.STREAM.MSG.DELETE."+s)
}

// operatorKeysDenied are the reads of the keys bucket denied to operators
// (their other reads are wildcards over the namespace's streams).
func operatorKeysDenied(ns string) []string {
	s := keysStream(ns)
	return []string{"$JS.API.STREAM.MSG.GET." + s, "$JS.API.DIRECT.GET." + s, "$JS.API.DIRECT.GET." + s + ".>"}
}
