package consumer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/esjet/esjet/internal/wire"
)

// Headers every target receives, beside the command's own (see
// wire.RequestHeader).
const (
	HeaderIdempotencyKey = wire.HeaderIdempotencyKey // the command id
	HeaderAttempt        = wire.HeaderAttempt        // 1, 2, …
	HeaderFence          = wire.HeaderFence          // the delivery's fencing token
)

// requestHeaders are what a NATS or HTTP target gets with d.
func requestHeaders(d Delivery) map[string]string {
	return wire.RequestHeader(d.command(), d.Attempt, d.Fence)
}

// reply is a target's answer ([wire.TargetReply]).
type reply wire.TargetReply

func (r reply) outcome() (json.RawMessage, error) {
	if r.Error == "" {
		if r.Result == nil {
			// Neither key: not an answer this protocol knows. Ask again
			// rather than take it for a success.
			return nil, Retry(errors.New(`reply has neither "result" nor "error"`), 0)
		}
		if string(r.Result) == "null" {
			return nil, nil
		}
		return r.Result, nil
	}
	err := errors.New(r.Error)
	if r.Stale {
		return nil, Fenced(err)
	}
	if r.Retryable {
		return nil, Retry(err, time.Duration(r.RetryAfterMs)*time.Millisecond)
	}
	return nil, Terminal(err)
}

// NATSTarget carries out a command as a NATS request to Subject. No
// responders means the service is not there (restarting): [Unavailable];
// a timeout is retryable; the reply JSON says the rest.
type NATSTarget struct {
	Conn    *nats.Conn
	Subject string
}

// Handle implements [Handler].
func (t NATSTarget) Handle(ctx context.Context, d Delivery) (json.RawMessage, error) {
	m := nats.NewMsg(t.Subject)
	m.Data = d.Payload
	for k, v := range requestHeaders(d) {
		m.Header[k] = []string{v}
	}
	resp, err := t.Conn.RequestMsgWithContext(ctx, m)
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		return nil, Unavailable(fmt.Errorf("no service answers on %s", t.Subject))
	case err != nil:
		return nil, Retry(fmt.Errorf("request %s: %w", t.Subject, err), 0)
	}
	var r reply
	if err := json.Unmarshal(resp.Data, &r); err != nil {
		return nil, Retry(fmt.Errorf("reply from %s is not {\"result\"} or {\"error\"} JSON: %w", t.Subject, err), 0)
	}
	out, err := r.outcome()
	if err != nil && r.Error == "" {
		err = Retry(fmt.Errorf(`reply from %s has neither "result" nor "error"; the service must answer {"result": …} or {"error": …, "retryable": bool}`, t.Subject), 0)
	}
	return out, err
}

// HTTPTarget carries out a command as an HTTP POST of its payload to URL.
// 2xx → success (the body is the result); 412 → stale (the receiver saw a
// newer attempt, see [Fenced]); 409, 422 and other 4xx → terminal; 429,
// 5xx, timeouts and connection errors → retryable, honouring Retry-After; a
// refused connection → [Unavailable].
type HTTPTarget struct {
	Client *http.Client // nil: a client without a timeout (the handler ctx bounds it)
	URL    string
}

// Handle implements [Handler].
func (t HTTPTarget) Handle(ctx context.Context, d Delivery) (json.RawMessage, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.URL, bytes.NewReader(d.Payload))
	if err != nil {
		return nil, Terminal(fmt.Errorf("bad target URL %q: %w", t.URL, err))
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range requestHeaders(d) {
		req.Header.Set(k, v)
	}
	c := t.Client
	if c == nil {
		c = http.DefaultClient
	}
	resp, err := c.Do(req)
	if errors.Is(err, syscall.ECONNREFUSED) {
		return nil, Unavailable(fmt.Errorf("POST %s: %w", t.URL, err))
	}
	if err != nil {
		return nil, Retry(fmt.Errorf("POST %s: %w", t.URL, err), 0)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		if len(bytes.TrimSpace(body)) == 0 {
			return nil, nil
		}
		if json.Valid(body) {
			return json.RawMessage(body), nil
		}
		q, _ := json.Marshal(string(body))
		return q, nil
	case resp.StatusCode == http.StatusPreconditionFailed:
		return nil, Fenced(fmt.Errorf("POST %s: %s: %s", t.URL, resp.Status, snippet(body)))
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500:
		return nil, Retry(fmt.Errorf("POST %s: %s: %s", t.URL, resp.Status, snippet(body)), retryAfter(resp.Header.Get("Retry-After")))
	default:
		return nil, Terminal(fmt.Errorf("POST %s: %s: %s", t.URL, resp.Status, snippet(body)))
	}
}

// retryAfter parses a Retry-After header: seconds or an HTTP date.
func retryAfter(v string) time.Duration {
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(v); err == nil && s >= 0 {
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), 0)
	}
	return 0
}

func snippet(b []byte) string {
	if len(b) > 200 {
		b = b[:200]
	}
	return string(bytes.TrimSpace(b))
}
