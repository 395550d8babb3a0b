package raw

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/natstest"
)

// testStreams makes an "events" stream on <p>.evt.> and an "outbox" stream
// on <p>.out.>, both de-duplicating, as the esjet streams do.
func testStreams(t *testing.T, js jetstream.JetStream) (prefix, events, outbox string) {
	t.Helper()
	prefix = natstest.Namespace(t)
	events, outbox = prefix+"_EV", prefix+"_OUT"
	for name, subj := range map[string]string{events: prefix + ".evt.>", outbox: prefix + ".out.>"} {
		if _, err := js.CreateStream(t.Context(), jetstream.StreamConfig{Name: name, Subjects: []string{subj}}); err != nil {
			t.Fatal(err)
		}
	}
	return prefix, events, outbox
}

func TestAppenderGuardsEachSubjectAndSpotsConflicts(t *testing.T) {
	s := natstest.RunServer(t)
	_, js := natstest.Connect(t, s)
	_, js2 := natstest.Connect(t, s)
	p, events, _ := testStreams(t, js)
	subjects := []string{p + ".evt.a0", p + ".evt.a1"}
	// A header read back from a stream carries the expectation it was
	// written with: the appender must not resend it.
	h := nats.Header{"Esjet-Kind": {"x"}, "Nats-Expected-Last-Subject-Sequence": {"99"}}
	ap := NewAppender(subjects, []byte(`{"n":1}`), h)
	for i, js := range []jetstream.JetStream{js, js2, js} { // one appender, several connections
		for a := range subjects {
			if _, err := ap.Append(t.Context(), js, a); err != nil {
				t.Fatalf("append %d to aggregate %d: %v", i, a, err)
			}
		}
	}
	st, err := js.Stream(t.Context(), events)
	if err != nil {
		t.Fatal(err)
	}
	m, err := st.GetLastMsgForSubject(t.Context(), subjects[1])
	if err != nil {
		t.Fatal(err)
	}
	if m.Header.Get("Esjet-Kind") != "x" || m.Header.Get(jetstream.MsgIDHeader) == "" || m.Sequence != 6 {
		t.Errorf("last message seq %d, headers %v: want seq 6, the copied header and a Msg-Id", m.Sequence, m.Header)
	}
	// Someone else writes aggregate 0: the appender's next write conflicts.
	if _, err := js.Publish(t.Context(), subjects[0], []byte("other")); err != nil {
		t.Fatal(err)
	}
	_, err = ap.Append(t.Context(), js, 0)
	if !IsConflict(err) {
		t.Errorf("append after a foreign write: %v, want a conflict", err)
	}
	if IsConflict(fmt.Errorf("wrapped: %w", jetstream.ErrStreamNotFound)) {
		t.Error("stream not found counted as a conflict")
	}
}

func TestRelayFetchAckAndReadDrainWhatWasPublished(t *testing.T) {
	s := natstest.RunServer(t)
	_, js := natstest.Connect(t, s)
	p, events, outbox := testStreams(t, js)
	const n = 700 // more than two relay batches of 256
	err := PublishAll(t.Context(), js, n, func(i int) *nats.Msg {
		m := nats.NewMsg(p + ".evt.agg" + strconv.Itoa(i%7))
		m.Data = []byte(`{"i":` + strconv.Itoa(i) + `}`)
		return m
	})
	if err != nil {
		t.Fatal(err)
	}

	got, err := Read(t.Context(), js, events, p+".evt.>", n)
	if err != nil || got != n {
		t.Fatalf("Read = %d, %v: want %d", got, err, n)
	}

	if err := Relay(t.Context(), js, events, p+".out.cmd", n, 0); err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(t.Context(), outbox)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != n {
		t.Errorf("relay put %d messages in the outbox, want %d", info.State.Msgs, n)
	}
	ci, err := js.Consumer(t.Context(), events, "raw-relay")
	if err != nil {
		t.Fatal(err)
	}
	if info, err := ci.Info(t.Context()); err != nil || info.AckFloor.Stream != n {
		t.Errorf("relay consumer ack floor %+v, %v: want every event acked", info.AckFloor, err)
	}

	if err := FetchAck(t.Context(), js, outbox, "raw-cmd", p+".out.cmd", n); err != nil {
		t.Fatal(err)
	}
	fc, err := js.Consumer(t.Context(), outbox, "raw-cmd")
	if err != nil {
		t.Fatal(err)
	}
	// Acks are fire and forget: wait for the server to have them all.
	natstest.Eventually(t, 5*time.Second, func() bool {
		info, err := fc.Info(t.Context())
		return err == nil && info.AckFloor.Stream == n && info.NumAckPending == 0
	})
}
