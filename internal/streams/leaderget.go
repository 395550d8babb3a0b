package streams

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Reads only a stream's leader answers.
//
// Any replica in sync serves a direct get, and "in sync" is the replica's
// own view: a follower restarted a moment ago, or one a few messages
// behind, answers from what it has. For a read that decides whether to
// publish (was this command already relayed into OUTBOX? is it missing
// there?) an answer that ends early is a wrong answer. So such a read
// learns the stream's last sequence from the leader (STREAM.INFO) and reads
// up to it: direct gets do the bulk, and where they end before it the
// leader is asked ($JS.API.STREAM.MSG.GET, served by the leader alone) for
// the next message. A lagging replica then costs round trips, never a
// message.

// leaderLast is the stream's last sequence as its leader reports it.
func (g *batchGetter) leaderLast(ctx context.Context) (uint64, error) {
	var resp struct {
		State struct {
			LastSeq uint64 `json:"last_seq"`
		} `json:"state"`
		Error *apiError `json:"error"`
	}
	if err := g.leaderRequest(ctx, "STREAM.INFO.", nil, &resp); err != nil {
		return 0, err
	}
	if resp.Error != nil {
		return 0, fmt.Errorf("stream info of %s: %w", g.stream, resp.Error)
	}
	return resp.State.LastSeq, nil
}

// leaderNext asks the leader for the first message on filter ("": any)
// at or after seq, or stored at or after since when since is set. It
// returns [errNoMessages] when there is none.
func (g *batchGetter) leaderNext(ctx context.Context, seq uint64, since *time.Time, filter string) (*jetstream.RawStreamMsg, error) {
	if filter == "" {
		filter = ">"
	}
	req := batchRequest{Seq: seq, NextFor: filter, StartTime: since}
	if since != nil {
		req.Seq = 0
	}
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	var resp struct {
		Message *struct {
			Subject  string    `json:"subject"`
			Sequence uint64    `json:"seq"`
			Header   []byte    `json:"hdrs"`
			Data     []byte    `json:"data"`
			Time     time.Time `json:"time"`
		} `json:"message"`
		Error *apiError `json:"error"`
	}
	if err := g.leaderRequest(ctx, "STREAM.MSG.GET.", body, &resp); err != nil {
		return nil, err
	}
	switch {
	case resp.Error != nil && resp.Error.Code == 404:
		return nil, &notFound{description: resp.Error.Description}
	case resp.Error != nil:
		return nil, fmt.Errorf("get from the leader of %s: %w", g.stream, resp.Error)
	case resp.Message == nil:
		return nil, fmt.Errorf("get from the leader of %s: an empty answer", g.stream)
	}
	m := &jetstream.RawStreamMsg{Subject: resp.Message.Subject, Sequence: resp.Message.Sequence, Data: resp.Message.Data, Time: resp.Message.Time}
	if len(resp.Message.Header) > 0 {
		h, err := nats.DecodeHeadersMsg(resp.Message.Header)
		if err != nil {
			return nil, fmt.Errorf("get from the leader of %s: seq %d: %w", g.stream, m.Sequence, err)
		}
		m.Header = h
	}
	return m, nil
}

func (g *batchGetter) leaderRequest(ctx context.Context, verb string, body []byte, resp any) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
	}
	m, err := g.nc.RequestWithContext(ctx, g.api+verb+g.stream, body)
	if err != nil {
		return fmt.Errorf("%s%s: %w", verb, g.stream, err)
	}
	if err := json.Unmarshal(m.Data, resp); err != nil {
		return fmt.Errorf("%s%s: %w", verb, g.stream, err)
	}
	return nil
}

// apiError is a JetStream API error answer.
type apiError struct {
	Code        int    `json:"code"`
	ErrCode     uint16 `json:"err_code"`
	Description string `json:"description"`
}

func (e *apiError) Error() string {
	return fmt.Sprintf("%s (%d/%d)", e.Description, e.Code, e.ErrCode)
}

// LeaderLastSeq asks the leader of stream for the sequence of the last
// message on subject ($JS.API.STREAM.MSG.GET with last_by_subj, which no
// replica behind answers). found is false when the leader holds none.
// For the rare read that must not take a copy behind for the truth: a
// direct get that answered something unexpected, checked once.
func LeaderLastSeq(ctx context.Context, js jetstream.JetStream, stream, subject string) (seq uint64, found bool, err error) {
	g := newBatchGetter(js, stream)
	body, err := json.Marshal(struct {
		LastFor string `json:"last_by_subj"`
	}{subject})
	if err != nil {
		return 0, false, err
	}
	var resp struct {
		Message *struct {
			Sequence uint64 `json:"seq"`
		} `json:"message"`
		Error *apiError `json:"error"`
	}
	if err := g.leaderRequest(ctx, "STREAM.MSG.GET.", body, &resp); err != nil {
		return 0, false, err
	}
	switch {
	case resp.Error != nil && resp.Error.Code == 404:
		return 0, false, nil
	case resp.Error != nil:
		return 0, false, fmt.Errorf("get from the leader of %s: %w", stream, resp.Error)
	case resp.Message == nil:
		return 0, false, fmt.Errorf("get from the leader of %s: an empty answer", stream)
	}
	return resp.Message.Sequence, true, nil
}
