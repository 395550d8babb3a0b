package projection

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/esjet/esjet/internal/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
)

// kvWrite is one message to a view bucket's stream: a put or a delete of
// key, expecting the key's subject to stand at expect (when set).
type kvWrite struct {
	key       string
	value     []byte
	del       bool
	expect    uint64
	hasExpect bool
}

// maxBatch is JetStream's atomic batch limit (1,000 messages); a flush
// stays under it.
const maxBatch = 1000

// errWrongLast is a write refused on a stale expectation (10071/10164).
var errWrongLast = errors.New("wrong last sequence")

type pubAck struct {
	Error *struct {
		Code        int    `json:"code"`
		ErrCode     int    `json:"err_code"`
		Description string `json:"description"`
	} `json:"error,omitempty"`
	Seq   uint64 `json:"seq"`
	Count uint64 `json:"count"`
}

// publishWrites stores writes to the bucket whose subjects start with
// subjPrefix ("$KV.<bucket>.") as one atomic batch (one plain publish when
// there is one write) and returns the stream sequence of the first: the
// batch is stored contiguously, write i at first+i. One stale expectation
// refuses them all with errWrongLast.
func publishWrites(ctx context.Context, nc *nats.Conn, subjPrefix string, writes []kvWrite) (uint64, error) {
	if len(writes) == 0 {
		return 0, nil
	}
	if len(writes) > maxBatch {
		return 0, fmt.Errorf("%d writes in one batch, more than %d", len(writes), maxBatch)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
	}
	id := nuid.Next()
	n := len(writes)
	var reply *nats.Msg
	for i, w := range writes {
		m := nats.NewMsg(subjPrefix + w.key)
		m.Data = w.value
		if w.del {
			m.Header.Set(wire.HeaderKVOperation, wire.KVDeleteOp)
		}
		if w.hasExpect {
			m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(w.expect, 10))
		}
		if n > 1 {
			m.Header.Set(wire.HeaderBatchID, id)
			m.Header.Set(wire.HeaderBatchSeq, strconv.Itoa(i+1))
		}
		var err error
		switch {
		case i == n-1:
			if n > 1 {
				m.Header.Set(wire.HeaderBatchCommit, "1")
			}
			reply, err = nc.RequestMsgWithContext(ctx, m)
		case i == 0:
			// The first is acknowledged: the batch exists before the rest
			// is sent (as orbit.go's PublishMsgBatch does).
			var r *nats.Msg
			if r, err = nc.RequestMsgWithContext(ctx, m); err == nil {
				if e := ackError(r.Data); e != nil {
					return 0, e
				}
			}
		default:
			err = nc.PublishMsg(m)
		}
		if err != nil {
			return 0, fmt.Errorf("publish %s: %w", m.Subject, err)
		}
	}
	if err := ackError(reply.Data); err != nil {
		return 0, err
	}
	var ack pubAck
	_ = json.Unmarshal(reply.Data, &ack)
	if ack.Seq == 0 {
		return 0, fmt.Errorf("publish batch: no sequence in the ack %q", reply.Data)
	}
	return ack.Seq - uint64(n) + 1, nil
}

func ackError(data []byte) error {
	if len(data) == 0 {
		return nil
	}
	var ack pubAck
	if err := json.Unmarshal(data, &ack); err != nil {
		return fmt.Errorf("publish: ack %q: %w", data, err)
	}
	if ack.Error == nil {
		return nil
	}
	if ack.Error.ErrCode == 10071 || ack.Error.ErrCode == 10164 {
		return fmt.Errorf("%w: %s", errWrongLast, ack.Error.Description)
	}
	return fmt.Errorf("publish: %s (%d/%d)", ack.Error.Description, ack.Error.Code, ack.Error.ErrCode)
}
