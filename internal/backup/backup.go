package backup

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/wire"
)

// Options tune a backup or a restore.
type Options struct {
	// EsjetVersion is recorded in the archive.
	EsjetVersion string
	// Progress, when set, is called as objects are read or written: the
	// object, the messages done so far, and how many it held when its
	// turn came (a live object may hold more by the end).
	Progress func(object string, done, total uint64)
}

func (o Options) progress(object string, done, total uint64) {
	if o.Progress != nil {
		o.Progress(object, done, total)
	}
}

// Backup writes namespace ns's archive to w, reading through js (a user
// that may read every stream of the namespace: the admin role). It reads
// the objects one after the other in the order that keeps the archive
// consistent while the namespace takes writes: the projections' control
// bucket before the views (a view holds at least what its checkpoint says),
// the buckets and OUTBOX before the event log, and the event log last, to
// its end, so every snapshot, receipt, dead letter, command and view
// position in the archive refers to a decision the archive holds. It
// returns the archive's header.
func Backup(ctx context.Context, js jetstream.JetStream, ns string, w io.Writer, o Options) (Header, error) {
	objs, err := objectsOf(ctx, js, ns)
	if err != nil {
		return Header{}, err
	}
	h := Header{Format: Format, Namespace: ns, TakenAt: time.Now().UTC(), EsjetVersion: o.EsjetVersion,
		ServerVersion: js.Conn().ConnectedServerVersion(), Objects: objs}
	aw := newWriter(w)
	if err := aw.put(h); err != nil {
		return h, err
	}
	counts := map[string]uint64{}
	for i, obj := range objs {
		if err := aw.put(record{Object: obj.Name}); err != nil {
			return h, err
		}
		var n uint64
		last := time.Now()
		_, err := streams.NewScanner(js, obj.Name, 1000).Scan(ctx, streams.ScanRange{}, func(m *jetstream.RawStreamMsg) error {
			n++
			if time.Since(last) > time.Second {
				last = time.Now()
				o.progress(obj.Name, n, obj.Messages)
			}
			for k := range m.Header {
				if serverHeader(k) {
					delete(m.Header, k)
				}
			}
			return aw.put(record{Seq: m.Sequence, Subj: m.Subject, Header: m.Header, Data: m.Data})
		})
		if err != nil {
			return h, fmt.Errorf("back up %s: %w", obj.Name, err)
		}
		counts[obj.Name] = n
		objs[i].Messages = n
		o.progress(obj.Name, n, n)
	}
	if err := aw.put(record{End: &end{Messages: counts}}); err != nil {
		return h, err
	}
	return h, aw.close()
}

// objectsOf lists ns's objects in the order a backup reads them.
func objectsOf(ctx context.Context, js jetstream.JetStream, ns string) ([]Object, error) {
	names := wire.NamesFor(ns)
	rank := func(name string) int {
		bucket, isKV := strings.CutPrefix(name, wire.KVStreamPrefix)
		switch {
		case isKV && bucket == wire.ProjectionsBucket(ns):
			return 0
		case isKV && strings.HasPrefix(bucket, wire.ViewBucketPrefix(ns)):
			return 1
		case isKV && wire.IsNodeBucket(ns, bucket): // snapshots, receipts, workers
			return 2
		case name == names.DLQ:
			return 3
		case name == names.Outbox:
			return 4
		case name == names.Events:
			return 5
		case name == wire.ObjStream(wire.ArchiveBucket(ns)):
			// After EVENTS: an archive object is written before its
			// tombstone, so every tombstone the backup holds finds its
			// object.
			return 6
		}
		return -1
	}
	var objs []Object
	lister := js.ListStreams(ctx)
	for info := range lister.Info() {
		c := info.Config
		if rank(c.Name) < 0 {
			continue
		}
		if len(c.Sources) > 0 || c.Mirror != nil {
			return nil, fmt.Errorf("backup: %s sources other streams (an edge hub's): back up each site instead; the hub sources them again", c.Name)
		}
		objs = append(objs, Object{Name: c.Name, Config: c, FirstSeq: info.State.FirstSeq, LastSeq: info.State.LastSeq,
			Messages: info.State.Msgs, KeepSeq: !strings.HasPrefix(c.Name, wire.KVStreamPrefix)})
	}
	if err := lister.Err(); err != nil {
		return nil, fmt.Errorf("backup: list streams: %w", err)
	}
	if !slices.ContainsFunc(objs, func(o Object) bool { return o.Name == names.Events }) {
		return nil, fmt.Errorf("backup: namespace %s has no event log (%s) on this server: nothing to back up; check --namespace (or the config's namespace) and the server", ns, names.Events)
	}
	slices.SortStableFunc(objs, func(a, b Object) int {
		if r := rank(a.Name) - rank(b.Name); r != 0 {
			return r
		}
		return strings.Compare(a.Name, b.Name)
	})
	return objs, nil
}
