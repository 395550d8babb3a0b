package projection

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// resetUnder fails with ErrFenced when the partition's checkpoint is no
// longer the one it wrote last: a [Views.Reset] purged the bucket (a
// forget resets the views marked Personal), or another owner took over.
// An owner that only waits at the log's head never writes, so without
// this check it would not learn of a reset until the next event.
func (p *partition) resetUnder(ctx context.Context) error {
	if p.def.Sink != nil || p.store == nil || p.cpRev == 0 {
		return nil
	}
	m, err := p.store.stream.GetLastMsgForSubject(ctx, p.store.subj+cpKey(p.part))
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return fmt.Errorf("%w: checkpoint %s of %s is gone (the view was reset)", ErrFenced, cpKey(p.part), p.def.Name)
	case err != nil:
		return nil // the next flush finds out; a heartbeat is no place to fail
	case m.Sequence != p.cpRev:
		return fmt.Errorf("%w: checkpoint %s of %s is at revision %d, this owner wrote %d", ErrFenced, cpKey(p.part), p.def.Name, m.Sequence, p.cpRev)
	}
	return nil
}
