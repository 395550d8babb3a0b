package backup

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"strings"
	"time"

	"github.com/esjet/esjet/internal/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// RestoreOptions tune a restore.
type RestoreOptions struct {
	Options
	// Namespace is the namespace to restore into; "" means the archive's.
	Namespace string
	// Replicas of every restored stream; 0 keeps the archive's.
	Replicas int
	// Force deletes the target namespace's objects that exist before it
	// restores; without it a restore onto existing objects is refused
	// ([ErrExists]) and nothing is touched.
	Force bool
	// Check, when set, is called with the target namespace once the
	// archive's header is read and before anything on the server is looked
	// at or touched; its error stops the restore (esjet restore: a node
	// still serving the namespace).
	Check func(ctx context.Context, namespace string) error
}

// Restore recreates the archive that open returns (it is read twice:
// OUTBOX is restored after the event log, so the relay of the restored
// node finds the commands it would publish already there, stored after
// their decisions) through js, a user that may create and delete streams
// (the admin role). It returns the archive's header.
//
// A restore that fails after it created objects (an archive cut short
// ([ErrCutShort]), a server error, ctx cancelled) deletes what it created
// before it returns, and its error says what, if anything, it left: a
// second restore then finds the namespace as the first found it. It cleans
// up after the fact rather than reading the whole archive once more before
// it starts: that would add a full read of a multi-GB archive to every
// restore, and catch only a bad archive, not a server that fails midway.
func Restore(ctx context.Context, js jetstream.JetStream, open func() (io.ReadCloser, error), o RestoreOptions) (_ Header, err error) {
	f, err := open()
	if err != nil {
		return Header{}, err
	}
	defer f.Close()
	r, h, err := newReader(f)
	if err != nil {
		return h, err
	}
	to := cmpOr(o.Namespace, h.Namespace)
	if o.Check != nil {
		if err := o.Check(ctx, to); err != nil {
			return h, err
		}
	}
	rn := renamer{from: h.Namespace, to: to}
	outbox := wire.NamesFor(h.Namespace).Outbox
	var exist []string
	for _, obj := range h.Objects {
		name := rn.name(obj.Name)
		_, err := js.Stream(ctx, name)
		switch {
		case errors.Is(err, jetstream.ErrStreamNotFound):
		case err != nil:
			return h, fmt.Errorf("restore: look up %s: %w", name, err)
		default:
			exist = append(exist, name)
		}
	}
	if len(exist) > 0 && !o.Force {
		return h, fmt.Errorf("%w: %s; restore into an empty server or another namespace (--as), or pass --force to delete them first (what they hold is lost)",
			ErrExists, strings.Join(exist, ", "))
	}
	var created, forced []string
	defer func() {
		if err != nil {
			err = undo(ctx, js, created, forced, err)
		}
	}()
	for _, name := range exist {
		if err := js.DeleteStream(ctx, name); err != nil {
			return h, fmt.Errorf("restore: delete %s (--force): %w", name, err)
		}
		forced = append(forced, name)
	}
	byName := map[string]Object{}
	for _, obj := range h.Objects {
		byName[obj.Name] = obj
	}
	counts, err := restorePass(ctx, js, r, byName, rn, o, &created, func(name string) bool { return name != outbox })
	if err != nil {
		return h, err
	}
	f2, err := open()
	if err != nil {
		return h, err
	}
	defer f2.Close()
	r2, _, err := newReader(f2)
	if err != nil {
		return h, err
	}
	more, err := restorePass(ctx, js, r2, byName, rn, o, &created, func(name string) bool { return name == outbox })
	if err != nil {
		return h, err
	}
	maps.Copy(counts, more)
	return h, nil
}

// undo deletes the objects a failed restore created and adds to err what
// the server holds now: nothing of the restore's, or the objects it could
// not delete; and what --force had deleted before, which is gone.
func undo(ctx context.Context, js jetstream.JetStream, created, forced []string, err error) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	var left []string
	for _, name := range created {
		if derr := js.DeleteStream(ctx, name); derr != nil && !errors.Is(derr, jetstream.ErrStreamNotFound) {
			left = append(left, name)
		}
	}
	switch {
	case len(left) > 0:
		err = fmt.Errorf("%w; it left %s on the server (could not delete them): delete them (nats stream rm) or restore a whole archive with --force", err, strings.Join(left, ", "))
	case len(created) > 0:
		err = fmt.Errorf("%w; it left nothing on the server (deleted the %d %s it had created)", err, len(created), plural(len(created), "object", "objects"))
	}
	if len(forced) > 0 {
		err = fmt.Errorf("%w; what --force deleted first (%s) is gone", err, strings.Join(forced, ", "))
	}
	return err
}

// plural is one or many, by n.
func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// restorePass reads the whole archive and restores the objects take says.
// Each object it creates is added to created.
func restorePass(ctx context.Context, js jetstream.JetStream, r *reader, objs map[string]Object, rn renamer, o RestoreOptions, created *[]string, take func(string) bool) (map[string]uint64, error) {
	counts := map[string]uint64{}
	var cur *restoring
	finish := func() error {
		if cur == nil {
			return nil
		}
		err := cur.finish(ctx)
		counts[cur.obj.Name] = cur.n
		cur = nil
		return err
	}
	for {
		rec, err := r.next()
		if err != nil {
			return nil, err
		}
		switch {
		case rec.End != nil:
			if err := finish(); err != nil {
				return nil, err
			}
			for name, n := range counts {
				if want := rec.End.Messages[name]; n != want {
					return nil, fmt.Errorf("restore: %s: %d messages restored, the archive says %d", name, n, want)
				}
			}
			return counts, nil
		case rec.Object != "":
			if err := finish(); err != nil {
				return nil, err
			}
			obj, ok := objs[rec.Object]
			if !ok {
				return nil, fmt.Errorf("restore: the archive holds %s, which its header does not list", rec.Object)
			}
			if take(obj.Name) {
				if cur, err = startRestoring(ctx, js, obj, rn, o); err != nil {
					return nil, err
				}
				*created = append(*created, cur.name)
			}
		case cur != nil:
			if err := cur.put(ctx, rec); err != nil {
				return nil, err
			}
		}
	}
}

// renamer maps the archive's namespace to the target's: stream and bucket
// names, subjects, and header values that are subjects.
type renamer struct{ from, to string }

func (rn renamer) name(s string) string {
	if rn.from == rn.to {
		return s
	}
	if up := strings.ToUpper(rn.from) + "_"; strings.HasPrefix(s, up) {
		return strings.ToUpper(rn.to) + "_" + s[len(up):]
	}
	if bucket, ok := strings.CutPrefix(s, wire.KVStreamPrefix); ok && strings.HasPrefix(bucket, rn.from+"_") {
		return wire.KVStream(rn.to + "_" + bucket[len(rn.from)+1:])
	}
	if bucket, ok := strings.CutPrefix(s, wire.ObjStreamPrefix); ok && strings.HasPrefix(bucket, rn.from+"_") {
		return wire.ObjStreamPrefix + rn.to + "_" + bucket[len(rn.from)+1:]
	}
	return s
}

func (rn renamer) subject(s string) string {
	if rn.from == rn.to {
		return s
	}
	if p := rn.from + "."; strings.HasPrefix(s, p) {
		return rn.to + "." + s[len(p):]
	}
	if p := wire.KVSubjectRoot + rn.from + "_"; strings.HasPrefix(s, p) {
		return wire.KVSubjectRoot + rn.to + "_" + s[len(p):]
	}
	if p := wire.ObjSubjectRoot + rn.from + "_"; strings.HasPrefix(s, p) {
		return wire.ObjSubjectRoot + rn.to + "_" + s[len(p):]
	}
	return s
}

// serverHeaders are added by the server to what it serves (direct get
// replies) or are instructions for one publish: none is restored.
func serverHeader(k string) bool {
	switch k {
	case jetstream.StreamHeader, jetstream.SequenceHeader, jetstream.TimeStampHeaer, jetstream.SubjectHeader,
		jetstream.LastSequenceHeader, wire.HeaderNumPending, wire.HeaderBatchID, wire.HeaderBatchSeq, wire.HeaderBatchCommit:
		return true
	}
	return strings.HasPrefix(k, wire.HeaderExpectedPrefix)
}

// restoring is one object being restored.
type restoring struct {
	js      jetstream.JetStream
	obj     Object
	name    string
	rn      renamer
	o       RestoreOptions
	n       uint64
	next    uint64   // the sequence the next message will get (KeepSeq)
	gapSubj string   // a subject of the stream for gap fillers
	fillers []uint64 // filler sequences to delete
	acks    []pending
}

type pending struct {
	f    jetstream.PubAckFuture
	want uint64 // 0: any
	fill bool
}

const window = 256

func startRestoring(ctx context.Context, js jetstream.JetStream, obj Object, rn renamer, o RestoreOptions) (*restoring, error) {
	c := obj.Config
	c.Name = rn.name(c.Name)
	if rn.from != rn.to {
		// The descriptions name the namespace's subjects (streams.Ensure
		// compares them with what it would create).
		c.Description = strings.ReplaceAll(c.Description, rn.from+".", rn.to+".")
	}
	if rn.from != rn.to && c.Name == wire.NamesFor(rn.to).Events {
		// The log's decision ids stay those of the namespace it was
		// first written in (wire.MetaIDSpace).
		meta := map[string]string{wire.MetaIDSpace: wire.IDSpace(c.Metadata, rn.from)}
		for k, v := range c.Metadata {
			if k != wire.MetaIDSpace {
				meta[k] = v
			}
		}
		c.Metadata = meta
	}
	for i, s := range c.Subjects {
		c.Subjects[i] = rn.subject(s)
	}
	c.Sources, c.Mirror = nil, nil
	if o.Replicas > 0 {
		c.Replicas = o.Replicas
	}
	for k := range c.Metadata {
		if strings.HasPrefix(k, "_nats.") {
			delete(c.Metadata, k)
		}
	}
	if obj.KeepSeq {
		// Deletes are allowed while the gaps are filled and emptied; the
		// archive's settings come back when the object is done.
		c.DenyDelete, c.DenyPurge = false, false
		if obj.FirstSeq > 1 {
			c.FirstSeq = obj.FirstSeq
		}
	}
	if err := createAfterDelete(ctx, js, c); err != nil {
		return nil, fmt.Errorf("restore: create %s: %w", c.Name, err)
	}
	r := &restoring{js: js, obj: obj, name: c.Name, rn: rn, o: o, next: max(obj.FirstSeq, 1)}
	if len(c.Subjects) > 0 {
		r.gapSubj = strings.TrimSuffix(c.Subjects[0], ">") + "_restore_gap"
	}
	return r, nil
}

func (r *restoring) put(ctx context.Context, rec record) error {
	if r.obj.KeepSeq {
		if rec.Seq < r.next {
			return fmt.Errorf("restore: %s: sequence %d after %d: the archive is out of order", r.obj.Name, rec.Seq, r.next-1)
		}
		for r.next < rec.Seq {
			if err := r.publish(ctx, nats.NewMsg(r.gapSubj), r.next, true); err != nil {
				return err
			}
		}
	}
	m := nats.NewMsg(r.rn.subject(rec.Subj))
	for k, vs := range rec.Header {
		if serverHeader(k) {
			continue
		}
		for _, v := range vs {
			m.Header.Add(k, r.rn.subject(v))
		}
	}
	m.Data = rec.Data
	var want uint64
	if r.obj.KeepSeq {
		want = rec.Seq
	}
	r.n++
	if err := r.publish(ctx, m, want, false); err != nil {
		return err
	}
	if r.n%1000 == 0 {
		r.o.progress(r.name, r.n, r.obj.Messages)
	}
	return nil
}

func (r *restoring) publish(ctx context.Context, m *nats.Msg, want uint64, fill bool) error {
	f, err := r.js.PublishMsgAsync(m)
	if err != nil {
		return fmt.Errorf("restore: publish to %s: %w", r.name, err)
	}
	if want > 0 {
		r.next = want + 1
	}
	r.acks = append(r.acks, pending{f: f, want: want, fill: fill})
	if len(r.acks) >= window {
		return r.wait(ctx)
	}
	return nil
}

// wait collects the acks of the messages in flight, checking each one's
// sequence where it must be kept.
func (r *restoring) wait(ctx context.Context) error {
	for _, p := range r.acks {
		select {
		case ack := <-p.f.Ok():
			if p.want > 0 && ack.Sequence != p.want {
				return fmt.Errorf("restore: %s: a message the archive has at sequence %d was stored at %d: restore into a fresh server (--force recreates the stream)", r.name, p.want, ack.Sequence)
			}
			if p.fill {
				r.fillers = append(r.fillers, ack.Sequence)
			}
		case err := <-p.f.Err():
			return fmt.Errorf("restore: publish to %s: %w", r.name, err)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	r.acks = r.acks[:0]
	return nil
}

// finish waits for the last acks, deletes the gap fillers and puts back
// the archive's delete and purge settings.
func (r *restoring) finish(ctx context.Context) error {
	if err := r.wait(ctx); err != nil {
		return err
	}
	r.o.progress(r.name, r.n, r.n)
	if !r.obj.KeepSeq {
		return nil
	}
	st, err := r.js.Stream(ctx, r.name)
	if err != nil {
		return fmt.Errorf("restore: %s: %w", r.name, err)
	}
	for _, seq := range r.fillers {
		if err := st.DeleteMsg(ctx, seq); err != nil {
			return fmt.Errorf("restore: %s: delete gap filler %d: %w", r.name, seq, err)
		}
	}
	c := st.CachedInfo().Config
	if c.DenyDelete != r.obj.Config.DenyDelete || c.DenyPurge != r.obj.Config.DenyPurge {
		c.DenyDelete, c.DenyPurge = r.obj.Config.DenyDelete, r.obj.Config.DenyPurge
		if _, err := r.js.UpdateStream(ctx, c); err != nil {
			return fmt.Errorf("restore: %s: put back deny delete/purge: %w", r.name, err)
		}
	}
	return nil
}

// TargetName is the name the archive's object name gets when restored
// into namespace to ("" for the archive's own).
func TargetName(h Header, to, name string) string {
	return renamer{from: h.Namespace, to: cmpOr(to, h.Namespace)}.name(name)
}

// createAfterDelete creates stream c. Right after --force deleted a stream
// of that name, the server may still be removing its store and answer
// "error creating store for stream" (10049, seen on a loaded machine):
// asked again for up to 10 seconds.
func createAfterDelete(ctx context.Context, js jetstream.JetStream, c jetstream.StreamConfig) error {
	deadline := time.Now().Add(10 * time.Second)
	for wait := 50 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		_, err := js.CreateStream(ctx, c)
		var apiErr *jetstream.APIError
		if err == nil || !errors.As(err, &apiErr) || apiErr.ErrorCode != 10049 || time.Now().Add(wait).After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
	}
}
