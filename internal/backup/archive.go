package backup

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Format is the archive format this package writes and reads.
const Format = 1

// Header is an archive's first line.
type Header struct {
	Format        int       `json:"esjet_backup"`
	Namespace     string    `json:"namespace"`
	TakenAt       time.Time `json:"taken_at"`
	EsjetVersion  string    `json:"esjet_version,omitempty"`
	ServerVersion string    `json:"server_version,omitempty"`
	Objects       []Object  `json:"objects"`
}

// Object is one stream of the namespace (a bucket is its KV_ stream) as
// it stood when the backup began.
type Object struct {
	Name     string                 `json:"name"`
	Config   jetstream.StreamConfig `json:"config"`
	FirstSeq uint64                 `json:"first_seq"`
	LastSeq  uint64                 `json:"last_seq"`
	Messages uint64                 `json:"messages"`
	// KeepSeq: the restore gives each message its sequence (the log,
	// OUTBOX, the dead letters); a bucket's sequences are its own.
	KeepSeq bool `json:"keep_seq"`
}

// record is every line after the header: the start of an object's
// messages, one message, or the end.
type record struct {
	Object string      `json:"object,omitempty"`
	Seq    uint64      `json:"seq,omitempty"`
	Subj   string      `json:"subject,omitempty"`
	Header nats.Header `json:"header,omitempty"`
	Data   []byte      `json:"data,omitempty"`
	End    *end        `json:"end,omitempty"`
}

type end struct {
	Messages map[string]uint64 `json:"messages"`
}

// writer writes an archive.
type writer struct {
	gz  *gzip.Writer
	enc *json.Encoder
}

func newWriter(w io.Writer) *writer {
	gz := gzip.NewWriter(w)
	return &writer{gz: gz, enc: json.NewEncoder(gz)}
}

func (w *writer) put(v any) error { return w.enc.Encode(v) }

func (w *writer) close() error { return w.gz.Close() }

// reader reads an archive.
type reader struct {
	dec *json.Decoder
	gz  *gzip.Reader
}

func newReader(r io.Reader) (*reader, Header, error) {
	gz, err := gzip.NewReader(bufio.NewReader(r))
	if err != nil {
		return nil, Header{}, fmt.Errorf("%w (%v)", ErrNotAnArchive, err)
	}
	dec := json.NewDecoder(gz)
	var h Header
	if err := dec.Decode(&h); err != nil || h.Format == 0 || h.Namespace == "" {
		return nil, Header{}, fmt.Errorf("%w: no header line", ErrNotAnArchive)
	}
	if h.Format != Format {
		return nil, Header{}, fmt.Errorf("restore: archive format %d; this esjet reads format %d: restore with the esjet that wrote it", h.Format, Format)
	}
	return &reader{dec: dec, gz: gz}, h, nil
}

// next returns the next record; io.ErrUnexpectedEOF when the archive ends
// before its end line.
func (r *reader) next() (record, error) {
	var rec record
	if err := r.dec.Decode(&rec); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) { // cut at a line's end, or inside one
			return rec, fmt.Errorf("%w: %w", ErrCutShort, io.ErrUnexpectedEOF)
		}
		return rec, fmt.Errorf("restore: read the archive: %w", err)
	}
	return rec, nil
}
