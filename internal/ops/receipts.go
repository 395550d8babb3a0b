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

// kvStream is the stream behind a KV bucket.
func kvStream(bucket string) string { return "KV_" + bucket }

// kvOperationHeader marks a KV delete or purge.
const kvOperationHeader = "KV-Operation"

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
	st, err := optionalStream(ctx, js, kvStream(names.Receipts))
	if err != nil || st == nil {
		return err
	}
	prefix := "$KV." + names.Receipts + "."
	sc := streams.NewScanner(js, kvStream(names.Receipts), batch)
	defer sc.Close()
	_, err = sc.Scan(ctx, streams.ScanRange{Filter: prefix + ">"}, func(m *jetstream.RawStreamMsg) error {
		key := strings.TrimPrefix(m.Subject, prefix)
		e := receiptEntry{ID: wire.CommandIDFromKey(key), Key: key}
		if op := m.Header.Get(kvOperationHeader); op == "DEL" || op == "PURGE" {
			e.Deleted = true
		} else if rc, err := wire.DecodeReceipt(m.Data); err != nil {
			e.Err = err
		} else {
			e.Receipt = rc
			if rc.CommandID != "" {
				e.ID = rc.CommandID
			}
		}
		fn(e)
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
