package streams

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/wire"
)

// A hub built before staging accounts sourced each site's streams itself.
// Moving such a hub to staging ([HubConfig.Staging]) must neither skip nor
// repeat a decision: the new staging stream starts at the first site
// sequence the hub does not hold yet, and numbers its messages as the site
// does from there (FirstSeq), so the hub's new source of it, from
// sequence 1, takes exactly what the old one had not.

// DirectSiteSource is the source of stream's configuration that reads
// site's stream of the same name directly across the leaf link (a hub
// built before staging), nil when there is none.
func DirectSiteSource(cfg jetstream.StreamConfig, site string) *jetstream.StreamSource {
	for _, s := range cfg.Sources {
		if s.Name == cfg.Name && s.External != nil && s.External.APIPrefix == SiteAPIPrefix(site) {
			return s
		}
	}
	return nil
}

// LastSourcedSeq is the last sequence of src's stream that stream holds: it
// reads stream backwards to the newest message src delivered (its
// Nats-Stream-Source header names src as nats-server does: the stream
// name, and for an external one a hash of its API prefix). 0 when stream
// holds none. It reads what it must once, when a hub moves to staging.
func LastSourcedSeq(ctx context.Context, js jetstream.JetStream, stream string, src *jetstream.StreamSource) (uint64, error) {
	st, err := js.Stream(ctx, stream)
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", stream, err)
	}
	info := st.CachedInfo()
	iname := src.Name
	if src.External != nil {
		iname += ":" + serverHash(src.External.APIPrefix)
	}
	for seq := info.State.LastSeq; seq >= info.State.FirstSeq && seq > 0; seq-- {
		m, err := st.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("read %s message %d: %w", stream, seq, err)
		}
		fields := strings.Fields(m.Header.Get(wire.HeaderStreamSource))
		if len(fields) < 2 || fields[0] != iname {
			continue
		}
		n, err := strconv.ParseUint(fields[1], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s message %d: %s %q: %w", stream, seq, wire.HeaderStreamSource, m.Header.Get(wire.HeaderStreamSource), err)
		}
		return n, nil
	}
	return 0, nil
}

// serverHash is nats-server's getHash (events.go, v2.15.2): the first 8
// bytes of name's SHA-256, each mapped onto 62 digits. A source's header
// names an external source by it.
func serverHash(name string) string {
	const digits = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	b := sha256.Sum256([]byte(name))
	for i := range 8 {
		b[i] = digits[int(b[i]%62)]
	}
	return string(b[:8])
}

// placeholderSubject is the subject a hub stream holds while it has no
// source (a stream needs a subject or a source); nobody writes to it.
func placeholderSubject(stream string) string { return "esjet-restart." + strings.ToLower(stream) }

// DropDirectSiteSource stops stream reading site directly
// ([DirectSiteSource]) and returns the source it dropped, nil when it had
// none.
func DropDirectSiteSource(ctx context.Context, js jetstream.JetStream, stream, site string) (*jetstream.StreamSource, error) {
	st, err := js.Stream(ctx, stream)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", stream, err)
	}
	cfg := st.CachedInfo().Config
	src := DirectSiteSource(cfg, site)
	if src == nil {
		return nil, nil
	}
	var keep []*jetstream.StreamSource
	for _, s := range cfg.Sources {
		if s != src {
			keep = append(keep, s)
		}
	}
	cfg.Sources = keep
	if len(keep) == 0 && len(cfg.Subjects) == 0 {
		cfg.Subjects = []string{placeholderSubject(stream)}
	}
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		return nil, fmt.Errorf("stop %s reading site %s directly: %w", stream, site, err)
	}
	return src, nil
}

// AddSource adds src to stream's sources (dropping the placeholder subject
// [DropDirectSiteSource] may have left).
func AddSource(ctx context.Context, js jetstream.JetStream, stream string, src *jetstream.StreamSource) error {
	st, err := js.Stream(ctx, stream)
	if err != nil {
		return fmt.Errorf("read %s: %w", stream, err)
	}
	cfg := st.CachedInfo().Config
	cfg.Sources = append(cfg.Sources, src)
	cfg.Subjects = slices.DeleteFunc(cfg.Subjects, func(s string) bool { return s == placeholderSubject(stream) })
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		return fmt.Errorf("add %s's source %s: %w", stream, src.Name, err)
	}
	return nil
}
