package console

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/esjet/esjet/internal/wire"
	"github.com/nats-io/nats.go/jetstream"
)

// TypeInfo is an aggregate type the node serves.
type TypeInfo struct {
	Type     string   `json:"type"`
	Commands []string `json:"commands"`
}

// IDList is the ids of one aggregate type that have events.
type IDList struct {
	Type string `json:"aggregate_type"`
	// IDs are sorted, at most [MaxIDs] of them; Total counts all.
	IDs   []IDCount `json:"ids"`
	Total int       `json:"total"`
}

// IDCount is one aggregate and how many decisions its subject holds.
type IDCount struct {
	ID        string `json:"id"`
	Decisions uint64 `json:"decisions"`
}

// MaxIDs caps the ids one list returns; the page can open any id by name.
const MaxIDs = 500

func (c *Console) handleTypes(w http.ResponseWriter, r *http.Request) {
	reg := c.repo.Registry()
	out := []TypeInfo{}
	for _, t := range reg.Types() {
		def, err := reg.Get(t)
		if err != nil {
			continue
		}
		out = append(out, TypeInfo{Type: t, Commands: def.Commands()})
	}
	c.reply(w, out, nil)
}

func (c *Console) handleIDs(w http.ResponseWriter, r *http.Request) {
	ids, err := c.ids(r.Context(), r.PathValue("type"), r.URL.Query().Get("prefix"))
	c.reply(w, ids, err)
}

// ids lists the aggregates of typ whose id starts with prefix.
func (c *Console) ids(ctx context.Context, typ, prefix string) (IDList, error) {
	if err := wire.ValidateToken("aggregate type", typ); err != nil {
		return IDList{}, err
	}
	st, err := c.js.Stream(ctx, c.names.Events)
	if err != nil {
		return IDList{}, fmt.Errorf("event log %s: %w", c.names.Events, err)
	}
	subjPrefix := c.names.TypePrefix(typ)
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(subjPrefix+"*"))
	if err != nil {
		return IDList{}, fmt.Errorf("aggregates of %s: %w", typ, err)
	}
	list := IDList{Type: typ, IDs: []IDCount{}}
	for subj, n := range info.State.Subjects {
		id := strings.TrimPrefix(subj, subjPrefix)
		if !strings.HasPrefix(id, prefix) {
			continue
		}
		list.Total++
		list.IDs = append(list.IDs, IDCount{ID: id, Decisions: n})
	}
	slices.SortFunc(list.IDs, func(a, b IDCount) int { return strings.Compare(a.ID, b.ID) })
	if len(list.IDs) > MaxIDs {
		list.IDs = list.IDs[:MaxIDs]
	}
	return list, nil
}

func (c *Console) handleCommand(w http.ResponseWriter, r *http.Request) {
	info, err := c.insp.Command(r.Context(), r.PathValue("id"))
	c.reply(w, info, err)
}
