package archive

import (
	"context"
	"fmt"

	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/wire"
)

// Reader is the [streams.ArchiveReader] of store: the records a tombstone
// stands for, decoded from its archive object as the log decodes them
// (upcasters, sealed fields), after those of an earlier tombstone the
// object begins with (an aggregate archived, restored and archived
// again). A missing or damaged object is an error, never a shorter
// history.
func Reader(store Store, log *streams.Log) streams.ArchiveReader {
	var read streams.ArchiveReader
	read = func(ctx context.Context, t wire.Tombstone) ([]streams.Record, error) {
		data, err := store.Get(ctx, t.Archive)
		if err != nil {
			return nil, err
		}
		obj, err := Decode(data)
		if err != nil {
			return nil, err
		}
		if obj.LastSeq != t.LastSeq {
			return nil, fmt.Errorf("archive %s ends at seq %d, its tombstone says %d", t.Archive, obj.LastSeq, t.LastSeq)
		}
		var out []streams.Record
		for i, m := range obj.Messages {
			r, err := log.DecodeMessage(m.Raw())
			if err != nil {
				return nil, fmt.Errorf("archive %s, seq %d: %w", t.Archive, m.Seq, err)
			}
			if prev, ok, err := wire.TombstoneOf(r); ok && i == 0 {
				if err != nil {
					return nil, err
				}
				earlier, err := read(ctx, prev)
				if err != nil {
					return nil, err
				}
				out = append(out, earlier...)
			}
			out = append(out, r)
		}
		return out, nil
	}
	return read
}
