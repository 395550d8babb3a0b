package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/config"
	"github.com/esjet/esjet/internal/aggregate"
	"github.com/esjet/esjet/internal/api"
	"github.com/esjet/esjet/internal/broker"
	"github.com/esjet/esjet/internal/consumer"
	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/telemetry"
	"github.com/esjet/esjet/internal/wire"
)

// provision creates the node's missing streams and buckets and checks the
// existing ones (streams.Ensure: a node never updates a stream, esjet
// provision does). A hub's streams aggregate the sites' (its sources it
// keeps up to date itself), and a hub creates each site's outcome consumer
// (a site may not create consumers at the hub); every other node's streams
// are its own.
//
// The exception is an embedded server without users: the node owns that
// server and no role stands between anyone who reaches it and everything,
// so the node is its own admin and applies its configuration at start (as
// esjet provision would: a changed setting, or a limit someone set that
// deletes history, is put back as configured and logged) instead of asking
// for it.
func provision(ctx context.Context, js jetstream.JetStream, cfg config.Config, logger *slog.Logger) ([]streams.Change, error) {
	var changes []streams.Change
	var err error
	if cfg.Edge.Role == config.EdgeHub {
		if changes, err = provisionStaging(ctx, js, cfg, logger); err != nil {
			return changes, err
		}
	}
	if ownAdmin(cfg) {
		var ch []streams.Change
		ch, err = streams.Apply(ctx, js, Objects(cfg), streams.ApplyChanges, logger)
		changes = append(changes, ch...)
		for _, c := range ch {
			if c.Action == "updated" && logger != nil {
				logger.Warn("changed a stream to the configuration: this embedded server has no users, so the node is its own admin (a shorter limit deletes what is past it)",
					"stream", c.Name, "fields", c.Fields)
			}
		}
	} else {
		var ch []streams.Change
		ch, err = streams.Ensure(ctx, js, Objects(cfg), logger)
		changes = append(changes, ch...)
	}
	if err == nil && cfg.Edge.Role == config.EdgeHub {
		err = provisionOutcomeConsumers(ctx, js, cfg)
	}
	return changes, err
}

// ProvisionStaging is what esjet provision does first at a hub: make each
// site's staging streams, and move a site the hub reads directly to them
// ([provisionStaging]), before the hub's streams are changed to source
// them. Nothing for another node.
func ProvisionStaging(ctx context.Context, js jetstream.JetStream, cfg config.Config) ([]streams.Change, error) {
	if cfg.Edge.Role != config.EdgeHub {
		return nil, nil
	}
	return provisionStaging(ctx, js, cfg, nil)
}

// provisionStaging creates or updates each site's staging streams at the
// hub, in the site's staging account (broker.StagingAccount), before the
// hub's own streams source them. They are the hub's own plumbing: the hub
// node applies their configuration (sources included) as esjet provision
// would. A hub whose streams still read a site directly (built before
// staging) moves that site to staging (moveToStaging).
func provisionStaging(ctx context.Context, js jetstream.JetStream, cfg config.Config, logger *slog.Logger) ([]streams.Change, error) {
	var changes []streams.Change
	h := HubConfig(cfg)
	for _, site := range cfg.Edge.Sites {
		sjs, err := stagingJetStream(js, cfg, site)
		if err != nil {
			return changes, err
		}
		apply := func(from streams.StagingStart) error {
			ch, err := streams.Apply(ctx, sjs, streams.StagingObjects(cfg.Namespace, ProvisionConfig(cfg), h, site, from), streams.ApplyChanges, logger)
			changes = append(changes, ch...)
			return err
		}
		if _, err = sjs.Stream(ctx, h.Staging(site).Events); errors.Is(err, jetstream.ErrStreamNotFound) {
			err = moveToStaging(ctx, js, cfg, site, apply, logger)
		} else {
			err = apply(streams.StagingStart{})
		}
		if err != nil {
			return changes, fmt.Errorf("staging streams of site %s (account %s, which the server's accounts must hold as `esjet permissions` prints them): %w", site, broker.StagingAccount(cfg.Namespace, site), err)
		}
	}
	return changes, nil
}

// moveToStaging makes site's staging streams for the first time. Where the
// hub's EVENTS or OUTBOX reads the site directly (a hub built before
// staging), it stops that source first, starts the staging stream after the
// last site sequence the hub's stream holds, and then has the hub's stream
// source the staging one: nothing skipped, nothing sourced twice.
func moveToStaging(ctx context.Context, js jetstream.JetStream, cfg config.Config, site string, apply func(streams.StagingStart) error, logger *slog.Logger) error {
	var from streams.StagingStart
	names := streams.NamesFor(cfg.Namespace)
	st := HubConfig(cfg).Staging(site)
	type move struct {
		stream string
		staged *jetstream.StreamSource
	}
	var moved []move
	for _, x := range []struct {
		stream, staging string
		start           *uint64
	}{{names.Events, st.Events, &from.Events}, {names.Outbox, st.Outbox, &from.Outbox}} {
		if _, err := js.Stream(ctx, x.stream); err != nil {
			continue // a new hub
		}
		src, err := streams.DropDirectSiteSource(ctx, js, x.stream, site)
		if err != nil {
			return err
		}
		if src == nil {
			continue // already staged (its staging stream was lost: made again, the hub resumes after what it holds)
		}
		last, err := streams.LastSourcedSeq(ctx, js, x.stream, src)
		if err != nil {
			return fmt.Errorf("move site %s's source of %s to staging: %w", site, x.stream, err)
		}
		*x.start = last + 1
		moved = append(moved, move{x.stream, &jetstream.StreamSource{Name: x.staging, OptStartSeq: 1,
			External: &jetstream.ExternalStream{APIPrefix: st.APIPrefix, DeliverPrefix: st.DeliverPrefix}}})
		if logger != nil {
			logger.Info("moving a site's source to its staging account", "site", site, "stream", x.stream, "from_site_seq", last+1)
		}
	}
	if err := apply(from); err != nil {
		return err
	}
	for _, m := range moved {
		if err := streams.AddSource(ctx, js, m.stream, m.staged); err != nil {
			return err
		}
	}
	return nil
}

// stagingJetStream reaches site's staging account from the hub's streams
// account.
func stagingJetStream(js jetstream.JetStream, cfg config.Config, site string) (jetstream.JetStream, error) {
	return jetstream.NewWithAPIPrefix(js.Conn(), broker.StagingAPIPrefix(cfg.Namespace, site))
}

// ownAdmin reports whether the node is the admin of its server: embedded,
// without users.
func ownAdmin(cfg config.Config) bool {
	return cfg.NATS.Mode == config.ModeEmbedded && len(cfg.NATS.Embedded.Users) == 0
}

// Objects are the streams and buckets the node's configuration asks for:
// what its start creates and checks, and what esjet provision applies.
func Objects(cfg config.Config) []streams.Object {
	if cfg.Edge.Role == config.EdgeHub {
		return streams.HubObjects(cfg.Namespace, ProvisionConfig(cfg), HubConfig(cfg))
	}
	return streams.Objects(cfg.Namespace, ProvisionConfig(cfg))
}

// HubConfig maps the node config to the hub's aggregation.
func HubConfig(cfg config.Config) streams.HubConfig {
	ns := cfg.Namespace
	return streams.HubConfig{Sites: cfg.Edge.Sites, HubKinds: cfg.Edge.HubKinds,
		DeliverPrefix: func(site string) string { return broker.SourceDeliverPrefix(ns, site) },
		Staging: func(site string) streams.Staging {
			events, outbox := broker.StagingStreams(ns, site)
			return streams.Staging{APIPrefix: broker.StagingAPIPrefix(ns, site), DeliverPrefix: broker.StagingDeliverPrefix(ns, site), Events: events, Outbox: outbox}
		}}
}

// sitesRule maps the edge config to the repository's ownership rule.
func sitesRule(cfg config.Config) aggregate.Sites {
	switch cfg.Edge.Role {
	case config.EdgeSite:
		return aggregate.Sites{Here: cfg.Edge.Site, OwnerOf: cfg.Edge.OwnerOf}
	case config.EdgeHub:
		return aggregate.Sites{Hub: true, OwnerOf: cfg.Edge.OwnerOf}
	}
	return aggregate.Sites{}
}

// runsRelay reports whether the node relays its log to OUTBOX: the hub
// does not, as its log holds the sites' decisions, whose commands their
// own relays carry (the hub kinds reach the hub's OUTBOX by sourcing).
func runsRelay(cfg config.Config) bool { return cfg.Edge.Role != config.EdgeHub }

// runsHere reports whether this node's workers may carry out kind: at the
// hub only the hub kinds, at a site every other kind (a hub kind waits in
// the site's OUTBOX for the hub to source it).
func runsHere(cfg config.Config, kind string) bool {
	switch cfg.Edge.Role {
	case config.EdgeHub:
		return cfg.Edge.IsHubKind(kind)
	case config.EdgeSite:
		return !cfg.Edge.IsHubKind(kind)
	}
	return true
}

// servedElsewhere adds to served the kinds the aggregates issue that run
// at another node of the fleet, so the node does not warn about them.
func servedElsewhere(cfg config.Config, defs []*aggregate.Definition, served map[string]bool) map[string]bool {
	for _, ik := range issuedKinds(defs) {
		if !runsHere(cfg, ik.Kind) {
			served[ik.Kind] = true
		}
	}
	return served
}

// feedbackFor is how the node's workers report outcomes: to the local
// repository, or at the hub onto OUTCOMES for the owning site to pull.
func (n *Node) feedbackFor() consumer.Feedback {
	if n.cfg.Edge.Role == config.EdgeHub {
		return hubFeedback{js: n.broker.JetStream(), names: streams.NamesFor(n.cfg.Namespace), ownerOf: n.cfg.Edge.OwnerOf}
	}
	return n.repo.Feedback(api.Status)
}

// hubAdmission is what a hub's workers check before running a command
// (consumer.KindConfig.Admit): a command the hub sourced from a site
// (Nats-Stream-Source names the site's staging OUTBOX: the server writes
// it, no site can) runs only when that site owns the command's aggregate
// (edge.owners). A process at a site can write anything into the site's
// own OUTBOX; without this it could have the hub act for another site's
// aggregate, and record the outcome for that site. A command without the
// header was published at the hub (a DLQ re-drive) and runs. Nil for
// every node but a hub.
func hubAdmission(cfg config.Config) func(nats.Header, consumer.Delivery) error {
	if cfg.Edge.Role != config.EdgeHub {
		return nil
	}
	bySource := map[string]string{}
	for _, site := range cfg.Edge.Sites {
		_, outbox := broker.StagingStreams(cfg.Namespace, site)
		bySource[outbox] = site
	}
	return func(h nats.Header, d consumer.Delivery) error {
		src := h.Get(wire.HeaderStreamSource)
		if src == "" {
			return nil
		}
		name, _, _ := strings.Cut(src, " ")
		name, _, _ = strings.Cut(name, ":")
		site, ok := bySource[name]
		if !ok {
			return fmt.Errorf("sourced from %q, which is no site's staging OUTBOX", name)
		}
		if owner := cfg.Edge.OwnerOf(d.AggregateType, d.AggregateID); owner != site {
			if owner == "" {
				owner = "no site"
			}
			return fmt.Errorf("site %s sent a command for %s/%s, which %s owns (edge.owners)", site, d.AggregateType, d.AggregateID, owner)
		}
		return nil
	}
}

// hubFeedback records a hub kind's outcome on <ns>.outcome.<site>, with
// the report's idempotency key as Nats-Msg-Id: the site that owns the
// aggregate pulls it when its link is up and applies it there.
type hubFeedback struct {
	js      jetstream.JetStream
	names   streams.Names
	ownerOf func(typ, id string) string
}

func (f hubFeedback) Report(ctx context.Context, r wire.Report) error {
	site := f.ownerOf(r.AggregateType, r.AggregateID)
	if site == "" {
		return fmt.Errorf("%w: %s/%s is owned by no site (edge.owners), so its outcome %s has nowhere to go", wire.ErrReportRefused, r.AggregateType, r.AggregateID, r.Kind)
	}
	if _, err := f.js.Publish(ctx, f.names.OutcomeSubject(site), r.Encode(), jetstream.WithMsgID(r.IdempotencyKey)); err != nil {
		return fmt.Errorf("record outcome %s of %s/%s for site %s: %w", r.Kind, r.AggregateType, r.AggregateID, site, err)
	}
	return nil
}

// startEdge starts what the node's edge role runs beside the rest: at a
// site the pull of hub kinds' outcomes, at the hub the sites' monitor.
func (n *Node) startEdge(ctx context.Context) {
	var run func(context.Context) error
	switch n.cfg.Edge.Role {
	case config.EdgeSite:
		run = n.pullOutcomes
	case config.EdgeHub:
		n.sites = newSiteMonitor(n)
		run = n.sites.Run
		if n.tel != nil {
			if err := n.tel.Register(newSiteMetrics(n.sites)); err != nil {
				n.logger.Warn("edge site metrics not served", "error", err)
			}
		}
	default:
		return
	}
	ectx, stop := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = n.watch(ectx, "edge", run(ectx))
	}()
	n.OnClose(func() { stop(); <-done })
}

// outcomeAckWait is how soon an outcome a site fetched and did not ack (it
// died meanwhile) is delivered again; applying one takes milliseconds, and a
// repeat is answered from the aggregate's log.
const outcomeAckWait = 10 * time.Second

// outcomeConsumerConfig is site's durable consumer on the hub's OUTCOMES.
// The hub creates it ([provisionOutcomeConsumers]): a site may only look
// it up and pull from it (broker.LeafPermissions).
func outcomeConsumerConfig(names streams.Names, site string) jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable: broker.OutcomeConsumer(site), FilterSubject: names.OutcomeSubject(site),
		AckPolicy: jetstream.AckExplicitPolicy, AckWait: outcomeAckWait, MaxAckPending: 256,
	}
}

// provisionOutcomeConsumers creates or updates at the hub each site's
// consumer of OUTCOMES, so that no site needs the right to create one.
func provisionOutcomeConsumers(ctx context.Context, js jetstream.JetStream, cfg config.Config) error {
	names := streams.NamesFor(cfg.Namespace)
	for _, site := range cfg.Edge.Sites {
		if _, err := js.CreateOrUpdateConsumer(ctx, names.Outcomes(), outcomeConsumerConfig(names, site)); err != nil {
			return fmt.Errorf("outcome consumer of site %s: %w", site, err)
		}
	}
	return nil
}

// pullOutcomes applies at this site the outcomes the hub recorded for it,
// in order, each once (a repeat is refused by the aggregate as answered
// and acked). It pulls from the consumer the hub created for it. While the
// link is down (or the hub has not created it yet) it tries again every
// second; the outcomes wait at the hub.
func (n *Node) pullOutcomes(ctx context.Context) error {
	e := n.cfg.Edge
	names := streams.NamesFor(n.cfg.Namespace)
	logger := n.logger.With("component", "edge", "site", e.Site)
	hub, err := jetstream.NewWithAPIPrefix(n.broker.Conn(), broker.HubAPIPrefix(n.cfg.Namespace))
	if err != nil {
		return err
	}
	receipts, err := n.broker.JetStream().KeyValue(ctx, names.Receipts)
	if err != nil {
		return fmt.Errorf("edge: receipts bucket: %w", err)
	}
	var cons jetstream.Consumer
	for ctx.Err() == nil {
		if cons == nil {
			cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			cons, err = hub.Consumer(cctx, names.Outcomes(), broker.OutcomeConsumer(e.Site))
			cancel()
			if err != nil {
				cons = nil
				logger.Debug("hub outcomes not reachable", "error", err)
				sleep(ctx, time.Second)
				continue
			}
		}
		batch, err := cons.Fetch(64, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			cons = nil
			sleep(ctx, time.Second)
			continue
		}
		for msg := range batch.Messages() {
			n.applyOutcome(ctx, logger, receipts, msg)
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) && !errors.Is(err, context.DeadlineExceeded) {
			logger.Debug("pull of hub outcomes ended", "error", err)
			cons = nil
			sleep(ctx, time.Second)
		}
	}
	return nil
}

// applyOutcome hands one hub outcome to its aggregate, as a local worker's
// report would, and records its receipt here so this site's reconcile sees
// the command settled.
func (n *Node) applyOutcome(ctx context.Context, logger *slog.Logger, receipts jetstream.KeyValue, msg jetstream.Msg) {
	r, err := wire.DecodeReport(msg.Data())
	if err != nil {
		logger.Error("undecodable hub outcome: skipped", "subject", msg.Subject(), "error", err)
		_ = msg.Term()
		return
	}
	if err := n.repo.Feedback(api.Status).Report(ctx, r); err != nil && !errors.Is(err, wire.ErrReportRefused) {
		logger.Warn("hub outcome not applied yet", "kind", r.Kind, "aggregate_type", r.AggregateType, "aggregate_id", r.AggregateID,
			"command_id", r.CausationID, "decision_id", r.DecisionID, "trace_id", telemetry.TraceIDOf(r.TraceParent), "error", err)
		_ = msg.NakWithDelay(time.Second)
		return
	}
	var o wire.Outcome
	if json.Unmarshal(r.Payload, &o) == nil && o.CommandID != "" {
		rc := wire.Receipt{CommandID: o.CommandID, Outcome: wire.OutcomeDone, Attempts: o.Attempts, LastError: o.Error, Result: o.Result, At: time.Now().UTC()}
		rc.Kind = r.Kind
		if of, outcome, ok := wire.ParseOutcomeKind(r.Kind); ok {
			rc.Kind, rc.Outcome = of, outcome
		}
		if _, err := receipts.Put(ctx, wire.ReceiptKey(o.CommandID), rc.Encode()); err != nil {
			logger.Warn("receipt of a hub outcome not written", "command_id", o.CommandID, "error", err)
		}
	}
	_ = msg.Ack()
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
