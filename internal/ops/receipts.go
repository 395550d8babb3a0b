package ops

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/wire"
)

// The operator tools read the receipts bucket (KV <ns>_receipts) through its
// stream, in batched direct gets: one scanner for the reconciler and the
// inspector alike.

// receiptEntry is one message of the receipts bucket's stream.
type receiptEntry struct {
	// ID is the command id: the receipt's own, else the key's.
	ID      string
	Key     string
	Receipt wire.Receipt
	// Deleted: a delete or purge marker — the command has no receipt now
	// (a failed receipt cleared by `esjet dlq retry`).
	Deleted bool
	// Err: the value is not a receipt (Receipt is zero).
	Err error
}

// scanReceipts calls fn with every message of the receipts bucket, oldest
// first. A namespace without the bucket has none: fn is never called.
func scanReceipts(ctx context.Context, js jetstream.JetStream, names streams.Names, batch int, fn func(receiptEntry)) error {
	read := directReader(js, batch)
	return scanReceiptRange(ctx, js, names, read, 0, 0, func(e receiptEntry) bool { fn(e); return true })
}

// scanReceiptRange is scanReceipts over the stream sequences (after, to]
// (to 0: to the end), read with read; fn returns false to stop.
func scanReceiptRange(ctx context.Context, js jetstream.JetStream, names streams.Names, read reader, after, to uint64, fn func(receiptEntry) bool) error {
	st, err := optionalStream(ctx, js, wire.KVStream(names.Receipts))
	if err != nil || st == nil {
		return err
	}
	prefix := wire.KVPrefix(names.Receipts)
	// The bucket's stream has no other subject: read it unfiltered.
	err = read(ctx, wire.KVStream(names.Receipts), streams.ScanRange{From: after + 1, To: to}, func(m *jetstream.RawStreamMsg) error {
		if !strings.HasPrefix(m.Subject, prefix) {
			return nil
		}
		key := strings.TrimPrefix(m.Subject, prefix)
		e := receiptEntry{ID: wire.CommandIDFromKey(key), Key: key}
		if wire.IsKVDeleteOp(m.Header.Get(wire.HeaderKVOperation)) {
			e.Deleted = true
		} else if rc, err := wire.DecodeReceipt(m.Data); err != nil {
			e.Err = err
		} else {
			e.Receipt = rc
			if rc.CommandID != "" {
				e.ID = rc.CommandID
			}
		}
		if !fn(e) {
			return streams.ErrStopScan
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("receipts %s: %w", names.Receipts, err)
	}
	return nil
}

// optionalStream looks a stream up; a missing one is nil, not an error
// (a namespace provisioned before the DLQ or receipts existed).
func optionalStream(ctx context.Context, js jetstream.JetStream, name string) (jetstream.Stream, error) {
	st, err := js.Stream(ctx, name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", name, err)
	}
	return st, nil
}
