package raw

import (
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/natstest"
)

func TestGroupAppenderBatchesConcurrentAppendsAndKeepsEachExpectation(t *testing.T) {
	s := natstest.RunServer(t)
	_, js := natstest.Connect(t, s)
	p := natstest.Namespace(t)
	events := p + "_EV"
	if _, err := js.CreateStream(t.Context(), jetstream.StreamConfig{Name: events, Subjects: []string{p + ".evt.>"}, AllowAtomicPublish: true}); err != nil {
		t.Fatal(err)
	}
	const aggregates, writers, each = 16, 48, 25
	subjects := make([]string, aggregates)
	for a := range subjects {
		subjects[a] = p + ".evt.a" + strconv.Itoa(a)
	}
	g := NewGroupAppender(js, subjects, []byte(`{"n":1}`), nats.Header{"Esjet-Kind": {"x"}}, 10*time.Second)
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				if _, err := g.Append(t.Context(), (w+i)%aggregates); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("append: %v", err)
	}
	st, err := js.Stream(t.Context(), events)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(t.Context(), jetstream.WithSubjectFilter(p+".evt.>"))
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != writers*each {
		t.Errorf("stream holds %d messages, want %d", info.State.Msgs, writers*each)
	}
	for _, subj := range subjects {
		if n := info.State.Subjects[subj]; n != writers*each/aggregates {
			t.Errorf("%s holds %d messages, want %d", subj, n, writers*each/aggregates)
		}
	}
	// Every write expected its subject's last sequence, so 1,200 appends
	// without an error mean each saw the one before it; and with 48
	// writers some of them shared a batch.
	batches, batched := g.Batches()
	if batches == 0 || batched < 2*batches || batched > writers*each {
		t.Errorf("%d batch(es) holding %d append(s): want some batches of two or more", batches, batched)
	}

	// Someone else writes aggregate 0: the next append there is refused
	// as a conflict, and the appender's other aggregates go on.
	if _, err := js.Publish(t.Context(), subjects[0], []byte("other")); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Append(t.Context(), 0); !IsConflict(err) {
		t.Errorf("append after a foreign write: %v, want a conflict", err)
	}
	if _, err := g.Append(t.Context(), 1); err != nil {
		t.Errorf("append to another aggregate: %v", err)
	}
}
