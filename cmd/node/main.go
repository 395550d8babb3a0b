package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/esjet/esjet/internal/api"
)

func main() {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	ctx, cancel := context.WithCancelCause(context.Background())
	go watchSignals(sigs, cancel, os.Stderr, os.Exit)
	err := run(ctx, os.Args[1:], os.Environ(), os.Stdout, os.Stderr)
	signal.Stop(sigs)
	cancel(nil)
	if err != nil {
		var ee *exitError
		if errors.As(err, &ee) {
			os.Exit(ee.code)
		}
		fmt.Fprintln(os.Stderr, "esjet:", api.UserMessage(err.Error()))
		os.Exit(1)
	}
}

// watchSignals turns the first SIGINT or SIGTERM into a graceful stop (ctx
// is cancelled with a cause that says how to skip it) and the second into
// an immediate exit without draining: code 130 for SIGINT, 143 for SIGTERM
// (128 + the signal's number, as a shell reports it).
func watchSignals(sigs <-chan os.Signal, cancel context.CancelCauseFunc, stderr io.Writer, exit func(int)) {
	first, ok := <-sigs
	if !ok {
		return
	}
	cancel(fmt.Errorf("%v received; stopping gracefully (send it again to exit at once without draining)", first))
	second, ok := <-sigs
	if !ok {
		return
	}
	code := 130
	if second == syscall.SIGTERM {
		code = 143
	}
	fmt.Fprintf(stderr, "esjet: %v received again: exiting at once (code %d) without draining; in-flight requests get no reply and unacknowledged work is redelivered after a restart\n", second, code)
	exit(code)
}

// exitError ends the process with code after its message was already shown.
type exitError struct{ code int }

func (e *exitError) Error() string { return fmt.Sprintf("exit %d", e.code) }

// run is main without the process: everything testable is here and below.
func run(ctx context.Context, args, environ []string, stdout, stderr io.Writer) error {
	root, g := newRoot(environ, stdout, stderr)
	root.SetArgs(args)
	return g.denied.explain(withRemedy(root.ExecuteContext(ctx)))
}
