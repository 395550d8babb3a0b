package bench

import (
	"fmt"
	"slices"
	"strings"
)

// notes explain the table: what the ratio is, how noisy it is, the sync
// mode, and what the counts mean.
func notes(r *Report, o Options) []string {
	var n []string
	table := len(r.Phases) > 0 // a scale-only run prints no phase table
	if table {
		n = append(n, "RATIO = esjet ops/s ÷ raw JetStream ops/s (throughput; 1.00 = as fast as raw), each pair measured in interleaved rounds on the same server in this run. Latencies are esjet's (raw's are in --json).")
	}
	noise := fmt.Sprintf("Noise: %d CPU(s), client and server in one process", r.CPUs)
	if !r.Server.Embedded {
		noise = fmt.Sprintf("Noise: %d CPU(s) here, server at %s", r.CPUs, r.Server.URL)
	}
	n = append(n, noise+"; absolute ops/s drift from run to run on a shared machine, the ratios much less — read a ratio change under ~0.1 as noise, and compare runs by ratio.")
	switch r.Server.Sync {
	case "always":
		n = append(n, "Sync always: the server fsyncs every write before acknowledging it (no acknowledged write is lost, even on power loss); writes cost an fsync each.")
	case "interval":
		n = append(n, "Sync interval: the server fsyncs periodically (nats.embedded.sync_interval), so writes are fast but an OS crash or power loss can lose writes acknowledged since the last fsync; group commit is off (nothing to save), so append has no raw group commit side. Use --sync always for the durable figure.")
	default:
		n = append(n, fmt.Sprintf("External cluster: fsync is the servers' own setting; streams R%d.", r.Server.Replicas))
	}
	load := "closed loop"
	if o.Rate > 0 {
		load = fmt.Sprintf("fixed arrival rate %g/s per round, latency from each operation's scheduled time (no coordinated omission); at a rate both sides keep up with, the throughput ratio stays near 1 — compare latencies", o.Rate)
	}
	size := fmt.Sprintf("%s per phase", o.Duration)
	if o.Count > 0 {
		size = fmt.Sprintf("%d operations per side per phase", o.Count)
	}
	workers := fmt.Sprintf("%d workers", o.Workers)
	if len(o.Sweep) > 1 {
		workers = fmt.Sprintf("workers %s (each phase once per count: ×N in the table)", strings.Trim(strings.Join(strings.Fields(fmt.Sprint(o.Sweep)), ","), "[]"))
	}
	if table {
		n = append(n, fmt.Sprintf("Load: %s, %s, %d aggregates (%s), %s.", load, workers, o.Aggregates, o.Skew, size))
	}
	for _, p := range r.Phases {
		if p.SQLite != nil {
			mode := "synchronous=FULL: every commit fsynced, as sync always"
			if r.Server.Sync == "interval" {
				mode = "synchronous=NORMAL: fsync at checkpoints, as sync interval"
			}
			n = append(n, "SQLITE = the classic transactional outbox in one embedded SQLite file (WAL, "+mode+
				"): append = one transaction reading the aggregate's version, inserting the event and an outbox row; effects = a dispatcher reading pending rows and marking each done in its own commit. VS SQLITE = esjet ops/s ÷ SQLite ops/s.")
			break
		}
	}
	var units []string
	for _, p := range r.Phases {
		if u := p.Name + "=" + p.Unit; p.Unit != "" && !slices.Contains(units, u) {
			units = append(units, u)
		}
	}
	if len(units) > 0 {
		n = append(n, "One operation: "+strings.Join(units, ", ")+". relay, effects and replay drain a batch: throughput only, no per-operation latency.")
	}
	for _, p := range r.Phases {
		if p.Name != PhaseAppend && p.Name != PhaseMicro {
			continue
		}
		n = append(n, fmt.Sprintf("%s: %d command(s) answered 409 (conflict rate %.4f), %d version conflict(s) retried inside the repository, %d of %d command(s) queued behind another on the same aggregate (raw: %d) — one node serialises an aggregate's commands in-process, so skew shows as queueing, not 409s.",
			phaseLabel(p), p.Conflicts, p.ConflictRate, p.VersionConflicts, p.SameAggregateWaits, p.Esjet.Ops+p.Conflicts+p.Esjet.Errors, p.RawSameAggregateWaits))
		if p.Batches > 0 {
			n = append(n, fmt.Sprintf("%s: group commit stored %d decision(s) in %d atomic batch(es) (%.1f a batch); the rest were published on their own.",
				phaseLabel(p), p.Batched, p.Batches, float64(p.Batched)/float64(p.Batches)))
		}
		if g := p.RawGroup; g != nil && g.OpsPerSec > 0 {
			n = append(n, rawGroupNote(p))
		}
	}
	for _, p := range r.Phases {
		if p.Name == PhaseRelay && p.Batches > 0 {
			n = append(n, fmt.Sprintf("%s: the relay stored %d command(s) in OUTBOX in %d atomic batch(es) (%.1f a batch).",
				phaseLabel(p), p.Batched, p.Batches, float64(p.Batched)/float64(p.Batches)))
		}
		if p.Name == PhaseEffects && p.Batches > 0 {
			note := fmt.Sprintf("%s: group commit wrote %d receipt(s) in %d atomic batch(es) (%.1f a batch)",
				phaseLabel(p), p.Batched, p.Batches, float64(p.Batched)/float64(p.Batches))
			if p.ReadRounds > 0 {
				note += fmt.Sprintf("; %d receipt read(s) made while a round was in flight were read together once it returned, in %d batched read(s) (the other reads went one at a time)", p.ReadsTogether, p.ReadRounds)
			}
			n = append(n, note+".")
		}
	}
	explained := false
	for _, p := range r.Phases {
		if p.Name != PhaseE2E || p.Hops == nil || p.Hops.Steps == 0 {
			continue
		}
		n = append(n, hopsNote(p))
		if !explained {
			n = append(n, "e2e hops: stored times are JetStream's message timestamps, taken when the server stages a message — under group commit before its atomic batch commits — so the hops run between stored times (an outcome can be stamped before the bench sees it), and sent → decision stored sets the bench's clock against the server's (one clock when embedded). Each hop is its own distribution: the p50s need not add up to the round trip's.")
			explained = true
		}
	}
	for _, p := range r.Phases {
		if p.Name == PhaseEdge && p.Edge != nil && p.Raw != nil {
			n = append(n, edgeNote(p))
		}
	}
	for _, p := range r.Phases {
		if p.Name == PhaseEffects && p.Raw != nil && p.Raw.Ops > 0 {
			n = append(n, "effects: raw fetches and acks without waiting for the server's confirmation; esjet's workers also read and write a receipt per command (group-committed under sync always) and then ack without waiting, as the receipt folds a redelivery.")
			break
		}
	}
	return n
}

// rawGroupNote sets esjet's appends beside raw JetStream's own group
// commit of the same message: what one stream allows batched appends to
// reach here.
func rawGroupNote(p Phase) string {
	g := p.RawGroup
	s := fmt.Sprintf("%s: raw JetStream's own group commit (every append waiting while one atomic batch is in flight goes in the next; same message, no esjet code, no relay reading the stream) did %s/s",
		phaseLabel(p), rate(g.OpsPerSec))
	if p.RawGroupBatches > 0 {
		s += fmt.Sprintf(" (%.1f a batch)", float64(p.RawGroupBatched)/float64(p.RawGroupBatches))
	}
	var of []string
	if p.Raw != nil && p.Raw.OpsPerSec > 0 {
		of = append(of, fmt.Sprintf("%.2f× raw one at a time", g.OpsPerSec/p.Raw.OpsPerSec))
	}
	if p.SQLite != nil && p.SQLite.OpsPerSec > 0 {
		of = append(of, fmt.Sprintf("%.2f× SQLite", g.OpsPerSec/p.SQLite.OpsPerSec))
	}
	if len(of) > 0 {
		s += ": " + strings.Join(of, ", ")
	}
	return s + fmt.Sprintf("; esjet did %.2f of it.", p.RawGroupRatio)
}

// hopsNote says where an e2e step's time went: p50/p90 of each hop
// between the stored times of its writes, and of the round trip.
func hopsNote(p Phase) string {
	h := p.Hops
	pct := func(x Hop) string {
		s := dur(x.P50MS) + "/" + dur(x.P90MS)
		if x.Negative > 0 {
			s += fmt.Sprintf(" (%d negative)", x.Negative)
		}
		return s
	}
	var hops []string
	for _, x := range h.inOrder() {
		hops = append(hops, x.name+" "+pct(x.hop))
	}
	over := fmt.Sprintf("its %d steps", h.Steps)
	if n := int64(h.Steps + h.Missing); n < p.Esjet.Ops {
		over = fmt.Sprintf("%d of its %d steps (%d runs of up to %d in a row)", h.Steps, p.Esjet.Ops, hopBlocks, hopBlock)
	}
	s := fmt.Sprintf("%s: where a step's time goes, p50/p90 over %s: %s; round trip (sent → charged seen) %s",
		phaseLabel(p), over, strings.Join(hops, ", "), pct(h.RoundTrip))
	if h.Missing > 0 {
		s += fmt.Sprintf("; %d sampled step(s) left out, a write not found", h.Missing)
	}
	return s + "."
}

// edgeNote says what the edge phase's row compares and what it leaves out.
func edgeNote(p Phase) string {
	e := p.Edge
	return fmt.Sprintf("%s (one catch-up a side, raw first): a hub caught up a site's offline backlog of %d decisions (%.0f bytes each at the site) at %s/s, from the first to the last stored in its EVENTS (through the site's staging stream at the hub: two sourcing hops); raw sourcing of the same messages across a leaf link (one stream sourcing another by domain, no esjet code) did %s/s: esjet did %.2f of it. "+
		"Before that, the hub took %.1fs from its start to its first backlog decision (raw: %.1fs from the sourcing stream's creation), so %.1fs from start to the last (raw %.1fs). Longest pause between two stored in a row: esjet %.0fms, raw %.0fms; pauses of 100ms or more: %.1fs and %.1fs.",
		phaseLabel(p), e.Decisions, float64(e.SiteBytes)/float64(max(e.Decisions+1, 1)), rate(p.Esjet.OpsPerSec), rate(p.Raw.OpsPerSec), p.Ratio,
		e.ResumeSecs, e.RawResumeSecs, e.WallSecs, e.RawWallSecs, e.MaxGapSecs*1000, e.RawMaxGapSecs*1000, e.StalledSecs, e.RawStalledSecs)
}

// phaseLabel is the phase's name as the table shows it.
func phaseLabel(p Phase) string {
	if p.Workers > 0 {
		return fmt.Sprintf("%s ×%d", p.Name, p.Workers)
	}
	return p.Name
}
