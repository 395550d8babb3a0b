package projection

import (
	"bytes"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
)

// lagDialer dials connections that send a third of the publishes whose
// subject starts with from to the same subject under to instead: the
// reader's share of requests that a copy behind would draw.
type lagDialer struct {
	from, to string
	sent     atomic.Int64
}

func (d *lagDialer) Dial(network, address string) (net.Conn, error) {
	c, err := net.Dial(network, address)
	if err != nil {
		return nil, err
	}
	return &lagConn{Conn: c, d: d}, nil
}

// lagConn rewrites the client's PUB and HPUB lines as they are written;
// everything else passes as it is.
type lagConn struct {
	net.Conn
	d   *lagDialer
	mu  sync.Mutex
	buf []byte
}

func (c *lagConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.buf = append(c.buf, p...)
	var out []byte
	for {
		eol := bytes.Index(c.buf, []byte("\r\n"))
		if eol < 0 {
			break
		}
		line := c.buf[:eol]
		f := bytes.Fields(line)
		n := 0 // payload bytes after the line
		if len(f) >= 3 && (string(f[0]) == "PUB" || string(f[0]) == "HPUB") {
			n, _ = strconv.Atoi(string(f[len(f)-1]))
			n += 2
		}
		if len(c.buf) < eol+2+n {
			break // the payload is not all here yet
		}
		if n > 0 && c.d.matches(f[1]) && rand.IntN(3) == 0 {
			c.d.sent.Add(1)
			f[1] = append([]byte(c.d.to), f[1][len(c.d.from):]...)
			line = bytes.Join(f, []byte(" "))
		}
		out = append(out, line...)
		out = append(out, c.buf[eol:eol+2+n]...)
		c.buf = c.buf[eol+2+n:]
	}
	if len(out) > 0 {
		if _, err := c.Conn.Write(out); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

func (d *lagDialer) matches(subject []byte) bool {
	return string(subject) == d.from || bytes.HasPrefix(subject, []byte(d.from+"."))
}
