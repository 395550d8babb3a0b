package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
)

// The micro protocol's discovery side, spoken by esjet itself so that STATS
// tells the truth (see [MicroService]): PING, INFO and STATS on
// $SRV.<VERB>, $SRV.<VERB>.esjet and $SRV.<VERB>.esjet.<id>, answered with
// nats.go micro's own response types, so `nats micro ls|info|stats` and
// any micro client read them as from any other service.

// semverRE is the version micro services must have (nats.go micro's rule).
var semverRE = regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$`)

// subscribeVerbs answers PING, INFO and STATS for this instance.
func (ms *MicroService) subscribeVerbs() error {
	verbs := map[micro.Verb]func() any{
		micro.PingVerb:  func() any { return micro.Ping{ServiceIdentity: ms.identity(), Type: micro.PingResponseType} },
		micro.InfoVerb:  func() any { return ms.info() },
		micro.StatsVerb: func() any { return ms.Stats() },
	}
	for verb, answer := range verbs {
		for _, scope := range [][2]string{{"", ""}, {ServiceName, ""}, {ServiceName, ms.id}} {
			subj, err := micro.ControlSubject(verb, scope[0], scope[1])
			if err != nil {
				return err
			}
			sub, err := ms.nc.Subscribe(subj, func(m *nats.Msg) {
				if replyIntoStore(ms.s.ns, m.Reply) {
					ms.s.logger.Warn("micro "+verb.String()+" dropped: its reply subject is one esjet stores or serves", "reply", m.Reply)
					return
				}
				data, err := json.Marshal(answer())
				if err == nil && m.Reply != "" {
					err = m.Respond(data)
				}
				if err != nil {
					ms.s.logger.Warn("micro "+verb.String()+" not answered", "subject", m.Subject, "error", err)
				}
			})
			if err != nil {
				return fmt.Errorf("%s on %s: %w", verb, subj, err)
			}
			ms.subs = append(ms.subs, sub)
		}
	}
	return nil
}

// unsubscribe drains every subscription: what they already received is
// still handled (and, once Stop has begun, answered 503).
func (ms *MicroService) unsubscribe() error {
	var errs []error
	for _, sub := range ms.subs {
		if err := sub.Drain(); err != nil && !errors.Is(err, nats.ErrConnectionClosed) && !errors.Is(err, nats.ErrBadSubscription) {
			errs = append(errs, fmt.Errorf("drain %s: %w", sub.Subject, err))
		}
	}
	ms.subs = nil
	return errors.Join(errs...)
}

func (ms *MicroService) identity() micro.ServiceIdentity {
	return micro.ServiceIdentity{Name: ServiceName, ID: ms.id, Version: ms.version, Metadata: map[string]string{"namespace": ms.s.ns}}
}

func (ms *MicroService) info() micro.Info {
	in := micro.Info{ServiceIdentity: ms.identity(), Type: micro.InfoResponseType,
		Description: fmt.Sprintf("esjet command and event-store API for namespace %s", ms.s.ns), Endpoints: []micro.EndpointInfo{}}
	for _, ep := range ms.endpoints {
		in.Endpoints = append(in.Endpoints, micro.EndpointInfo{Name: ep.name, Subject: ep.subject, QueueGroup: ep.queue})
	}
	return in
}

// Stats is what `nats micro stats esjet` shows of this instance: per
// endpoint, the requests answered, the errors among them, and the time from
// receiving each request to sending its reply (also under "data", in
// milliseconds).
func (ms *MicroService) Stats() micro.Stats {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	st := micro.Stats{ServiceIdentity: ms.identity(), Type: micro.StatsResponseType, Started: ms.started, Endpoints: []*micro.EndpointStats{}}
	for _, ep := range ms.endpoints {
		es := &micro.EndpointStats{Name: ep.name, Subject: ep.subject, QueueGroup: ep.queue}
		s := endpointStats{}
		if p := ms.stats[ep.name]; p != nil {
			s = *p
		}
		es.NumRequests, es.NumErrors, es.LastError = int(s.Requests), int(s.Errors), s.LastError
		es.ProcessingTime = s.processingTime
		if s.Requests > 0 {
			es.AverageProcessingTime = s.processingTime / time.Duration(s.Requests)
		}
		es.Data, _ = json.Marshal(s)
		st.Endpoints = append(st.Endpoints, es)
	}
	return st
}
