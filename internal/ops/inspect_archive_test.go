package ops

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"testing"
	"time"

	"github.com/esjet/esjet/internal/archive"
	"github.com/esjet/esjet/internal/natstest"
	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/wire"
)

// archiveByHand does what the archive job does to trip/id (write the
// object, append the tombstone, purge below it), without its checks.
func (e *rcEnv) archiveByHand(id string, store archive.Store) streams.Record {
	e.t.Helper()
	ctx := e.t.Context()
	msgs, err := e.log.AggregateMsgs(ctx, "trip", id)
	if err != nil || len(msgs) == 0 {
		e.t.Fatalf("messages of trip/%s: %d %v", id, len(msgs), err)
	}
	first, last := msgs[0], msgs[len(msgs)-1]
	lastRec, err := e.log.DecodeMessage(last)
	if err != nil {
		e.t.Fatal(err)
	}
	obj := archive.Object{Namespace: e.ns, Subject: first.Subject, AggregateType: "trip", AggregateID: id,
		FirstSeq: first.Sequence, LastSeq: last.Sequence, LastVersion: lastRec.LastVersion(), Archived: time.Now().UTC()}
	for _, m := range msgs {
		obj.Messages = append(obj.Messages, archive.MessageOf(m))
	}
	data, err := archive.Encode(&obj)
	if err != nil {
		e.t.Fatal(err)
	}
	name := wire.ArchiveObjectName("trip", id, last.Sequence)
	if err := store.Put(ctx, name, data); err != nil {
		e.t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	tomb, err := e.log.AppendTombstone(ctx, "trip", id, wire.Tombstone{Archive: name, Store: store.Where(), FirstSeq: first.Sequence,
		LastSeq: last.Sequence, LastVersion: lastRec.LastVersion(), SHA256: hex.EncodeToString(sum[:]), State: json.RawMessage(`{}`),
		Decisions: len(msgs)}, lastRec.Position())
	if err != nil {
		e.t.Fatal(err)
	}
	if err := e.log.PurgeBefore(ctx, "trip", id, tomb.Seq); err != nil {
		e.t.Fatal(err)
	}
	return tomb
}

// `esjet outbox <id>` and the console's DLQ page look a command up with
// Inspector.Command: for an archived aggregate its decision is read from
// the archive, not just the tombstone found in the log.
func TestInspectFindsAnArchivedCommandsDecisionInTheArchive(t *testing.T) {
	t.Parallel()
	s := natstest.RunServer(t)
	e := newRCEnv(t, s, streams.ProvisionConfig{Archive: true})
	rec := e.decide("arch", streams.Command{Kind: "book_flight", Payload: json.RawMessage(`{"n":1}`), Report: true})
	e.decide("arch")
	e.publish(rec, 0)
	id := rec.Commands[0].ID
	e.putReceipt(id, "book_flight", wire.OutcomeFailed)
	e.deadLetter(rec, 0, "no seats")
	store := archive.Dir(t.TempDir())
	e.archiveByHand("arch", store)

	info, err := Inspect(e.js, e.ns).WithArchive(store).Command(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if info.Cause == nil || info.Cause.Seq != rec.Seq || info.Cause.DecisionID != rec.ID || info.Kind != "book_flight" ||
		string(info.Cause.Payload) != `{"n":1}` || !info.Cause.Report {
		t.Fatalf("an archived command's cause: %+v (kind %q), want decision %s at seq %d", info.Cause, info.Kind, rec.ID, rec.Seq)
	}
	if len(info.Outbox) != 1 || len(info.Dead) != 1 || info.Receipt == nil {
		t.Errorf("an archived command's copies: outbox %v, dead %v, receipt %v", info.Outbox, info.Dead, info.Receipt)
	}
	// Without the archive store, the log alone: the tombstone, no cause.
	info, err = Inspect(e.js, e.ns).Command(t.Context(), id)
	if err != nil || info.Cause != nil {
		t.Fatalf("without the archive: %+v %v", info.Cause, err)
	}
}
