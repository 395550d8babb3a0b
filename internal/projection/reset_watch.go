package projection

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/wire"
)

// resetUnder fails with ErrFenced when the partition's checkpoint is no
// longer the one it wrote last: a [Views.Reset] purged the bucket (a
// forget resets the views marked Personal), or another owner took over.
// An owner that only waits at the log's head never writes, so without
// this check it would not learn of a reset until the next event.
//
// The direct get that looks may be answered by a copy of an R3 bucket a
// moment behind, which holds an older checkpoint or none yet: an answer
// other than the owner's own revision is asked again of the bucket's
// leader before the owner lets go.
func (p *partition) resetUnder(ctx context.Context) error {
	if p.def.Sink != nil || p.store == nil || p.cpRev == 0 {
		return nil
	}
	key := p.store.subj + cpKey(p.part)
	m, err := p.store.stream.GetLastMsgForSubject(ctx, key)
	switch {
	case err == nil && m.Sequence == p.cpRev:
		return nil
	case err != nil && !errors.Is(err, jetstream.ErrMsgNotFound):
		return nil // the next flush finds out; a heartbeat is no place to fail
	}
	seq, found, err := streams.LeaderLastSeq(ctx, p.r.js, wire.KVStream(p.bucket), key)
	switch {
	case err != nil:
		return nil // as above
	case !found:
		return fmt.Errorf("%w: checkpoint %s of %s is gone (the view was reset)", ErrFenced, cpKey(p.part), p.def.Name)
	case seq != p.cpRev:
		return fmt.Errorf("%w: checkpoint %s of %s is at revision %d, this owner wrote %d", ErrFenced, cpKey(p.part), p.def.Name, seq, p.cpRev)
	}
	return nil
}
