package api

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
)

// MicroService is the API as a NATS micro service. Requests are handled
// concurrently (a bounded pool); Stop waits for in-flight ones.
type MicroService struct {
	svc     micro.Service
	s       *Service
	nc      *nats.Conn
	sem     chan struct{}
	wg      sync.WaitGroup
	timeout time.Duration

	inFlight atomic.Int64

	mu       sync.Mutex
	stats    map[string]*endpointStats // by endpoint name
	stopping bool                      // set by Stop: late requests get 503
}

// endpointStats are counted by esjet because replies are sent from worker
// goroutines, after micro's own per-request accounting has run: they appear
// under "data" in the service's $SRV.STATS reply.
type endpointStats struct {
	Requests       int64   `json:"requests"`
	Errors         int64   `json:"errors"`
	LastError      string  `json:"last_error,omitempty"`
	ProcessingMs   float64 `json:"processing_ms"`
	AverageMs      float64 `json:"average_ms"`
	processingTime time.Duration
}

// ServiceName is the micro service name `nats micro ls` shows.
const ServiceName = "esjet"

// SubjectPrefix is where the namespace's API listens: esjet.<ns>.
func SubjectPrefix(ns string) string { return "esjet." + ns }

// StartMicro registers the micro service on nc: one endpoint group per
// aggregate type (esjet.<ns>.<type>.<id>.<command|state|events>), the raw
// event-store group and a types endpoint. version must be semver.
func (s *Service) StartMicro(nc *nats.Conn, version string) (*MicroService, error) {
	ms := &MicroService{s: s, nc: nc, sem: make(chan struct{}, 256), timeout: 10 * time.Second, stats: map[string]*endpointStats{}}
	svc, err := micro.AddService(nc, micro.Config{
		Name:        ServiceName,
		Version:     version,
		Description: fmt.Sprintf("esjet command and event-store API for namespace %s", s.ns),
		Metadata:    map[string]string{"namespace": s.ns},
		StatsHandler: func(ep *micro.Endpoint) any {
			ms.mu.Lock()
			defer ms.mu.Unlock()
			st := ms.stats[ep.Name]
			if st == nil {
				return endpointStats{}
			}
			return *st
		},
	})
	if err != nil {
		return nil, fmt.Errorf("start micro service: %w", err)
	}
	ms.svc = svc
	prefix := SubjectPrefix(s.ns)
	add := func(g micro.Group, name, subject string, h func(micro.Request) (any, error)) error {
		return g.AddEndpoint(name, micro.HandlerFunc(ms.async(name, h)), micro.WithEndpointSubject(subject),
			micro.WithEndpointQueueGroup("esjet-"+s.ns))
	}
	var errs []error
	root := svc.AddGroup(prefix, micro.WithGroupQueueGroup("esjet-"+s.ns))
	errs = append(errs, add(root, "types", "types", func(micro.Request) (any, error) { return s.Types(), nil }))
	for _, typ := range s.repo.Registry().Types() {
		g := root.AddGroup(typ)
		errs = append(errs, add(g, typ, "*.*", func(req micro.Request) (any, error) {
			id, op := lastTwo(req.Subject())
			ctx, cancel := context.WithTimeout(context.Background(), ms.timeout)
			defer cancel()
			switch op {
			case "state":
				return s.State(ctx, typ, id)
			case "events":
				after, err := afterOf(req)
				if err != nil {
					return nil, err
				}
				return s.Events(ctx, typ, id, after, true)
			default:
				return s.Send(ctx, typ, id, op, req.Data(), microMeta(req))
			}
		}))
	}
	raw := root.AddGroup("raw")
	errs = append(errs, add(raw, "raw_append", "append.*.*", func(req micro.Request) (any, error) {
		typ, id := lastTwo(req.Subject())
		ctx, cancel := context.WithTimeout(context.Background(), ms.timeout)
		defer cancel()
		return s.AppendRaw(ctx, typ, id, req.Data(), microMeta(req))
	}))
	errs = append(errs, add(raw, "raw_events", "events.*.*", func(req micro.Request) (any, error) {
		typ, id := lastTwo(req.Subject())
		ctx, cancel := context.WithTimeout(context.Background(), ms.timeout)
		defer cancel()
		after, err := afterOf(req)
		if err != nil {
			return nil, err
		}
		return s.Events(ctx, typ, id, after, false)
	}))
	for _, err := range errs {
		if err != nil {
			_ = svc.Stop()
			return nil, fmt.Errorf("add micro endpoint: %w", err)
		}
	}
	return ms, nil
}

// async runs h on its own goroutine (bounded), so one slow aggregate does
// not hold up the subscription, and replies with JSON or an error
// (Nats-Service-Error-Code = the HTTP-like status). The reply is published
// directly, not through micro.Request: micro reads the request's error state
// as soon as the handler returns, which would race with a late reply.
func (ms *MicroService) async(endpoint string, h func(micro.Request) (any, error)) func(micro.Request) {
	return func(req micro.Request) {
		start := time.Now()
		if len(req.Data()) > ms.s.maxBody {
			ms.reply(endpoint, start, req, nil, tooLarge(len(req.Data()), ms.s.maxBody))
			return
		}
		// micro keeps dispatching what its subscriptions already received
		// after Stop: those requests are told to go elsewhere, and the
		// WaitGroup is never added to after Stop waits on it.
		ms.mu.Lock()
		if ms.stopping {
			ms.mu.Unlock()
			ms.reply(endpoint, start, req, nil, &Error{Status: 503, Code: "stopping", Message: "this node is shutting down; retry (with the same Idempotency-Key) on another"})
			return
		}
		ms.wg.Add(1)
		ms.inFlight.Add(1)
		ms.mu.Unlock()
		ms.sem <- struct{}{}
		go func() {
			defer func() { <-ms.sem; ms.inFlight.Add(-1); ms.wg.Done() }()
			defer func() {
				if p := recover(); p != nil {
					ms.reply(endpoint, start, req, nil, fmt.Errorf("panic handling %s: %v", req.Subject(), p))
				}
			}()
			v, err := h(req)
			ms.reply(endpoint, start, req, v, err)
		}()
	}
}

func (ms *MicroService) reply(endpoint string, start time.Time, req micro.Request, v any, err error) {
	msg := nats.NewMsg(req.Reply())
	var errText string
	if err == nil {
		msg.Data, err = marshal(v)
	}
	if err != nil {
		ae := toError(err)
		if ae.Status >= 500 {
			ms.s.logger.Error("request failed", "subject", req.Subject(), "error", err)
		}
		errText = ae.Message
		if errText == "" {
			errText = ae.Code
		}
		msg.Header.Set(micro.ErrorCodeHeader, strconv.Itoa(ae.Status))
		msg.Header.Set(micro.ErrorHeader, oneLine(errText))
		msg.Data, _ = marshal(map[string]any{"error": ae})
	}
	if req.Reply() != "" {
		if perr := ms.nc.PublishMsg(msg); perr != nil {
			ms.s.logger.Warn("reply not sent", "subject", req.Subject(), "error", perr)
		}
	}
	ms.mu.Lock()
	st := ms.stats[endpoint]
	if st == nil {
		st = &endpointStats{}
		ms.stats[endpoint] = st
	}
	st.Requests++
	st.processingTime += time.Since(start)
	st.ProcessingMs = float64(st.processingTime) / float64(time.Millisecond)
	st.AverageMs = st.ProcessingMs / float64(st.Requests)
	if errText != "" {
		st.Errors++
		st.LastError = errText
	}
	ms.mu.Unlock()
}

// oneLine keeps a header value on one line.
func oneLine(s string) string {
	return strings.NewReplacer("\r", " ", "\n", " ").Replace(s)
}

// InFlight is the number of requests being handled.
func (ms *MicroService) InFlight() int64 { return ms.inFlight.Load() }

// Stop unregisters the service and waits for in-flight requests (bounded by
// their own timeout).
func (ms *MicroService) Stop() error {
	err := ms.svc.Stop()
	ms.mu.Lock()
	ms.stopping = true
	ms.mu.Unlock()
	ms.wg.Wait()
	return err
}

func lastTwo(subject string) (string, string) {
	toks := strings.Split(subject, ".")
	if len(toks) < 2 {
		return "", ""
	}
	return toks[len(toks)-2], toks[len(toks)-1]
}

// HeaderAfterVersion asks the events operation for the events after a
// version (HTTP: ?after=N).
const HeaderAfterVersion = "Esjet-After-Version"

func afterOf(req micro.Request) (uint64, error) {
	h := req.Headers().Get(HeaderAfterVersion)
	if h == "" {
		return 0, nil
	}
	v, err := strconv.ParseUint(h, 10, 64)
	if err != nil {
		return 0, &Error{Status: 400, Code: "bad_request", Message: HeaderAfterVersion + " must be a version number, got " + strconv.Quote(h)}
	}
	return v, nil
}

func microMeta(req micro.Request) Meta {
	h := req.Headers()
	return Meta{
		IdempotencyKey: h.Get(HeaderIdempotencyKey),
		CorrelationID:  h.Get(HeaderCorrelationID),
		CausationID:    h.Get(HeaderCausationID),
		TraceParent:    h.Get(HeaderTraceParent),
	}
}
