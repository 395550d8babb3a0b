package bench

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/wire"
)

// The edge phase's raw side: plain JetStream sourcing across a leaf link,
// no esjet code. A site-like server (its own JetStream domain, a leaf node
// of the hub-like one) holds a stream with the backlog; then a stream on
// the hub-like server sources it by domain from sequence 1, with a
// duplicate window as the hub's EVENTS has.

const (
	rawSiteDomain = "rawsite"
	rawHubDomain  = "rawhub"
	rawSiteStream = "RAWEDGE_SITE"
	rawHubStream  = "RAWEDGE_HUB"
)

type rawSourcingConfig struct {
	dir         string
	syncAlways  bool
	syncEvery   time.Duration // when not syncAlways; 0: the server's default
	compression jetstream.StoreCompression
	duplicates  time.Duration
	// from is the esjet site's EVENTS: its messages 2 … count+1 (the
	// backlog, after the first decision) are copied as the raw backlog.
	from  jetstream.Stream
	count int
}

// rawServer is one in-process server of the raw side.
type rawServer struct {
	srv *server.Server
	nc  *nats.Conn
	js  jetstream.JetStream
}

func startRawServer(o *server.Options) (*rawServer, error) {
	srv, err := server.NewServer(o)
	if err != nil {
		return nil, err
	}
	srv.Start()
	if !srv.ReadyForConnections(30 * time.Second) {
		srv.Shutdown()
		return nil, fmt.Errorf("server %s not ready within 30s", o.ServerName)
	}
	nc, err := nats.Connect("", nats.InProcessServer(srv), nats.Name("esjet-bench-edge-raw"))
	if err != nil {
		srv.Shutdown()
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		srv.Shutdown()
		return nil, err
	}
	return &rawServer{srv: srv, nc: nc, js: js}, nil
}

func (r *rawServer) stop() {
	if r == nil {
		return
	}
	r.nc.Close()
	r.srv.Shutdown()
	r.srv.WaitForShutdown()
}

func (c rawSourcingConfig) options(name, domain string) *server.Options {
	o := &server.Options{
		ServerName: name, JetStream: true, JetStreamDomain: domain,
		StoreDir: filepath.Join(c.dir, name), DontListen: true, NoSigs: true, NoLog: true,
		SyncAlways: c.syncAlways, SyncInterval: c.syncEvery,
	}
	return o
}

// rawSourcing runs the raw side and returns its catch-up.
func rawSourcing(ctx context.Context, c rawSourcingConfig) (catchUp, error) {
	hubOpts := c.options("rawhub", rawHubDomain)
	hubOpts.LeafNode.Host, hubOpts.LeafNode.Port = "127.0.0.1", server.RANDOM_PORT
	hub, err := startRawServer(hubOpts)
	if err != nil {
		return catchUp{}, err
	}
	defer hub.stop()
	vz, err := hub.srv.Varz(nil)
	if err != nil {
		return catchUp{}, err
	}
	siteOpts := c.options("rawsite", rawSiteDomain)
	siteOpts.LeafNode.ReconnectInterval = time.Second // as an esjet site's
	siteOpts.LeafNode.Remotes = []*server.RemoteLeafOpts{{URLs: []*url.URL{{Scheme: "nats", Host: "127.0.0.1:" + strconv.Itoa(vz.LeafNode.Port)}}}}
	site, err := startRawServer(siteOpts)
	if err != nil {
		return catchUp{}, err
	}
	defer site.stop()

	if _, err := site.js.CreateStream(ctx, jetstream.StreamConfig{
		Name: rawSiteStream, Subjects: []string{"rawedge.>"}, Storage: jetstream.FileStorage,
		Compression: c.compression, Duplicates: c.duplicates,
	}); err != nil {
		return catchUp{}, fmt.Errorf("site stream: %w", err)
	}
	if err := copyBacklog(ctx, c.from, site.js, c.count); err != nil {
		return catchUp{}, err
	}
	if err := waitMsgs(ctx, site.js, rawSiteStream, uint64(c.count), time.Minute); err != nil {
		return catchUp{}, err
	}
	// The link is up and the hub-like server reaches the site's stream by
	// its domain: then the hub's stream starts sourcing the backlog. (A
	// source that was cut waits out a create timeout of up to 40s once the
	// link returns, which the esjet hub cuts short by restarting it; the
	// catch-up is measured from the first message stored, so raw is not
	// made to wait for it.)
	remote, err := jetstream.NewWithDomain(hub.nc, rawSiteDomain)
	if err != nil {
		return catchUp{}, err
	}
	if err := pollUntil(ctx, time.Minute, func() bool {
		_, err := remote.Stream(ctx, rawSiteStream)
		return err == nil
	}); err != nil {
		return catchUp{}, fmt.Errorf("the hub-like server does not reach the site's stream across the leaf link: %w", err)
	}
	cu := catchUp{start: time.Now()}
	if _, err := hub.js.CreateStream(ctx, jetstream.StreamConfig{
		Name: rawHubStream, Storage: jetstream.FileStorage, Compression: c.compression, Duplicates: c.duplicates,
		Sources: []*jetstream.StreamSource{{Name: rawSiteStream, Domain: rawSiteDomain, OptStartSeq: 1}},
	}); err != nil {
		return catchUp{}, fmt.Errorf("hub stream: %w", err)
	}
	if err := waitMsgs(ctx, hub.js, rawHubStream, uint64(c.count), edgeCatchUpTimeout); err != nil {
		return catchUp{}, err
	}
	cu.done = time.Now()
	if err := timeline(ctx, hub.js, rawHubStream, 1, uint64(c.count), &cu); err != nil {
		return catchUp{}, err
	}
	return cu, nil
}

// pollUntil polls cond until it holds.
func pollUntil(ctx context.Context, timeout time.Duration, cond func() bool) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for !cond() {
		select {
		case <-ctx.Done():
			return fmt.Errorf("not within %s", timeout)
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil
}

// copyBacklog publishes from's messages 2 … n+1 to the raw site stream:
// the same subjects (under rawedge.), headers (but the expectations, which
// belong to esjet's appends) and payloads.
func copyBacklog(ctx context.Context, from jetstream.Stream, to jetstream.JetStream, n int) error {
	cons, err := from.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: 2})
	if err != nil {
		return err
	}
	it, err := cons.Messages()
	if err != nil {
		return err
	}
	defer it.Stop()
	var acks []jetstream.PubAckFuture
	for range n {
		m, err := it.Next()
		if err != nil {
			return fmt.Errorf("read the site's backlog: %w", err)
		}
		out := nats.NewMsg("rawedge." + m.Subject())
		for k, v := range m.Headers() {
			if wire.KeptOnCopy(k) && k != wire.HeaderBatchID && k != wire.HeaderBatchSeq && k != wire.HeaderBatchCommit {
				out.Header[k] = v
			}
		}
		out.Data = m.Data()
		f, err := to.PublishMsgAsync(out, jetstream.WithStallWait(time.Minute))
		if err != nil {
			return err
		}
		acks = append(acks, f)
	}
	select {
	case <-to.PublishAsyncComplete():
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(time.Minute):
		return errors.New("copy the backlog: not acknowledged within a minute")
	}
	for _, f := range acks {
		select {
		case err := <-f.Err():
			return fmt.Errorf("copy the backlog: %w", err)
		default:
		}
	}
	return nil
}
