package streams_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/natstest"
	"github.com/esjet/esjet/internal/streams"
)

// TestRestartSourcesResumesAfterTheLastStoredMessage pins the hub's remedy
// for a source that does not resume: dropping a stream's only source (the
// stream has no subjects of its own, like the hub's EVENTS) and adding it
// again resumes after the last message it stored from it — nothing
// skipped, nothing twice.
func TestRestartSourcesResumesAfterTheLastStoredMessage(t *testing.T) {
	s := natstest.RunServer(t)
	_, js := natstest.Connect(t, s)
	ctx := t.Context()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "SITE", Subjects: []string{"site.>"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "AGG", Duplicates: time.Minute,
		Sources: []*jetstream.StreamSource{{Name: "SITE", OptStartSeq: 1}}}); err != nil {
		t.Fatal(err)
	}
	publish := func(from, to int) {
		for i := from; i < to; i++ {
			if _, err := js.Publish(ctx, fmt.Sprintf("site.%d", i), nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	msgs := func() uint64 {
		st, err := js.Stream(ctx, "AGG")
		if err != nil {
			t.Fatal(err)
		}
		return st.CachedInfo().State.Msgs
	}
	publish(0, 5)
	natstest.Eventually(t, 10*time.Second, func() bool { return msgs() == 5 })
	if err := streams.RestartSources(ctx, js, "AGG", ""); err != nil {
		t.Fatal(err)
	}
	publish(5, 10)
	natstest.Eventually(t, 10*time.Second, func() bool { return msgs() >= 10 })
	time.Sleep(300 * time.Millisecond)
	st, _ := js.Stream(ctx, "AGG")
	if cfg := st.CachedInfo().Config; msgs() != 10 || len(cfg.Subjects) != 0 || len(cfg.Sources) != 1 {
		t.Fatalf("after the restart AGG holds %d messages (want 10), subjects %v, %d sources", msgs(), cfg.Subjects, len(cfg.Sources))
	}
	if err := streams.RestartSources(ctx, js, "AGG", "elsewhere"); err == nil {
		t.Error("restarting the sources of a domain the stream does not source from did not fail")
	}
}

// TestHubSourcesDeliverUnderEachSitesPrefix pins what the hub's leaf
// permissions rely on: each site's source consumers deliver under that
// site's own prefix, and a hub provisioned before the prefix existed gets
// it (the sources are compared with it).
func TestHubSourcesDeliverUnderEachSitesPrefix(t *testing.T) {
	names := streams.NamesFor("fleet")
	h := streams.HubConfig{Sites: []string{"s1", "s2"}, HubKinds: []string{"charge"},
		DeliverPrefix: func(site string) string { return "edge.src." + site }}
	for _, cfg := range streams.HubStreamConfigs(names, streams.ProvisionConfig{}, h) {
		for _, src := range cfg.Sources {
			site := streams.SiteOfSource(&jetstream.StreamSourceInfo{External: src.External})
			if src.External.DeliverPrefix != "edge.src."+site {
				t.Errorf("%s's source from %s delivers under %q, want edge.src.%s", cfg.Name, site, src.External.DeliverPrefix, site)
			}
		}
	}
	_, js := natstest.Connect(t, natstest.RunServer(t))
	h.DeliverPrefix = nil
	if _, err := streams.ProvisionHub(t.Context(), js, "fleet", streams.ProvisionConfig{}, h, nil); err != nil {
		t.Fatal(err)
	}
	h.DeliverPrefix = func(site string) string { return "edge.src." + site }
	changes, err := streams.ProvisionHub(t.Context(), js, "fleet", streams.ProvisionConfig{}, h, nil)
	if err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(t.Context(), names.Events)
	if err != nil {
		t.Fatal(err)
	}
	if got := st.CachedInfo().Config.Sources[0].External.DeliverPrefix; got == "" {
		t.Errorf("re-provisioned EVENTS sources still deliver under the default prefix (changes %+v)", changes)
	}
}
