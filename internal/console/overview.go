package console

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/ops"
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
	// Projections is the lag of each read model, when the node has any;
	// Note says why there is none to show.
	Projections []ProjectionLag `json:"projections"`
	Note        string          `json:"projections_note,omitempty"`
}

// StreamStats is one stream or KV bucket.
type StreamStats struct {
	Name string `json:"name"`
	// Bucket is the KV bucket's name when the stream is one (KV_<bucket>).
	Bucket    string    `json:"bucket,omitempty"`
	Messages  uint64    `json:"messages"`
	Bytes     uint64    `json:"bytes"`
	FirstSeq  uint64    `json:"first_seq"`
	LastSeq   uint64    `json:"last_seq"`
	LastTime  time.Time `json:"last_time,omitzero"`
	Subjects  int       `json:"subjects"`
	Consumers int       `json:"consumers"`
}

// ProjectionLag is how far one read model is behind the log.
type ProjectionLag struct {
	Name string `json:"name"`
	// Behind is how many EVENTS messages it has still to fold.
	Behind     uint64  `json:"behind"`
	LagSeconds float64 `json:"lag_seconds"`
	// Health is green, yellow or red; Reason says why when not green.
	Health string `json:"health,omitempty"`
	Reason string `json:"reason,omitempty"`
}

func (c *Console) handleOverview(w http.ResponseWriter, r *http.Request) {
	ov, err := c.overview(r.Context())
	c.reply(w, ov, err)
}

func (c *Console) overview(ctx context.Context) (Overview, error) {
	ov := Overview{Namespace: c.cfg.Namespace, Time: time.Now().UTC(), AllowActions: c.cfg.AllowActions,
		Projections: []ProjectionLag{}, Note: "no read models: this node runs no projections"}
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
	if c.cfg.Projections != nil {
		ov.Note = ""
		if ov.Projections, err = c.cfg.Projections(ctx); err != nil {
			return ov, err
		}
	}
	return ov, nil
}

// streams lists the namespace's streams (<NS>_…) and buckets (KV_<ns>_…).
func (c *Console) streams(ctx context.Context) ([]StreamStats, error) {
	prefix, kvPrefix := strings.ToUpper(c.cfg.Namespace)+"_", "KV_"+c.cfg.Namespace+"_"
	var out []StreamStats
	lister := c.js.ListStreams(ctx)
	for info := range lister.Info() {
		name := info.Config.Name
		if !strings.HasPrefix(name, prefix) && !strings.HasPrefix(name, kvPrefix) {
			continue
		}
		out = append(out, stats(info))
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
	if b, ok := strings.CutPrefix(info.Config.Name, "KV_"); ok {
		s.Bucket = b
	}
	if st.LastSeq == 0 {
		s.LastTime = time.Time{}
	}
	return s
}
