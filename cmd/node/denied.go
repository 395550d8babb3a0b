package main

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/nats-io/nats.go"

	"github.com/esjet/esjet/config"
	"github.com/esjet/esjet/internal/broker"
)

// A request a CLI command's NATS user may not make is not answered: the
// server sends the connection an asynchronous permissions violation, and
// the request waited for its timeout (30 s) and then failed "context
// deadline exceeded". So the commands' connections watch for it: the
// first refusal is kept and the connection closed, which ends every
// request in flight at once, and run puts the refusal before whatever
// error the command returned.

// denial is the first request the server refused one of the command's
// connections.
type denial struct {
	mu  sync.Mutex
	err error
}

func (d *denial) record(err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.err == nil {
		d.err = err
	}
}

func (d *denial) first() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.err
}

// explain puts the refusal, if there was one, before err.
func (d *denial) explain(err error) error {
	first := d.first()
	if err == nil || first == nil {
		return err
	}
	return &deniedError{refused: first, err: err}
}

type deniedError struct{ refused, err error }

func (e *deniedError) Error() string {
	return fmt.Sprintf("NATS refused this command: %v — the user it connects as has a role that may not do this "+
		"(what each role may: docs/security.md, NATS roles; give the command a user whose role may, "+
		"in nats.embedded.auth or nats.external.auth / credentials_file); it stopped with: %v", e.refused, e.err)
}

func (e *deniedError) Unwrap() []error { return []error{e.refused, e.err} }

// connect is broker.Connect for a CLI command: a request the server
// refuses ends the command at once (see denial). extra options come last
// (one with an ErrorHandler of its own replaces this one).
func (g *globals) connect(ctx context.Context, cfg config.Config, name string, extra ...nats.Option) (*nats.Conn, error) {
	onDenied := nats.ErrorHandler(func(nc *nats.Conn, _ *nats.Subscription, err error) {
		if errors.Is(err, nats.ErrPermissionViolation) {
			g.denied.record(err)
			go nc.Close() // not on the client's callback goroutine
		}
	})
	return broker.Connect(ctx, cfg, name, append([]nats.Option{onDenied}, extra...)...)
}
