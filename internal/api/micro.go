package api

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/esjet/esjet/internal/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"github.com/nats-io/nuid"
)

// MicroService is the API as a NATS micro service. Requests are handled
// concurrently (a bounded pool); Stop waits for in-flight ones.
//
// It speaks the micro protocol itself (microproto.go) rather than through
// nats.go's micro package: that package times a request and counts its
// error around the endpoint handler's return, and esjet answers from a
// worker goroutine after the handler returned, so `nats micro stats` showed
// every request as taking microseconds and none as failing. Here a request
// is counted when its reply is sent.
type MicroService struct {
	s       *Service
	nc      *nats.Conn
	sem     chan struct{}
	wg      sync.WaitGroup
	timeout time.Duration

	id, version string
	started     time.Time
	endpoints   []microEndpoint // in registration order: what INFO and STATS list
	subs        []*nats.Subscription

	inFlight atomic.Int64

	mu       sync.Mutex
	stats    map[string]*endpointStats // by endpoint name
	stopping bool                      // set by Stop: late requests get 503
}

// microEndpoint is one endpoint as `nats micro info` lists it.
type microEndpoint struct {
	name, subject, queue string
}

// endpointStats are one endpoint's figures: each request counted when its
// reply is sent, from the moment it was received.
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

// StartMicro registers the micro service on nc: one endpoint per aggregate
// type (esjet.<ns>.<type>.*.*: <id>.<command|state|events>), the raw
// event-store endpoints, a types endpoint, and a catch-all endpoint on
// esjet.<ns>.> that answers what no other endpoint serves — an unknown type,
// an id with a dot, a subject of the wrong shape — with the error HTTP
// gives. version must be semver.
//
// All endpoints share one queue group, and NATS picks one member of a queue
// group among every subscription that matches, whatever its subject: the
// catch-all receives some requests meant for a typed endpoint. So every
// endpoint routes by the whole subject ([routeSubject]), and any of them
// answers any request the same; the typed endpoints are there to be
// discovered (`nats micro info esjet`). Stats (`nats micro stats esjet`,
// and the same under "data") are counted by the route, not by the
// subscription that happened to receive the request.
func (s *Service) StartMicro(nc *nats.Conn, version string) (*MicroService, error) {
	if !semverRE.MatchString(version) {
		return nil, fmt.Errorf("start micro service: version %q is not semver (e.g. 1.2.3)", version)
	}
	ms := &MicroService{s: s, nc: nc, sem: make(chan struct{}, 256), timeout: 10 * time.Second, stats: map[string]*endpointStats{},
		id: nuid.Next(), version: version, started: time.Now().UTC()}
	prefix, queue := wire.APIPrefix(s.ns), wire.APIQueue(s.ns)
	add := func(name, subject string) {
		ms.endpoints = append(ms.endpoints, microEndpoint{name: name, subject: prefix + "." + subject, queue: queue})
	}
	add(endpointTypes, "types")
	add(endpointMulti, "multi")
	for _, typ := range s.repo.Registry().Types() {
		add(typ, typ+".*.*")
	}
	add(endpointRawAppend, "raw.append.*.*")
	add(endpointRawEvents, "raw.events.*.*")
	add(endpointOps, "ops.*.dlq.*")
	add(endpointOps+"_projections", "ops.*.projections.*")
	add(endpointOps+"_workers", "ops.*.workers.*")
	add(endpointOps+"_personal", "ops.*.personal.*")
	add(endpointLog, "log")
	add(endpointViews, "views.>")
	add(endpointUnrouted, ">")
	if err := ms.subscribe(); err != nil {
		ms.unsubscribe()
		return nil, fmt.Errorf("start micro service: %w", err)
	}
	return ms, nil
}

// subscribe subscribes the endpoints (queue group) and the protocol's
// PING, INFO and STATS subjects.
func (ms *MicroService) subscribe() error {
	for _, ep := range ms.endpoints {
		sub, err := ms.nc.QueueSubscribe(ep.subject, ep.queue, ms.dispatch)
		if err != nil {
			return fmt.Errorf("endpoint %s on %s: %w", ep.name, ep.subject, err)
		}
		ms.subs = append(ms.subs, sub)
	}
	return ms.subscribeVerbs()
}

// dispatch answers one request by its subject, whichever endpoint got it.
func (ms *MicroService) dispatch(req *nats.Msg) {
	if ms.s.guardedReply(req.Reply) {
		ms.s.logger.Warn("request dropped: its reply subject is one esjet stores or serves (a forged reply would write there)", "subject", req.Subject, "reply", req.Reply)
		return
	}
	r, rerr := routeSubject(wire.APIPrefix(ms.s.ns), req.Subject)
	if r.typ != "" && r.op != opRawAppend && r.op != opRawEvents {
		if _, err := ms.s.repo.Registry().Get(r.typ); err != nil {
			r.endpoint = endpointUnrouted // counted where the request landed for good
		}
	}
	ms.async(r.endpoint, func(req *nats.Msg) (any, error) {
		if rerr != nil {
			return nil, rerr
		}
		ctx, cancel := context.WithTimeout(context.Background(), ms.timeout)
		defer cancel()
		return ms.s.serve(ctx, r, req)
	})(req)
}

// serve runs the operation r names. A body with a key twice is refused
// first ([checkDuplicateKeys]): here for the bodies of reads and operator
// actions, in [checkBody] for commands, raw appends and multi (on HTTP too).
func (s *Service) serve(ctx context.Context, r route, req *nats.Msg) (any, error) {
	if r.op != opSend && r.op != opRawAppend && r.op != opMulti {
		if err := checkDuplicateKeys(req.Data); err != nil {
			return nil, err
		}
	}
	switch r.op {
	case opTypes:
		return s.Types(), nil
	case opState:
		return s.State(ctx, r.typ, r.id)
	case opEvents, opRawEvents:
		page, err := microPage(req)
		if err != nil {
			return nil, err
		}
		return s.EventsPage(ctx, r.typ, r.id, page, r.op == opEvents)
	case opRawAppend:
		return s.AppendRaw(ctx, r.typ, r.id, req.Data, microMeta(req))
	case opLog:
		p, err := parsePage(req.Header.Get(HeaderAfterPosition), req.Header.Get(HeaderLimit), HeaderAfterPosition, HeaderLimit, afterPosition)
		if err == nil {
			p, err = pageBody(req.Data, p, afterPosition)
		}
		if err != nil {
			return nil, err
		}
		return s.ReadLog(ctx, p)
	case opViewGet, opViewsLs:
		return s.serveView(ctx, r, req.Data)
	case opMulti:
		return s.Multi(ctx, req.Data, microMeta(req))
	case opViewOps:
		return s.serveViewAction(ctx, r.user, r.action, req.Data)
	case opOps:
		if s.ops == nil {
			return nil, &Error{Status: 404, Code: CodeNoRoute, Message: fmt.Sprintf("%s: this API serves no operator actions", req.Subject)}
		}
		return s.ops(ctx, r.user, r.action, req.Data)
	default:
		return s.Send(ctx, r.typ, r.id, r.kind, req.Data, microMeta(req))
	}
}

// async runs h on its own goroutine (bounded), so one slow aggregate does
// not hold up the subscription, and replies with JSON or an error
// (Nats-Service-Error-Code = the HTTP-like status), counting the request
// in endpoint's stats when the reply is sent.
func (ms *MicroService) async(endpoint string, h func(*nats.Msg) (any, error)) func(*nats.Msg) {
	return func(req *nats.Msg) {
		start := time.Now()
		if len(req.Data) > ms.s.maxBody {
			ms.reply(endpoint, start, req, nil, tooLarge(len(req.Data), ms.s.maxBody))
			return
		}
		// The subscriptions may still deliver what they already received
		// after Stop: those requests are told to go elsewhere, and the
		// WaitGroup is never added to after Stop waits on it.
		ms.mu.Lock()
		if ms.stopping {
			ms.mu.Unlock()
			ms.reply(endpoint, start, req, nil, &Error{Status: 503, Code: CodeStopping, Message: "this node is shutting down; retry (with the same Idempotency-Key) on another"})
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
					ms.reply(endpoint, start, req, nil, fmt.Errorf("panic handling %s: %v", req.Subject, p))
				}
			}()
			v, err := h(req)
			ms.reply(endpoint, start, req, v, err)
		}()
	}
}

func (ms *MicroService) reply(endpoint string, start time.Time, req *nats.Msg, v any, err error) {
	msg := nats.NewMsg(req.Reply)
	var errText string
	if err == nil {
		msg.Data, err = marshal(v)
	}
	if err != nil {
		ae := toError(err)
		if ae.Status >= 500 {
			ms.s.logger.Error("request failed", "subject", req.Subject, "error", err)
		}
		errText = ae.Message
		if errText == "" {
			errText = ae.Code
		}
		msg.Header.Set(micro.ErrorCodeHeader, strconv.Itoa(ae.Status))
		msg.Header.Set(micro.ErrorHeader, oneLine(errText))
		msg.Data, _ = marshal(map[string]any{"error": ae})
	}
	if req.Reply != "" {
		if perr := ms.nc.PublishMsg(msg); perr != nil {
			ms.s.logger.Warn("reply not sent", "subject", req.Subject, "error", perr)
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

// Stop unregisters the service (its subscriptions drain what they hold)
// and waits for in-flight requests (bounded by their own timeout).
func (ms *MicroService) Stop() error {
	err := ms.unsubscribe()
	ms.mu.Lock()
	ms.stopping = true
	ms.mu.Unlock()
	ms.wg.Wait()
	return err
}

// microPage reads a history request's page from its headers, then its
// optional JSON body.
func microPage(req *nats.Msg) (Page, error) {
	h := req.Header
	p, err := parsePage(h.Get(HeaderAfterVersion), h.Get(HeaderLimit), HeaderAfterVersion, HeaderLimit, afterVersion)
	if err != nil {
		return p, err
	}
	return pageBody(req.Data, p, afterVersion)
}

func microMeta(req *nats.Msg) Meta {
	h := req.Header
	return Meta{
		IdempotencyKey: h.Get(HeaderIdempotencyKey),
		CorrelationID:  h.Get(HeaderCorrelationID),
		CausationID:    h.Get(HeaderCausationID),
		TraceParent:    strings.Join(h.Values(HeaderTraceParent), ","),
	}
}
