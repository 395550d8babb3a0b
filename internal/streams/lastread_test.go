package streams

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/natstest"
)

// readsStream makes a stream on <p>.r.> holding two messages on each of
// r.0 … r.4 (the second is the last) and none on r.5 … r.9, and counts the
// direct get requests made to it: the requests' bodies, as sent.
func readsStream(t *testing.T) (js jetstream.JetStream, stream, prefix string, requests func() []string) {
	t.Helper()
	s := natstest.RunServer(t, natstest.SyncAlways())
	nc, js := natstest.Connect(t, s)
	prefix = natstest.Namespace(t)
	stream = prefix + "_R"
	if _, err := js.CreateStream(t.Context(), jetstream.StreamConfig{Name: stream, Subjects: []string{prefix + ".r.>"},
		AllowDirect: true, AllowAtomicPublish: true}); err != nil {
		t.Fatal(err)
	}
	for round := 1; round <= 2; round++ {
		for i := range 5 {
			if _, err := js.Publish(t.Context(), prefix+".r."+strconv.Itoa(i), []byte(strconv.Itoa(round))); err != nil {
				t.Fatal(err)
			}
		}
	}
	var mu sync.Mutex
	var bodies []string
	sub, err := nc.Subscribe("$JS.API.DIRECT.GET."+stream, func(m *nats.Msg) {
		mu.Lock()
		bodies = append(bodies, string(m.Data))
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	return js, stream, prefix, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), bodies...)
	}
}

func TestCommitterReadsMadeDuringARoundGoOutTogetherWhenItReturns(t *testing.T) {
	t.Parallel()
	js, stream, p, requests := readsStream(t)
	cm := NewCommitter(js, stream, GroupCommit{MinBatch: 2}, 5*time.Second, nil)
	if !cm.Batching() {
		t.Fatal("a committer with MinBatch 2 is not on")
	}

	// Nothing in flight: a read goes at once, alone.
	m, err := cm.Last(t.Context(), p+".r.3")
	if err != nil || string(m.Data) != "2" || m.Subject != p+".r.3" {
		t.Fatalf("lone read: %v, %v; want r.3's second message", m, err)
	}
	if _, err := cm.Last(t.Context(), p+".r.7"); !errors.Is(err, jetstream.ErrMsgNotFound) {
		t.Fatalf("lone read of an empty subject: %v, want ErrMsgNotFound", err)
	}
	natstest.Eventually(t, 5*time.Second, func() bool { return len(requests()) == 2 })

	// A round in flight: the reads made now wait for it.
	c := cm.c
	c.mu.Lock()
	c.inFlight = true
	c.mu.Unlock()
	subjects := []string{"r.0", "r.1", "r.2", "r.3", "r.4", "r.5", "r.6", "r.7", "r.8", "r.9", "r.0"}
	got := make([]*jetstream.RawStreamMsg, len(subjects))
	errs := make([]error, len(subjects))
	var wg sync.WaitGroup
	for i, s := range subjects {
		wg.Go(func() { got[i], errs[i] = cm.Last(t.Context(), p+"."+s) })
	}
	natstest.Eventually(t, 5*time.Second, func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return len(c.reads) == len(subjects)
	})
	if n := len(requests()); n != 2 {
		t.Fatalf("%d direct get requests while the round was in flight, want none beyond the 2 before", n-2)
	}
	c.round(nil) // the round returns: its reads are served before the next
	wg.Wait()
	for i, s := range subjects {
		n, _ := strconv.Atoi(s[2:])
		switch {
		case n < 5 && (errs[i] != nil || got[i] == nil || string(got[i].Data) != "2" || got[i].Subject != p+"."+s):
			t.Errorf("read of %s: %v, %v; want its last message", s, got[i], errs[i])
		case n >= 5 && !errors.Is(errs[i], jetstream.ErrMsgNotFound):
			t.Errorf("read of %s: %v, %v; want ErrMsgNotFound", s, got[i], errs[i])
		}
	}
	natstest.Eventually(t, 5*time.Second, func() bool { return len(requests()) >= 3 })
	reqs := requests()
	if len(reqs) != 3 {
		t.Fatalf("requests %q: want one for the eleven reads", reqs[2:])
	}
	var req batchRequest
	if err := json.Unmarshal([]byte(reqs[2]), &req); err != nil || len(req.MultiLast) != 10 {
		t.Errorf("request %s: want one multi_last of the ten subjects", reqs[2])
	}
}

// A reply the server cuts at max_bytes says how many found messages it
// did not send: those are asked for again, never read as "none".
func TestCommitterReadsACutReplyToTheEnd(t *testing.T) {
	t.Parallel()
	js, stream, p, requests := readsStream(t)
	big := []byte(strings.Repeat("x", 600<<10))
	for i := range 3 {
		if _, err := js.Publish(t.Context(), p+".r.big"+strconv.Itoa(i), big); err != nil {
			t.Fatal(err)
		}
	}
	r := newLastReader(js, stream, 5*time.Second)
	var reads []*lastRead
	for _, s := range []string{"big0", "big1", "big2", "1", "9"} {
		reads = append(reads, &lastRead{subject: p + ".r." + s, done: make(chan struct{})})
	}
	r.serve(reads)
	for i, rd := range reads {
		<-rd.done
		switch {
		case i < 3 && (rd.err != nil || len(rd.msg.Data) != len(big)):
			t.Errorf("read of %s: %v; want its 600 KiB message", rd.subject, rd.err)
		case i == 3 && (rd.err != nil || string(rd.msg.Data) != "2"):
			t.Errorf("read of %s: %v, %v; want its last message", rd.subject, rd.msg, rd.err)
		case i == 4 && !errors.Is(rd.err, jetstream.ErrMsgNotFound):
			t.Errorf("read of %s: %v; want ErrMsgNotFound", rd.subject, rd.err)
		}
	}
	// The test's subscription sees the requests asynchronously: wait for
	// the second one rather than count at once (a cut reply is asked again).
	natstest.Eventually(t, 5*time.Second, func() bool { return len(requests()) >= 2 })
}

// A message the server cannot load ends a multi_last reply with 404
// "Message Not Found" (getDirectMulti), whatever follows it. The subjects
// not read yet are then read one by one, as kv.Get reads them: the one
// that cannot be loaded reads as none, the others as what they hold. (A
// fake stream answers here: the server fails a load only on a damaged
// store.)
func TestCommitterReadsPastAMessageThatCannotBeLoaded(t *testing.T) {
	t.Parallel()
	s := natstest.RunServer(t)
	nc, js := natstest.Connect(t, s)
	reply := func(to, subject, data string, pending int) {
		m := nats.NewMsg(to)
		m.Header.Set(jetstream.SubjectHeader, subject)
		m.Header.Set(jetstream.SequenceHeader, "10")
		m.Header.Set(jetstream.TimeStampHeaer, time.Now().UTC().Format(time.RFC3339Nano))
		m.Header.Set("Nats-Num-Pending", strconv.Itoa(pending))
		m.Data = []byte(data)
		_ = nc.PublishMsg(m)
	}
	notFound := func(to string) {
		m := nats.NewMsg(to)
		m.Header.Set("Status", "404")
		m.Header.Set("Description", "Message Not Found")
		_ = nc.PublishMsg(m)
	}
	var multis atomic.Int32
	sub, err := nc.Subscribe("$JS.API.DIRECT.GET.FAKE", func(m *nats.Msg) {
		var req batchRequest
		_ = json.Unmarshal(m.Data, &req)
		switch {
		case len(req.MultiLast) > 0 && multis.Add(1) == 1:
			reply(m.Reply, "k.s0", "zero", 2) // then k.s1 fails to load
			notFound(m.Reply)
		case len(req.MultiLast) > 0, req.LastFor == "k.s1":
			notFound(m.Reply)
		case req.LastFor == "k.s2":
			reply(m.Reply, "k.s2", "two", 0)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	r := newLastReader(js, "FAKE", 5*time.Second)
	var reads []*lastRead
	for _, s := range []string{"k.s0", "k.s1", "k.s2"} {
		reads = append(reads, &lastRead{subject: s, done: make(chan struct{})})
	}
	r.serve(reads)
	if m, err := reads[0].msg, reads[0].err; err != nil || string(m.Data) != "zero" {
		t.Errorf("k.s0: %v, %v; want the message sent before the failure", m, err)
	}
	if !errors.Is(reads[1].err, jetstream.ErrMsgNotFound) {
		t.Errorf("k.s1 (cannot be loaded): %v; want ErrMsgNotFound, as kv.Get says", reads[1].err)
	}
	if m, err := reads[2].msg, reads[2].err; err != nil || string(m.Data) != "two" {
		t.Errorf("k.s2: %v, %v; want its message, read on its own", m, err)
	}
}
