package services

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/receiver"
)

// Options configures [Start]. The zero value runs every service OK on the
// default bucket.
type Options struct {
	// Fail is the initial mode per service (budget, flights, hotels); a
	// missing service is OK.
	Fail map[string]Mode
	// Bucket is the receiver's KV bucket; zero means demo_services_receipts.
	Bucket string
	// Retention, Lease and Replicas configure the receiver (see
	// [receiver.Config]); zero means its defaults (7 days, 1 minute, 1).
	Retention time.Duration
	Lease     time.Duration
	Replicas  int
}

// Services is the running demo services. Its methods are safe for
// concurrent use.
type Services struct {
	nc     *nats.Conn
	rcv    *receiver.Receiver
	logger *slog.Logger
	subs   []*nats.Subscription

	ctx    context.Context // handlers' context; Close cancels it
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	closed  bool
	modes   map[string]Mode
	effects map[string]int

	closeOnce sync.Once
	closeErr  error
}

// drainTimeout bounds how long Close waits for the subscriptions to drain;
// flushTimeout how long Start waits for the server to confirm them.
const (
	drainTimeout = 5 * time.Second
	flushTimeout = 10 * time.Second
)

// Start subscribes the services on nc (queue group "demo-services") and
// returns once the server knows the subscriptions. ctx bounds the setup
// only; stop the services with [Services.Close]. A nil logger discards.
func Start(ctx context.Context, nc *nats.Conn, js jetstream.JetStream, opts Options, logger *slog.Logger) (*Services, error) {
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	modes := map[string]Mode{}
	for _, name := range Names {
		modes[name] = Mode{Kind: OK}
	}
	var problems []error
	for name, m := range opts.Fail {
		if err := validService(name); err != nil {
			problems = append(problems, fmt.Errorf("services: %w", err))
			continue
		}
		if err := m.Validate(); err != nil {
			problems = append(problems, fmt.Errorf("services: %s: %w", name, err))
			continue
		}
		modes[name] = normal(m)
	}
	if err := errors.Join(problems...); err != nil {
		return nil, err
	}
	if opts.Bucket == "" {
		opts.Bucket = DefaultBucket
	}
	rcv, err := receiver.New(ctx, js, receiver.Config{Bucket: opts.Bucket, Retention: opts.Retention, Lease: opts.Lease, Replicas: opts.Replicas})
	if err != nil {
		return nil, fmt.Errorf("services: %w", err)
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s := &Services{
		nc: nc, rcv: rcv, logger: logger.With("component", "demo-services"),
		ctx: runCtx, cancel: cancel,
		modes: modes, effects: map[string]int{},
	}
	for _, ep := range endpoints() {
		sub, err := nc.QueueSubscribe(ep.subject, Queue, func(m *nats.Msg) { s.dispatch(ep, m) })
		if err != nil {
			s.unsubscribe()
			cancel()
			return nil, fmt.Errorf("services: subscribe %s: %w", ep.subject, err)
		}
		s.subs = append(s.subs, sub)
	}
	// Not a queue subscription: every running instance switches its modes.
	sub, err := nc.Subscribe(SubjectControl, s.control)
	if err != nil {
		s.unsubscribe()
		cancel()
		return nil, fmt.Errorf("services: subscribe %s: %w", SubjectControl, err)
	}
	s.subs = append(s.subs, sub)
	fctx, fcancel := context.WithTimeout(ctx, flushTimeout) // Flush needs a deadline
	err = nc.FlushWithContext(fctx)
	fcancel()
	if err != nil {
		s.unsubscribe()
		cancel()
		return nil, fmt.Errorf("services: flush the subscriptions: %w", err)
	}
	s.logger.Info("started", "subject", SubjectAll, "queue", Queue, "bucket", opts.Bucket, "modes", s.modesString())
	return s, nil
}

// normal spells OK as OK and clears a count that cannot matter.
func normal(m Mode) Mode {
	if m.Kind == "" || m.Kind == OK {
		return Mode{Kind: OK}
	}
	return m
}

// Close stops the services: the subscriptions drain (requests already
// received are handled), then the requests still running — a slow one,
// say — are cancelled and answered as retryable. It is idempotent.
func (s *Services) Close() error {
	s.closeOnce.Do(func() {
		var errs []error
		for _, sub := range s.subs {
			if err := sub.Drain(); err != nil && !errors.Is(err, nats.ErrConnectionClosed) && !errors.Is(err, nats.ErrBadSubscription) {
				errs = append(errs, fmt.Errorf("drain %s: %w", sub.Subject, err))
			}
		}
		deadline := time.Now().Add(drainTimeout)
		for _, sub := range s.subs {
			for sub.IsValid() && time.Now().Before(deadline) {
				time.Sleep(5 * time.Millisecond)
			}
		}
		s.unsubscribe()
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
		s.cancel()
		s.wg.Wait()
		s.closeErr = errors.Join(errs...)
		s.logger.Info("stopped")
	})
	return s.closeErr
}

func (s *Services) unsubscribe() {
	for _, sub := range s.subs {
		_ = sub.Unsubscribe()
	}
}

// Effects returns how many effects each subject actually performed
// (successful, not replayed): the count that proves exactly-once.
func (s *Services) Effects() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.effects)
}

// Modes returns every service's current mode.
func (s *Services) Modes() map[string]Mode {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.modes)
}

// SetMode switches a service's mode, as a request to demo.svc.control does.
func (s *Services) SetMode(service string, m Mode) error {
	if err := validService(service); err != nil {
		return err
	}
	if err := m.Validate(); err != nil {
		return err
	}
	s.mu.Lock()
	s.modes[service] = normal(m)
	s.mu.Unlock()
	s.logger.Info("mode changed", "service", service, "mode", normal(m).Kind, "count", m.Count, "delay", m.Delay)
	return nil
}

func (s *Services) modesString() string {
	data, _ := json.Marshal(s.Modes())
	return string(data)
}

// take returns the mode that applies to this request and counts it down.
func (s *Services) take(service string) Mode {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.modes[service]
	if m.Kind != OK && m.Count > 0 {
		next := m
		next.Count--
		if next.Count == 0 {
			next = Mode{Kind: OK}
		}
		s.modes[service] = next
	}
	return m
}

func (s *Services) control(m *nats.Msg) {
	reply := func(r ControlReply) {
		data, _ := json.Marshal(r)
		_ = m.Respond(data)
	}
	if len(m.Data) > 0 {
		var req ControlRequest
		if err := json.Unmarshal(m.Data, &req); err != nil {
			reply(ControlReply{Error: fmt.Sprintf("undecodable control request: %v; want {\"service\":\"flights\",\"mode\":\"ok|transient|terminal|slow\",\"count\":N,\"delay\":\"3s\"}", err)})
			return
		}
		mode := Mode{Kind: req.Mode, Count: req.Count}
		if req.Delay != "" {
			d, err := time.ParseDuration(req.Delay)
			if err != nil {
				reply(ControlReply{Error: fmt.Sprintf("delay %q is not a duration such as 3s", req.Delay)})
				return
			}
			mode.Delay = d
		}
		if mode.Kind == "" {
			reply(ControlReply{Error: "mode is empty: want ok, transient, terminal or slow"})
			return
		}
		if err := s.SetMode(req.Service, mode); err != nil {
			reply(ControlReply{Error: err.Error()})
			return
		}
	}
	reply(ControlReply{Modes: s.Modes()})
}
