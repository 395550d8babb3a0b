package console

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/consumer"
	"github.com/esjet/esjet/internal/ops"
	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/wire"
)

// Overview is the console's first page: the namespace at a glance. Rates
// are the browser's: the difference of two overviews over their times.
type Overview struct {
	Namespace    string    `json:"namespace"`
	Time         time.Time `json:"time"`
	AllowActions bool      `json:"allow_actions"`
	// Streams are the namespace's streams and buckets, streams first.
	Streams []StreamStats   `json:"streams"`
	Relay   ops.Lag         `json:"relay"`
	Kinds   []ops.KindStats `json:"kinds"`
	// Workers is each kind's flow control: paused (by whom, why), backlog,
	// oldest command, rate limit.
	Workers []consumer.KindStatus `json:"workers"`
	// Projections is the lag of each read model, when the node has any;
	// Note says why there is none to show.
	Projections []ProjectionLag `json:"projections"`
	Note        string          `json:"projections_note,omitempty"`
	// Refused are the messages this node refused to read because a newer
	// build wrote them (an envelope or event schema version it does not
	// know): their aggregates are served by nodes of that build only.
	Refused []streams.Refusal `json:"refused,omitempty"`
}

// StreamStats is one stream or KV bucket.
type StreamStats struct {
	Name string `json:"name"`
	// Bucket is the bucket's name when the stream is a KV bucket
	// (KV_<bucket>) or an object store (OBJ_<bucket>); Store says which.
	Bucket    string    `json:"bucket,omitempty"`
	Store     string    `json:"store,omitempty"` // "kv" or "objects"
	Messages  uint64    `json:"messages"`
	Bytes     uint64    `json:"bytes"`
	FirstSeq  uint64    `json:"first_seq"`
	LastSeq   uint64    `json:"last_seq"`
	LastTime  time.Time `json:"last_time,omitzero"`
	Subjects  int       `json:"subjects"`
	Consumers int       `json:"consumers"`
	// Retention is how long it keeps what it holds, and why.
	Retention streams.Retention `json:"retention"`
}

// ProjectionLag is how far one read model is behind the log.
type ProjectionLag struct {
	Name string `json:"name"`
	// Behind is how many EVENTS messages it has still to fold.
	Behind     uint64  `json:"behind"`
	LagSeconds float64 `json:"lag_seconds"`
	// Parked counts events set aside after failing (they wait for an
	// operator's retry or skip).
	Parked int `json:"parked"`
	// Health is green, yellow or red; Reason says why when not green.
	Health string `json:"health,omitempty"`
	Reason string `json:"reason,omitempty"`
}

func (c *Console) handleOverview(w http.ResponseWriter, r *http.Request) {
	ov, err := c.sharedOverview(r.Context())
	c.reply(w, ov, err)
}

// overviewTTL is how long one overview answers every page that asks: the
// kinds' counts scan the receipts bucket, which open tabs polling every few
// seconds must not repeat each.
const overviewTTL = 2 * time.Second

// sharedOverview returns the last overview while it is younger than
// overviewTTL, else computes one; concurrent requests wait for one
// computation.
func (c *Console) sharedOverview(ctx context.Context) (Overview, error) {
	c.ovMu.Lock()
	defer c.ovMu.Unlock()
	if !c.ovAt.IsZero() && time.Since(c.ovAt) < overviewTTL {
		return c.ov, nil
	}
	ov, err := c.overview(ctx)
	if err != nil {
		return ov, err
	}
	c.ov, c.ovAt = ov, time.Now()
	return ov, nil
}

func (c *Console) overview(ctx context.Context) (Overview, error) {
	ov := Overview{Namespace: c.cfg.Namespace, Time: time.Now().UTC(), AllowActions: c.cfg.AllowActions,
		Projections: []ProjectionLag{}, Note: "no read models: this node runs no projections"}
	_, ov.Refused = c.repo.Log().Refused()
	var err error
	if ov.Streams, err = c.streams(ctx); err != nil {
		return ov, err
	}
	if ov.Relay, err = c.insp.Lag(ctx); err != nil {
		return ov, err
	}
	if ov.Kinds, err = c.insp.Kinds(ctx); err != nil {
		return ov, err
	}
	ov.Workers = []consumer.KindStatus{}
	if c.cfg.Workers != nil {
		if ov.Workers, err = c.cfg.Workers(ctx); err != nil {
			return ov, err
		}
	}
	if c.cfg.Projections != nil {
		lags, err := c.cfg.Projections(ctx)
		if err != nil {
			return ov, err
		}
		if len(lags) > 0 {
			ov.Projections, ov.Note = lags, ""
		} else {
			ov.Note = "no read models: no projection has run in this namespace"
		}
	}
	return ov, nil
}

// streams lists the namespace's streams (<NS>_…), KV buckets (KV_<ns>_…)
// and object stores (OBJ_<ns>_…).
func (c *Console) streams(ctx context.Context) ([]StreamStats, error) {
	prefixes := []string{strings.ToUpper(c.cfg.Namespace) + "_", wire.KVStream(c.cfg.Namespace + "_"), wire.ObjStream(c.cfg.Namespace + "_")}
	var views map[string]streams.Retention
	if c.cfg.ViewRetention != nil {
		views, _ = c.cfg.ViewRetention(ctx) // without it, the buckets' own configuration says the rest
	}
	var out []StreamStats
	lister := c.js.ListStreams(ctx)
	for info := range lister.Info() {
		name := info.Config.Name
		if !slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(name, p) }) {
			continue
		}
		s := stats(info)
		s.Retention = streams.RetentionOf(c.cfg.Namespace, info.Config)
		if v, ok := views[name]; ok {
			s.Retention = v
		}
		out = append(out, s)
	}
	if err := lister.Err(); err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b StreamStats) int {
		if (a.Bucket == "") != (b.Bucket == "") {
			if a.Bucket == "" {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out, nil
}

func stats(info *jetstream.StreamInfo) StreamStats {
	st := info.State
	s := StreamStats{Name: info.Config.Name, Messages: st.Msgs, Bytes: st.Bytes, FirstSeq: st.FirstSeq,
		LastSeq: st.LastSeq, LastTime: st.LastTime.UTC(), Subjects: int(st.NumSubjects), Consumers: st.Consumers}
	if b, ok := strings.CutPrefix(info.Config.Name, wire.KVStreamPrefix); ok {
		s.Bucket, s.Store = b, "kv"
	} else if b, ok := strings.CutPrefix(info.Config.Name, wire.ObjStreamPrefix); ok {
		s.Bucket, s.Store = b, "objects"
	}
	if st.LastSeq == 0 {
		s.LastTime = time.Time{}
	}
	return s
}
