package api

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
)

// MicroService is the API as a NATS micro service. Requests are handled
// concurrently (a bounded pool); Stop waits for in-flight ones.
type MicroService struct {
	svc     micro.Service
	s       *Service
	sem     chan struct{}
	wg      sync.WaitGroup
	timeout time.Duration
}

// ServiceName is the micro service name `nats micro ls` shows.
const ServiceName = "esjet"

// SubjectPrefix is where the namespace's API listens: esjet.<ns>.
func SubjectPrefix(ns string) string { return "esjet." + ns }

// StartMicro registers the micro service on nc: one endpoint group per
// aggregate type (esjet.<ns>.<type>.<id>.<command|state|events>), the raw
// event-store group and a types endpoint. version must be semver.
func (s *Service) StartMicro(nc *nats.Conn, version string) (*MicroService, error) {
	ms := &MicroService{s: s, sem: make(chan struct{}, 256), timeout: 30 * time.Second}
	svc, err := micro.AddService(nc, micro.Config{
		Name:        ServiceName,
		Version:     version,
		Description: fmt.Sprintf("esjet command and event-store API for namespace %s", s.ns),
		Metadata:    map[string]string{"namespace": s.ns},
	})
	if err != nil {
		return nil, fmt.Errorf("start micro service: %w", err)
	}
	ms.svc = svc
	prefix := SubjectPrefix(s.ns)
	add := func(g micro.Group, name, subject string, h func(micro.Request) (any, error)) error {
		return g.AddEndpoint(name, micro.HandlerFunc(ms.async(h)), micro.WithEndpointSubject(subject),
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
				return s.Events(ctx, typ, id, afterOf(req), true)
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
		return s.Events(ctx, typ, id, afterOf(req), false)
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
// not hold up the subscription, and replies with JSON or a micro error
// (Nats-Service-Error-Code = the HTTP-like status).
func (ms *MicroService) async(h func(micro.Request) (any, error)) func(micro.Request) {
	return func(req micro.Request) {
		if len(req.Data()) > ms.s.maxBody {
			ms.reply(req, nil, tooLarge(len(req.Data()), ms.s.maxBody))
			return
		}
		ms.sem <- struct{}{}
		ms.wg.Add(1)
		go func() {
			defer func() { <-ms.sem; ms.wg.Done() }()
			v, err := h(req)
			ms.reply(req, v, err)
		}()
	}
}

func (ms *MicroService) reply(req micro.Request, v any, err error) {
	if err != nil {
		ae := toError(err)
		if ae.Status >= 500 {
			ms.s.logger.Error("request failed", "subject", req.Subject(), "error", err)
		}
		body, _ := json.Marshal(map[string]any{"error": ae})
		_ = req.Error(strconv.Itoa(ae.Status), ae.Message, body)
		return
	}
	_ = req.RespondJSON(v)
}

// Stop unregisters the service and waits for in-flight requests.
func (ms *MicroService) Stop() error {
	err := ms.svc.Stop()
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

func afterOf(req micro.Request) uint64 {
	v, _ := strconv.ParseUint(req.Headers().Get("Esjet-After-Version"), 10, 64)
	return v
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
