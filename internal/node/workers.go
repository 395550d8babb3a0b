package node

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/esjet/esjet/config"
	"github.com/esjet/esjet/internal/aggregate"
	"github.com/esjet/esjet/internal/consumer"
)

// kindConfig is a kind's worker settings: its workers entry, with the
// config's defaults ([config.DefaultWorker]) for what the entry leaves zero.
func (n *Node) kindConfig(kind string, w config.Worker) consumer.KindConfig {
	w = w.WithDefaults()
	return consumer.KindConfig{
		Kind: kind, Workers: w.Pool, AckWait: w.AckWait.Std(), Timeout: w.Timeout.Std(), MaxAttempts: w.MaxAttempts,
		BackoffInitial: w.BackoffInitial.Std(), BackoffMax: w.BackoffMax.Std(), Node: n.cfg.NATS.Embedded.ServerName,
		Telemetry: n.tel, Receipts: n.receipts, Control: n.control, Rate: w.Rate, Burst: w.Burst,
		Admit:          hubAdmission(n.cfg),
		ConcurrencyKey: w.ConcurrencyKey, Concurrency: w.Concurrency, Schema: w.Schema,
	}
}

// issuedKind is a command kind an aggregate type can issue.
type issuedKind struct {
	Kind          string
	AggregateType string
}

// issuedKinds lists the command kinds the aggregates can issue, as far as
// their definitions tell: a type that handles <kind>_done or <kind>_failed
// issues <kind> and waits for its outcome. Sorted by kind, then type.
func issuedKinds(defs []*aggregate.Definition) []issuedKind {
	suffixes := []string{aggregate.DoneKind(""), aggregate.FailedKind("")}
	seen := map[issuedKind]bool{}
	var out []issuedKind
	for _, d := range defs {
		for _, c := range d.Outcomes() {
			for _, suffix := range suffixes {
				kind, ok := strings.CutSuffix(c, suffix)
				ik := issuedKind{Kind: kind, AggregateType: d.Type()}
				if ok && kind != "" && !seen[ik] {
					seen[ik] = true
					out = append(out, ik)
				}
			}
		}
	}
	slices.SortFunc(out, compareIssued)
	return out
}

func compareIssued(a, b issuedKind) int {
	return strings.Compare(a.Kind+"\x00"+a.AggregateType, b.Kind+"\x00"+b.AggregateType)
}

// unserved lists the kinds in issued that no worker of this node carries out
// (served holds the kinds that have a target here).
func unserved(issued []issuedKind, served map[string]bool) []issuedKind {
	var out []issuedKind
	for _, ik := range issued {
		if !served[ik.Kind] {
			out = append(out, ik)
		}
	}
	return out
}

// warnUnserved logs at WARN each kind a registered aggregate (or a raw type,
// by aggregates.raw.<type>.commands) can issue that has no target on this node: its commands would wait in OUTBOX for ever,
// and the saga that issued them with it, without another word.
func (n *Node) warnUnserved(defs []*aggregate.Definition, served map[string]bool) {
	issued := issuedKinds(defs)
	for typ, raw := range n.cfg.Aggregates.Raw {
		for _, kind := range raw.Commands {
			issued = append(issued, issuedKind{Kind: kind, AggregateType: typ})
		}
	}
	slices.SortFunc(issued, compareIssued)
	for _, ik := range unserved(issued, served) {
		n.logger.Warn("command kind has no target on this node: its commands wait in OUTBOX until a node serves it",
			slog.String("kind", ik.Kind), slog.String("aggregate_type", ik.AggregateType),
			slog.String("fix", fmt.Sprintf("add workers.%s to the config file (target nats with a subject, or http with a url), "+
				"or register a Go handler for %q (esjet.Options.Handlers)", ik.Kind, ik.Kind)))
	}
}
