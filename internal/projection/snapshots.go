package projection

import (
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/streams"
)

// snapshots keeps one [streams.SnapshotReader] per view bucket stream a
// [Views] reads (each holds one reply subscription for all its reads).
// A view has at most [Slots] buckets at a time, so the map stays small; past
// maxSnapshotReaders (buckets of views gone, legacy generation buckets) it
// starts over.
type snapshots struct {
	mu      sync.Mutex
	readers map[string]*streams.SnapshotReader
}

const maxSnapshotReaders = 256

func (s *snapshots) reader(js jetstream.JetStream, stream string) *streams.SnapshotReader {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.readers[stream]; ok {
		return r
	}
	if s.readers == nil || len(s.readers) >= maxSnapshotReaders {
		// Closed a while later: a read in flight on one (10s at most)
		// still gets its reply.
		old := s.readers
		time.AfterFunc(time.Minute, func() {
			for _, r := range old {
				_ = r.Close()
			}
		})
		s.readers = map[string]*streams.SnapshotReader{}
	}
	r := streams.NewSnapshotReader(js, stream)
	s.readers[stream] = r
	return r
}
