package archive

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Format names the archive object's shape; Version is its version. A
// reader refuses another format or a newer version.
const (
	Format  = "esjet-archive"
	Version = 1
)

// Object is one archived aggregate's messages, as one JSON document:
//
//	{"format": "esjet-archive", "version": 1,
//	 "namespace": "demo", "subject": "demo.evt.trip.t1",
//	 "aggregate_type": "trip", "aggregate_id": "t1",
//	 "first_seq": 1, "last_seq": 42, "last_version": 9, "count": 6,
//	 "sha256": "<hex of the JSON encoding of messages>",
//	 "messages": [{"seq": 1, "subject": "demo.evt.trip.t1",
//	   "time": "2026-12-02T00:41:27.123456789Z",
//	   "headers": {"Nats-Msg-Id": ["…"], …}, "data": "<base64>"}, …]}
//
// Each message is exactly what the stream stored: its sequence, subject,
// server time, headers and data (personal fields stay sealed as they were
// in the log). SHA256 covers the messages array as encoded; [Decode]
// checks it.
type Object struct {
	Format        string    `json:"format"`
	Version       int       `json:"version"`
	Namespace     string    `json:"namespace"`
	Subject       string    `json:"subject"`
	AggregateType string    `json:"aggregate_type"`
	AggregateID   string    `json:"aggregate_id"`
	FirstSeq      uint64    `json:"first_seq"`
	LastSeq       uint64    `json:"last_seq"`
	LastVersion   uint64    `json:"last_version"`
	Count         int       `json:"count"`
	Archived      time.Time `json:"archived"`
	SHA256        string    `json:"sha256"`
	Messages      []Message `json:"messages"`
}

// Message is one stored message of the aggregate's subject.
type Message struct {
	Seq     uint64              `json:"seq"`
	Subject string              `json:"subject"`
	Time    time.Time           `json:"time"`
	Headers map[string][]string `json:"headers,omitempty"`
	Data    []byte              `json:"data"`
}

// MessageOf is m as an archive holds it.
func MessageOf(m *jetstream.RawStreamMsg) Message {
	var h map[string][]string
	if len(m.Header) > 0 {
		h = map[string][]string(m.Header)
	}
	return Message{Seq: m.Sequence, Subject: m.Subject, Time: m.Time.UTC(), Headers: h, Data: m.Data}
}

// Raw is the message as the stream returned it.
func (m Message) Raw() *jetstream.RawStreamMsg {
	return &jetstream.RawStreamMsg{Subject: m.Subject, Sequence: m.Seq, Header: nats.Header(m.Headers), Data: m.Data, Time: m.Time}
}

// Encode fills o's format, count and checksum and returns its bytes.
func Encode(o *Object) ([]byte, error) {
	o.Format, o.Version, o.Count = Format, Version, len(o.Messages)
	sum, err := checksum(o.Messages)
	if err != nil {
		return nil, err
	}
	o.SHA256 = sum
	return json.Marshal(o)
}

// Decode reads an archive object and checks its format and checksum: a
// damaged or foreign object is an error, never a shorter history.
func Decode(data []byte) (Object, error) {
	var o Object
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&o); err != nil {
		return Object{}, fmt.Errorf("archive object: %w", err)
	}
	if o.Format != Format {
		return Object{}, fmt.Errorf("archive object: format %q, not %q", o.Format, Format)
	}
	if o.Version > Version || o.Version < 1 {
		return Object{}, fmt.Errorf("archive object: version %d; this build reads %d", o.Version, Version)
	}
	if o.Count != len(o.Messages) {
		return Object{}, fmt.Errorf("archive object %s: %d messages, the manifest says %d", o.Subject, len(o.Messages), o.Count)
	}
	sum, err := checksum(o.Messages)
	if err != nil {
		return Object{}, err
	}
	if sum != o.SHA256 {
		return Object{}, fmt.Errorf("archive object %s: checksum %s, the manifest says %s: the object is damaged", o.Subject, sum, o.SHA256)
	}
	return o, nil
}

func checksum(msgs []Message) (string, error) {
	b, err := json.Marshal(msgs)
	if err != nil {
		return "", err
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:]), nil
}
