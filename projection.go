package esjet

import (
	"context"
	"time"

	"github.com/esjet/esjet/internal/projection"
	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/wire"
)

// Projection is a read model: a named handler over every event of the
// namespace in global order, optionally filtered by aggregate and event
// types and partitioned by aggregate. Pass it in Options.Projections: the
// nodes that run it share its partitions, one owner each at a time.
//
// With Handle, the view is a KV bucket <ns>_view_<name> whose documents
// advance with the checkpoint in one atomic write (exactly once in
// effect); with Sink, it lives in your own store, the position in the same
// transaction as the update (see ExampleProjection_sql).
type Projection = projection.Definition

// ProjectionEvent is an event as a projection sees it: the event, its
// global position, its aggregate, and Replay (set while a rebuild replays
// the log: keep side effects out).
type ProjectionEvent = projection.Event

// What a view gets of an archived aggregate (Projection.Archived;
// docs/archiving.md): by default a rebuild replays its archived events
// from the archive, exactly; ArchivedTombstone hands the handler the
// tombstone instead (one EventArchived event carrying the final state),
// the fast rebuild.
const (
	ArchivedReplay    = projection.ArchivedReplay
	ArchivedTombstone = projection.ArchivedTombstone
)

// EventArchived is the type of a tombstone's one event; its data is an
// ArchiveTombstone.
const EventArchived = wire.EventArchived

// ArchiveTombstone is what remains of an archived aggregate in the log:
// its final state, the archive's name and what was archived.
type ArchiveTombstone = wire.Tombstone

// ViewTx reads and writes a view's documents inside a projection handler.
type ViewTx = projection.Tx

// ViewSink keeps a view in your own store.
type ViewSink = projection.Sink

// ViewDoc is one document of a view; ViewPage a page of them.
type (
	ViewDoc   = projection.Doc
	ViewPage  = projection.Page
	ViewQuery = projection.ListQuery
)

// LogEvent is one event of the log with its global position.
type LogEvent = streams.LogEvent

// View errors; match them with errors.Is.
var (
	ErrUnknownView = projection.ErrUnknown  // no projection of that name has run
	ErrNoDocument  = projection.ErrNotFound // the view has no document under the key
	ErrViewParked  = projection.ErrParked   // the aggregate's event is parked (or the view stopped at one)
	ErrViewStopped = projection.ErrStopped  // paused, or no node runs it
	ErrViewNotYet  = projection.ErrNotYet   // the view did not reach the position within the wait
	ErrViewFenced  = projection.ErrFenced   // a Sink's position moved under it: another owner wrote
)

// ViewOption varies one View read.
type ViewOption func(*projection.Wait)

// After makes View wait (bounded by within, 0: 5s) until the view has
// passed position, a command Result's Position: read your own write. The
// wait ends at once with [ErrViewParked] or [ErrViewStopped] when it
// cannot end well.
func After(position uint64, within time.Duration) ViewOption {
	return func(w *projection.Wait) { w.After, w.For = position, within }
}

// View reads the document under key of view name.
func (n *Node) View(ctx context.Context, name, key string, opts ...ViewOption) (ViewDoc, error) {
	var w projection.Wait
	for _, o := range opts {
		o(&w)
	}
	return n.n.Views().Get(ctx, name, key, w)
}

// ViewList reads a page of view name's documents in key order.
func (n *Node) ViewList(ctx context.Context, name string, q ViewQuery) (ViewPage, error) {
	return n.n.Views().List(ctx, name, q)
}

// ReadLog returns up to limit events of the whole log after global
// position after (0: from the first), in log order, and the position to
// read on from.
func (n *Node) ReadLog(ctx context.Context, after uint64, limit int) (events []LogEvent, next uint64, err error) {
	return n.n.Log().ReadAfter(ctx, after, limit)
}
