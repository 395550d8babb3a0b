package streams_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/natstest"
	"github.com/esjet/esjet/internal/streams"
)

// TestMovingASourceToStagingSkipsAndRepeatsNothing pins how a hub built
// before staging moves to it: LastSourcedSeq finds the last message the
// hub's stream holds from its direct source (by the source's name and
// API-prefix hash in Nats-Stream-Source, as nats-server writes it), a
// staging stream starts at the next sequence and numbers from there, and
// the hub's stream, now sourcing the staging stream from sequence 1, holds
// every message of the site exactly once.
func TestMovingASourceToStagingSkipsAndRepeatsNothing(t *testing.T) {
	// The site's stream in an account of its own, reached from the hub's
	// as a site's domain is: by an API prefix and a delivery prefix.
	s := natstest.RunServer(t, func(o *server.Options) {
		if err := o.ProcessConfigString(`accounts {
  SITE { jetstream: enabled, users: [{user: site, password: site}],
    exports: [{service: "$JS.API.CONSUMER.CREATE.SITE.>"}, {service: "$JS.API.CONSUMER.CREATE.SITE"}, {service: "$JS.API.CONSUMER.DELETE.SITE.*"},
      {service: "$JS.API.STREAM.INFO.SITE"}, {service: "$JS.FC.SITE.>"}, {stream: "deliver.>"}] }
  HUB { jetstream: enabled, users: [{user: hub, password: hub}],
    imports: [{service: {account: SITE, subject: "$JS.API.CONSUMER.CREATE.SITE.>"}, to: "$JS.site.API.CONSUMER.CREATE.SITE.>"},
      {service: {account: SITE, subject: "$JS.API.CONSUMER.CREATE.SITE"}, to: "$JS.site.API.CONSUMER.CREATE.SITE"},
      {service: {account: SITE, subject: "$JS.API.CONSUMER.DELETE.SITE.*"}, to: "$JS.site.API.CONSUMER.DELETE.SITE.*"},
      {service: {account: SITE, subject: "$JS.API.STREAM.INFO.SITE"}, to: "$JS.site.API.STREAM.INFO.SITE"},
      {service: {account: SITE, subject: "$JS.FC.SITE.>"}}, {stream: {account: SITE, subject: "deliver.>"}}] }
}`); err != nil {
			t.Fatal(err)
		}
	})
	site, err := nats.Connect(s.ClientURL(), nats.UserInfo("site", "site"))
	if err != nil {
		t.Fatal(err)
	}
	defer site.Close()
	hub, err := nats.Connect(s.ClientURL(), nats.UserInfo("hub", "hub"))
	if err != nil {
		t.Fatal(err)
	}
	defer hub.Close()
	sjs, _ := jetstream.New(site)
	js, _ := jetstream.New(hub)
	ctx := t.Context()
	if _, err := sjs.CreateStream(ctx, jetstream.StreamConfig{Name: "SITE", Subjects: []string{"site.>"}}); err != nil {
		t.Fatal(err)
	}
	ext := func() *jetstream.ExternalStream {
		return &jetstream.ExternalStream{APIPrefix: "$JS.site.API", DeliverPrefix: "deliver"}
	}
	direct := &jetstream.StreamSource{Name: "SITE", OptStartSeq: 1, External: ext()}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "AGG", Duplicates: time.Minute, Sources: []*jetstream.StreamSource{direct}}); err != nil {
		t.Fatal(err)
	}
	// another source's messages after the site's last one
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "OTHER", Subjects: []string{"other.>"}}); err != nil {
		t.Fatal(err)
	}
	publish := func(subject string, from, to int) {
		pub := js
		if subject == "site" {
			pub = sjs
		}
		for i := from; i <= to; i++ {
			if _, err := pub.Publish(ctx, fmt.Sprintf("%s.%d", subject, i), nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	msgs := func(name string) uint64 {
		st, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		return st.CachedInfo().State.Msgs
	}
	publish("site", 1, 7)
	natstest.Eventually(t, 10*time.Second, func() bool { return msgs("AGG") == 7 })
	agg, err := js.Stream(ctx, "AGG")
	if err != nil {
		t.Fatal(err)
	}
	cfg := agg.CachedInfo().Config
	cfg.Sources = append(cfg.Sources, &jetstream.StreamSource{Name: "OTHER", OptStartSeq: 1})
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	publish("other", 1, 3)
	natstest.Eventually(t, 10*time.Second, func() bool { return msgs("AGG") == 10 })

	// The move: the hub's stream stops reading the site, the staging
	// stream starts after the last message it holds from it, and the hub's
	// stream sources the staging stream instead, from sequence 1.
	cfg.Sources = []*jetstream.StreamSource{{Name: "OTHER", OptStartSeq: 1}}
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	publish("site", 8, 8)
	last, err := streams.LastSourcedSeq(ctx, js, "AGG", direct)
	if err != nil || last != 7 {
		t.Fatalf("LastSourcedSeq = %d, %v; want 7", last, err)
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "STAGE", FirstSeq: last + 1,
		Sources: []*jetstream.StreamSource{{Name: "SITE", OptStartSeq: last + 1, External: ext()}}}); err != nil {
		t.Fatal(err)
	}
	publish("site", 9, 9)
	cfg.Sources = []*jetstream.StreamSource{{Name: "STAGE", OptStartSeq: 1}, {Name: "OTHER", OptStartSeq: 1}}
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	publish("site", 10, 12)
	natstest.Eventually(t, 10*time.Second, func() bool { return msgs("AGG") >= 15 })
	seen := map[string]int{}
	st, err := js.Stream(ctx, "AGG")
	if err != nil {
		t.Fatal(err)
	}
	for seq := uint64(1); seq <= st.CachedInfo().State.LastSeq; seq++ {
		m, err := st.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		seen[m.Subject]++
	}
	for i := 1; i <= 12; i++ {
		if n := seen[fmt.Sprintf("site.%d", i)]; n != 1 {
			t.Errorf("site.%d is in the hub's stream %d times, want once", i, n)
		}
	}
	if last, err := streams.LastSourcedSeq(ctx, js, "AGG", &jetstream.StreamSource{Name: "NONE"}); err != nil || last != 0 {
		t.Errorf("LastSourcedSeq of a source the stream never had = %d, %v; want 0", last, err)
	}
}

// TestDirectSiteSourceFindsOnlyTheSitesOwnStream pins which source a hub
// moves to staging: the site's stream of the hub stream's own name, by the
// site's domain.
func TestDirectSiteSourceFindsOnlyTheSitesOwnStream(t *testing.T) {
	cfg := jetstream.StreamConfig{Name: "FLEET_EVENTS", Sources: []*jetstream.StreamSource{
		{Name: "FLEET_EVENTS", External: &jetstream.ExternalStream{APIPrefix: "$JS.s2.API"}},
		{Name: "FLEET_SITE_S1_EVENTS", External: &jetstream.ExternalStream{APIPrefix: "esjet-edge.fleet.stage.s1.API"}},
	}}
	if s := streams.DirectSiteSource(cfg, "s2"); s == nil || s.External.APIPrefix != "$JS.s2.API" {
		t.Errorf("s2: %+v", s)
	}
	if s := streams.DirectSiteSource(cfg, "s1"); s != nil {
		t.Errorf("s1 is staged, yet: %+v", s)
	}
}
