package streams

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/wire"
)

// HubConfig is what the hub of a fleet of edge sites aggregates
// (docs/edge.md).
type HubConfig struct {
	// Sites are the sites' ids: each is the JetStream domain its streams
	// are reached in, across the leaf link.
	Sites []string
	// HubKinds are the command kinds that run at the hub: the hub's OUTBOX
	// sources them from every site's OUTBOX.
	HubKinds []string
	// DeliverPrefix, when set, is where each site's source consumers
	// deliver to the hub (ExternalStream.DeliverPrefix): one prefix per site
	// lets the hub's leaf permissions take each site's deliveries from that
	// site only. Nil: JetStream's default, $JS.S.<random>.
	DeliverPrefix func(site string) string
	// Staging, when set, is where the hub stages each site's streams
	// (broker.StagingAccount): a staging account of the site's own sources
	// the site, and the hub's EVENTS and OUTBOX source the staging
	// streams, so that what a sourcing stream answers on a subject the site
	// names lands in that account ([StagingStreamConfigs]). Nil: the hub's
	// streams source the sites directly (a server without accounts, in
	// tests).
	Staging func(site string) Staging
}

// Staging is one site's staging account seen from the hub's streams
// account.
type Staging struct {
	// APIPrefix reaches the staging account's JetStream API; DeliverPrefix
	// is where the hub's sources of the staging streams deliver.
	APIPrefix, DeliverPrefix string
	// Events and Outbox are the staging streams' names.
	Events, Outbox string
}

// SiteAPIPrefix is the JetStream API of a site (or the hub) reached across
// the leaf link by its domain.
func SiteAPIPrefix(domain string) string { return "$JS." + domain + ".API" }

// HubStreamConfigs are the hub's streams. The hub records no decision of
// its own (every aggregate is owned by a site), so:
//   - EVENTS has no subjects: it sources each site's EVENTS by the site's
//     domain, from sequence 1 (a site added late delivers its whole
//     backlog, nats-server #8387), with an explicit duplicate window (a
//     stream with sources has none by default). Sourcing keeps subjects and
//     Nats-Msg-Id, so the hub reads <ns>.evt.<type>.<id> as the site wrote
//     it; owners keep two sites from writing one subject.
//   - OUTBOX sources the hub kinds from each site's OUTBOX (limits
//     retention there, kept for streams.outbox_max_age: the longest outage
//     the hub can catch up on) and keeps <ns>.outbox.> for the hub's own
//     re-drives from the DLQ. No schedules: they cannot be combined with
//     sources. With staging, no duplicate window: a site's copy of a
//     command id must not stand in for another site's.
//   - DLQ as on any node, and OUTCOMES (<ns>.outcome.<site>), from which
//     each site pulls its hub kinds' outcomes.
func HubStreamConfigs(names Names, c ProvisionConfig, h HubConfig) []jetstream.StreamConfig {
	base := StreamConfigs(names, c)
	events, outbox, dlq := base[0], base[1], base[2]
	events.Description = "esjet hub event log: every site's " + names.Events + ", sourced by domain"
	events.Subjects = nil
	outbox.Description = "esjet hub outbox: the hub kinds of every site's " + names.Outbox
	outbox.Subjects = []string{names.OutboxFilter()}
	outbox.AllowMsgSchedules, outbox.AllowRollup = false, false
	window := outbox.Duplicates // OUTCOMES keeps the configured window
	if h.Staging != nil {
		// One copy per command id would let a site's copy stand in for
		// another site's command of the same id (ids are deterministic):
		// no window. Sourcing from the staging streams, which are local,
		// repeats nothing.
		outbox.Duplicates = 0
	}
	for _, site := range h.Sites {
		if h.Staging != nil {
			st := h.Staging(site)
			external := func() *jetstream.ExternalStream {
				return &jetstream.ExternalStream{APIPrefix: st.APIPrefix, DeliverPrefix: st.DeliverPrefix}
			}
			events.Sources = append(events.Sources, &jetstream.StreamSource{Name: st.Events, OptStartSeq: 1, External: external()})
			if len(h.HubKinds) > 0 {
				outbox.Sources = append(outbox.Sources, &jetstream.StreamSource{Name: st.Outbox, OptStartSeq: 1, External: external()})
			}
			continue
		}
		events.Sources = append(events.Sources, siteSource(names, false, site, h))
		if len(h.HubKinds) > 0 {
			outbox.Sources = append(outbox.Sources, siteSource(names, true, site, h))
		}
	}
	outcomes := jetstream.StreamConfig{
		Name:              names.Outcomes(),
		Description:       "esjet hub outcomes of hub kinds, on " + names.Namespace + ".outcome.<site>, pulled by each site",
		Subjects:          []string{names.OutcomesFilter()},
		Retention:         jetstream.LimitsPolicy,
		Storage:           jetstream.FileStorage,
		Replicas:          outbox.Replicas,
		MaxAge:            outbox.MaxAge,
		MaxMsgs:           -1,
		MaxBytes:          -1,
		MaxMsgsPerSubject: -1,
		MaxMsgSize:        outbox.MaxMsgSize,
		Discard:           jetstream.DiscardOld,
		DenyDelete:        true,
		DenyPurge:         true,
		AllowDirect:       true,
		Duplicates:        window,
	}
	return []jetstream.StreamConfig{events, outbox, dlq, outcomes}
}

// siteSource is a source of a site's stream by the site's domain, from
// sequence 1: its EVENTS' events, or the hub kinds of its OUTBOX.
func siteSource(names Names, outbox bool, site string, h HubConfig) *jetstream.StreamSource {
	x := &jetstream.ExternalStream{APIPrefix: SiteAPIPrefix(site)}
	if h.DeliverPrefix != nil {
		x.DeliverPrefix = h.DeliverPrefix(site)
	}
	if outbox {
		return &jetstream.StreamSource{Name: names.Outbox, OptStartSeq: 1, External: x, SubjectTransforms: hubKindTransforms(names, h.HubKinds)}
	}
	return &jetstream.StreamSource{Name: names.Events, OptStartSeq: 1, External: x, FilterSubject: names.EventsFilter()}
}

// hubKindTransforms select the hub kinds of a site's OUTBOX.
func hubKindTransforms(names Names, kinds []string) []jetstream.SubjectTransformConfig {
	var out []jetstream.SubjectTransformConfig
	for _, kind := range kinds {
		subj := wire.CommandSubject(names.Namespace, kind)
		out = append(out, jetstream.SubjectTransformConfig{Source: subj, Destination: subj})
	}
	return out
}

// StagingStreamConfigs are site's staging streams at the hub (h.Staging):
// Events sources the site's EVENTS, Outbox the hub kinds of its OUTBOX (none
// without hub kinds), each from sequence 1. They have no subjects and deny
// purge and delete: nothing but sourcing writes them. They keep what the
// hub has not yet sourced from them for streams.outbox_max_age (the hub's
// sourcing from them is local and keeps up within moments), like a site's
// OUTBOX keeps what the hub has not sourced.
//
// from, when set, starts them at those site sequences (a hub moving to
// staging: [LastSourcedSeq]), numbering their messages from there too.
func StagingStreamConfigs(names Names, c ProvisionConfig, h HubConfig, site string, from StagingStart) []jetstream.StreamConfig {
	base := StreamConfigs(names, c)
	events, outbox := base[0], base[1]
	st := h.Staging(site)
	stage := func(cfg jetstream.StreamConfig, name, what string, src *jetstream.StreamSource, start uint64) jetstream.StreamConfig {
		if start > 1 {
			src.OptStartSeq, cfg.FirstSeq = start, start
		}
		cfg.Name, cfg.Description = name, "esjet hub staging of site "+site+"'s "+what+", sourced by its domain; the hub's "+what+" sources this"
		cfg.Subjects, cfg.Sources = nil, []*jetstream.StreamSource{src}
		cfg.Retention, cfg.Discard, cfg.MaxAge = jetstream.LimitsPolicy, jetstream.DiscardOld, outbox.MaxAge
		cfg.MaxMsgs, cfg.MaxBytes, cfg.MaxMsgsPerSubject = -1, -1, -1
		cfg.DenyDelete, cfg.DenyPurge = true, true
		cfg.AllowMsgSchedules, cfg.AllowRollup, cfg.AllowMsgTTL = false, false, false
		cfg.AllowAtomicPublish = false
		if cfg.Duplicates == 0 {
			cfg.Duplicates = events.Duplicates
		}
		return cfg
	}
	out := []jetstream.StreamConfig{stage(events, st.Events, names.Events, siteSource(names, false, site, h), from.Events)}
	if len(h.HubKinds) > 0 {
		out = append(out, stage(outbox, st.Outbox, names.Outbox, siteSource(names, true, site, h), from.Outbox))
	}
	return out
}

// StagingStart is the first site sequence of each staging stream, 0 for
// the first.
type StagingStart struct{ Events, Outbox uint64 }

// StagingObjects are site's staging streams ([StagingStreamConfigs]), made
// in its staging account through h.Staging(site).APIPrefix.
func StagingObjects(ns string, c ProvisionConfig, h HubConfig, site string, from StagingStart) []Object {
	var out []Object
	for _, s := range StagingStreamConfigs(NamesFor(ns), c, h, site, from) {
		out = append(out, Object{Name: s.Name, Config: s})
	}
	return out
}

// HubObjects are the hub's streams ([HubStreamConfigs]) and the
// namespace's buckets (a hub's workers write receipts too). [Ensure] on a
// hub node adds and drops their sources as h.Sites changes (the ones
// already there keep their position) and refuses what would lose history,
// like any node.
func HubObjects(ns string, c ProvisionConfig, h HubConfig) []Object {
	names := NamesFor(ns)
	var out []Object
	for _, s := range HubStreamConfigs(names, c, h) {
		out = append(out, Object{Name: s.Name, Config: s})
	}
	return withLegacyDLQ(names, c, append(out, bucketObjects(names, c)...))
}

// ProvisionHub creates or updates the hub's objects ([HubObjects]), as
// [Provision] does a namespace's. logger may be nil.
func ProvisionHub(ctx context.Context, js jetstream.JetStream, ns string, c ProvisionConfig, h HubConfig, logger *slog.Logger) ([]Change, error) {
	return Apply(ctx, js, HubObjects(ns, c, h), ApplyChanges, logger)
}

// sourceKeys names each source by stream, domain, delivery prefix and
// filter, sorted.
func sourceKeys(srcs []*jetstream.StreamSource) []string {
	var keys []string
	for _, s := range srcs {
		k := s.Name + "@" + sourceDomain(s) + ":" + s.FilterSubject
		if s.External != nil && s.External.DeliverPrefix != "" {
			k += ">" + s.External.DeliverPrefix
		}
		for _, t := range s.SubjectTransforms {
			k += "," + t.Source
		}
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// sourceDomain is the domain a source reaches its stream in, "" for a
// local one.
func sourceDomain(s *jetstream.StreamSource) string {
	if s.External == nil {
		return s.Domain
	}
	// $JS.<site>.API, or a staging account's esjet-edge.<ns>.stage.<site>.API
	d, _ := strings.CutSuffix(s.External.APIPrefix, ".API")
	return d[strings.LastIndexByte(d, '.')+1:]
}

// SiteOfSource is the site (domain) a hub stream's source info reads from.
func SiteOfSource(si *jetstream.StreamSourceInfo) string {
	if si == nil || si.External == nil {
		return ""
	}
	return sourceDomain(&jetstream.StreamSource{External: si.External})
}

// RestartSources drops the sources of stream that read from site and adds
// them again. JetStream then starts each one after the last message it
// stored from it (it finds it in the stream), so nothing is skipped or
// repeated; what it gains is a fresh source consumer at the site. It is
// the remedy for a source that stopped making progress (a source consumer
// left waiting on a create request that went nowhere while the link was
// down backs off for up to 2 minutes; a frozen one, like nats-server
// #8630, never resumes on its own).
func RestartSources(ctx context.Context, js jetstream.JetStream, stream, site string) error {
	st, err := js.Stream(ctx, stream)
	if err != nil {
		return fmt.Errorf("restart %s's sources from %s: %w", stream, site, err)
	}
	cfg := st.CachedInfo().Config
	var keep, again []*jetstream.StreamSource
	for _, s := range cfg.Sources {
		if sourceDomain(s) == site {
			again = append(again, s)
		} else {
			keep = append(keep, s)
		}
	}
	if len(again) == 0 {
		return fmt.Errorf("restart %s's sources from %s: the stream has no source in that domain", stream, site)
	}
	without := cfg
	without.Sources = keep
	if len(keep) == 0 && len(cfg.Subjects) == 0 {
		// A stream needs a subject or a source: hold one nobody writes to
		// for the moment between the two updates.
		without.Subjects = []string{placeholderSubject(stream)}
	}
	if _, err := js.UpdateStream(ctx, without); err != nil {
		return fmt.Errorf("restart %s's sources from %s: remove: %w", stream, site, err)
	}
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		return fmt.Errorf("restart %s's sources from %s: add again: %w", stream, site, err)
	}
	return nil
}
