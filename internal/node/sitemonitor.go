package node

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/streams"
)

// Site states in a [SiteStatus].
const (
	SiteOK          = "ok"          // connected, nothing to catch up
	SiteCatchingUp  = "catching_up" // connected, lag shrinking
	SiteUnreachable = "unreachable" // link down: the site records on; the hub waits
	SiteStalled     = "stalled"     // connected, lag, no progress for edge.stall_after
	SiteRecreated   = "recreated"   // the site's event log is not the one the hub sourced
)

// SiteStatus is one site as the hub sees it (`esjet sites`).
type SiteStatus struct {
	Site      string `json:"site"`
	State     string `json:"state"`
	Connected bool   `json:"connected"`
	// SiteLastSeq is the last sequence of the site's EVENTS (when reachable).
	SiteLastSeq uint64 `json:"site_last_seq"`
	// HubSeq is the last site sequence the hub holds.
	HubSeq uint64 `json:"hub_seq"`
	// Lag is how many of the site's decisions the hub does not hold yet
	// (SiteLastSeq − HubSeq when reachable, else JetStream's figure).
	Lag          uint64    `json:"lag"`
	ActiveMS     int64     `json:"active_ms"` // since the hub last heard from the source; -1 never
	LastProgress time.Time `json:"last_progress"`
	Restarts     int       `json:"restarts"` // source restarts the hub made (resume, unfreeze)
	Note         string    `json:"note,omitempty"`
}

// SitesSubject is where the hub node answers `esjet sites` (JSON list of
// [SiteStatus]): outside esjet.<ns>.>, whose every subject the API
// answers.
func SitesSubject(ns string) string { return "esjet-edge." + ns + ".sites" }

// monitor timings: how often the hub looks, and when it restarts a
// source. The default source consumer waits out a 30s create timeout and a
// growing backoff (up to 2 minutes) after the link returns; restarting it
// once the link is up resumes within seconds.
const (
	monitorEvery   = 2 * time.Second
	restartIdle    = 6 * time.Second // no sign of the source while the link is up
	restartBetween = 10 * time.Second
	// resumeAfterLink: a source the hub has not heard from at all since it
	// started (not even a heartbeat) while the site has answered for this
	// long sent its consumer create request while the link was down, and
	// would wait out its timeout; the hub restarts it then, not after
	// restartIdle. (Measured: a hub started while its site was away heard
	// nothing from the source for 7s after the link came up, until the
	// restart; the restarted source delivered within 0.2s.)
	resumeAfterLink = time.Second
)

// siteMonitor watches the hub's sources, restarts the ones that do not
// resume, and flags stalled and recreated sites.
type siteMonitor struct {
	n      *Node
	names  streams.Names
	logger *slog.Logger

	mu    sync.Mutex
	sites map[string]*siteTrack
}

type siteTrack struct {
	SiteStatus
	created     time.Time // the site EVENTS' creation time first seen
	lastRestart time.Time
	// outboxRestart is the last restart of the OUTBOX source; seen is
	// when the site last answered while unreachable before (a source
	// that never spoke gets restartIdle from then).
	outboxRestart time.Time
	seen          time.Time
	// lagSince is when the hub last saw the site's lag go from 0 to more:
	// a source cannot be late with decisions made after its last progress
	// before they exist.
	lagSince time.Time
	flagged  string
}

// waitingSince is when the hub began to wait for the source: its last
// progress, or when the lag it waits on appeared, whichever is later. (A
// hub idle for an hour that sees a site's first new decision has not
// waited an hour for it.)
func (t *siteTrack) waitingSince() time.Time {
	if t.lagSince.After(t.LastProgress) {
		return t.lagSince
	}
	return t.LastProgress
}

func newSiteMonitor(n *Node) *siteMonitor {
	m := &siteMonitor{n: n, names: streams.NamesFor(n.cfg.Namespace), logger: n.logger.With("component", "edge"), sites: map[string]*siteTrack{}}
	for _, s := range n.cfg.Edge.Sites {
		m.sites[s] = &siteTrack{SiteStatus: SiteStatus{Site: s, State: SiteUnreachable, ActiveMS: -1, LastProgress: time.Now()}}
	}
	return m
}

// Sites returns the hub's view of its sites, sorted by id.
func (m *siteMonitor) Sites() []SiteStatus {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []SiteStatus
	for _, t := range m.sites {
		out = append(out, t.SiteStatus)
	}
	slices.SortFunc(out, func(a, b SiteStatus) int { return cmp.Compare(a.Site, b.Site) })
	return out
}

// Run checks the sites every few seconds and answers SitesSubject until
// ctx ends.
func (m *siteMonitor) Run(ctx context.Context) error {
	nc := m.n.broker.Conn()
	sub, err := nc.Subscribe(SitesSubject(m.names.Namespace), func(msg *nats.Msg) {
		b, _ := json.Marshal(m.Sites())
		_ = msg.Respond(b)
	})
	if err != nil {
		return fmt.Errorf("edge: serve %s: %w", SitesSubject(m.names.Namespace), err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	t := time.NewTimer(monitorEvery)
	defer t.Stop()
	for {
		next := monitorEvery
		if m.check(ctx) {
			next = resumeAfterLink
		}
		t.Reset(next)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// check looks at each site's staging streams (StagingAccount): their
// sources read the site across the link, so their positions are the
// hub's; the hub's own sources of the staging streams are local and add
// their lag. It reports whether a site waits for its source to resume
// (resumeAfterLink): the next check should come sooner.
func (m *siteMonitor) check(ctx context.Context) (soon bool) {
	js := m.n.broker.JetStream()
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	events, err := js.Stream(cctx, m.names.Events)
	if err != nil {
		m.logger.Warn("hub event log unreadable", "error", err)
		return false
	}
	hubLag := map[string]uint64{}
	for _, si := range events.CachedInfo().Sources {
		hubLag[streams.SiteOfSource(si)] = si.Lag
	}
	connected := map[string]bool{}
	for _, s := range m.n.broker.LeafSites() {
		connected[s] = true
	}
	now := time.Now()
	h := HubConfig(m.n.cfg)
	for _, site := range m.n.cfg.Edge.Sites {
		m.mu.Lock()
		t := m.sites[site]
		m.mu.Unlock()
		if t == nil {
			continue
		}
		sjs, err := stagingJetStream(js, m.n.cfg, site)
		if err != nil {
			continue
		}
		st := h.Staging(site)
		stage, outbox, err := m.staging(ctx, sjs, st)
		if err != nil {
			m.mu.Lock()
			t.State, t.Note = SiteStalled, fmt.Sprintf("the hub's staging stream %s of this site is unreadable (%v): restart the hub node to make it again", st.Events, err)
			flagged := t.flagged != t.State
			t.flagged = t.State
			m.mu.Unlock()
			if flagged {
				m.logger.Error("edge site needs attention", "site", site, "state", SiteStalled, "error", err)
			}
			continue
		}
		si := stage.Sources[0]
		siteSeq, created, reachable := m.siteLog(ctx, site)
		m.mu.Lock()
		t.Connected = connected[site] || reachable
		if !reachable {
			t.seen = time.Time{}
		} else if t.seen.IsZero() {
			t.seen = now
		}
		// A restarted source reports no sequence until its next message.
		if si.Seq > t.HubSeq {
			t.HubSeq, t.LastProgress = si.Seq, now
		}
		t.ActiveMS = -1
		if si.Active >= 0 {
			t.ActiveMS = si.Active.Milliseconds()
		}
		t.Lag = si.Lag + hubLag[site]
		recreated := ""
		if reachable {
			t.SiteLastSeq = siteSeq
			t.Lag = hubLag[site]
			if siteSeq > t.HubSeq {
				t.Lag += siteSeq - t.HubSeq
			}
			switch {
			case siteSeq < t.HubSeq:
				recreated = fmt.Sprintf("the site's event log ends at %d but the hub already holds its decisions up to %d", siteSeq, t.HubSeq)
			case !t.created.IsZero() && !created.Equal(t.created):
				recreated = fmt.Sprintf("the site's event log was created at %s, not %s as when the hub first saw it", created.UTC().Format(time.RFC3339), t.created.UTC().Format(time.RFC3339))
			case t.created.IsZero():
				t.created = created
			}
		}
		restart := t.assess(now, recreated, reachable, m.n.cfg.Edge.StallAfter.Std())
		soon = soon || t.State == SiteCatchingUp && t.ActiveMS < 0 && now.Sub(t.lastRestart) >= restartBetween
		state, note := t.State, t.Note
		flagged := t.flagged != state
		t.flagged = state
		m.mu.Unlock()
		if flagged && (state == SiteStalled || state == SiteRecreated) {
			m.logger.Error("edge site needs attention", "site", site, "state", state, "note", note)
		}
		if restart {
			m.restart(ctx, sjs, site, st.Events)
		}
		if reachable && recreated == "" && outbox != nil && m.outboxIdle(outbox, site) {
			m.restart(ctx, sjs, site, st.Outbox)
		}
	}
	return soon
}

// assess sets the site's state from what check read into t (recreated: why
// the site's log looks recreated, "" if it does not) and reports whether
// the hub should restart its source now. t's lock is held.
func (t *siteTrack) assess(now time.Time, recreated string, reachable bool, stallAfter time.Duration) (restart bool) {
	if t.Lag == 0 {
		t.lagSince = time.Time{}
	} else if t.lagSince.IsZero() {
		t.lagSince = now
	}
	waited := now.Sub(t.waitingSince())
	switch {
	case recreated != "":
		t.State, t.Note = SiteRecreated, recreated+": its store was lost and recreated; see docs/edge.md (re-provisioning a lost site)"
	case !t.Connected:
		t.State, t.Note = SiteUnreachable, "link down: the site records on, the hub catches up when it returns"
	case t.Lag == 0:
		t.State, t.Note = SiteOK, ""
	case waited >= stallAfter:
		t.State, t.Note = SiteStalled, fmt.Sprintf("lag %d with no progress since %s; the hub restarts the source every %s — if it stays stalled, restart the hub (docs/edge.md)", t.Lag, t.waitingSince().UTC().Format(time.RFC3339), restartBetween)
		restart = true
	default:
		t.State, t.Note = SiteCatchingUp, ""
		// A source never heard from while the site answers is waiting on a
		// create request that went nowhere (resumeAfterLink).
		restart = waited >= restartIdle || t.ActiveMS < 0 && reachable && !t.seen.IsZero() && now.Sub(t.seen) >= resumeAfterLink
	}
	restart = restart && reachable && now.Sub(t.lastRestart) >= restartBetween
	if restart {
		t.lastRestart = now
		t.Restarts++
	}
	return restart
}

// staging reads site's staging streams' info (the outbox's nil without hub
// kinds).
func (m *siteMonitor) staging(ctx context.Context, sjs jetstream.JetStream, st streams.Staging) (events, outbox *jetstream.StreamInfo, err error) {
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	s, err := sjs.Stream(cctx, st.Events)
	if err != nil {
		return nil, nil, err
	}
	if events = s.CachedInfo(); len(events.Sources) == 0 {
		return nil, nil, fmt.Errorf("%s has no source", st.Events)
	}
	if len(m.n.cfg.Edge.HubKinds) > 0 {
		if o, err := sjs.Stream(cctx, st.Outbox); err == nil {
			outbox = o.CachedInfo()
		}
	}
	return events, outbox, nil
}

// outboxIdle reports whether the hub's OUTBOX source of site has not been
// heard from (not even a heartbeat) for restartIdle while the site answers:
// a source consumer that did not resume. It restarts at most every
// restartBetween.
func (m *siteMonitor) outboxIdle(info *jetstream.StreamInfo, site string) bool {
	for _, si := range info.Sources {
		if streams.SiteOfSource(si) != site || si.Active >= 0 && si.Active < restartIdle {
			continue
		}
		m.mu.Lock()
		defer m.mu.Unlock()
		t := m.sites[site]
		if t == nil || time.Since(t.outboxRestart) < restartBetween || si.Active < 0 && time.Since(t.seen) < restartIdle {
			return false
		}
		t.outboxRestart = time.Now()
		return true
	}
	return false
}

// siteLog reads the site's EVENTS through its domain: last sequence and
// creation time. reachable is false while the link is down.
func (m *siteMonitor) siteLog(ctx context.Context, site string) (last uint64, created time.Time, reachable bool) {
	js, err := jetstream.NewWithDomain(m.n.broker.Conn(), site)
	if err != nil {
		return 0, time.Time{}, false
	}
	cctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	st, err := js.Stream(cctx, m.names.Events)
	if err != nil {
		return 0, time.Time{}, false
	}
	info := st.CachedInfo()
	return info.State.LastSeq, info.Created, true
}

// restart restarts the source of site's staging stream (in its staging
// account, reached through sjs).
func (m *siteMonitor) restart(ctx context.Context, sjs jetstream.JetStream, site, stream string) {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := streams.RestartSources(cctx, sjs, stream, site); err != nil {
		m.logger.Warn("source restart failed", "site", site, "stream", stream, "error", err)
		return
	}
	m.logger.Info("restarted the hub's source of a site", "site", site, "stream", stream)
}
