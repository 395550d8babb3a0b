// Command esjet (built from cmd/node) runs an esjet node — an embedded or
// external NATS JetStream with the namespace's event log — and the commands
// that inspect it.
//
//	go build -o bin/esjet ./cmd/node
//	esjet            # same as `esjet run`
//	esjet streams    # streams, message counts, consumer lag
//	esjet version
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Environ(), os.Stdout, os.Stderr)
	stop()
	if err != nil {
		var ee *exitError
		if errors.As(err, &ee) {
			os.Exit(ee.code)
		}
		fmt.Fprintln(os.Stderr, "esjet:", err)
		os.Exit(1)
	}
}

// exitError ends the process with code after its message was already shown.
type exitError struct{ code int }

func (e *exitError) Error() string { return fmt.Sprintf("exit %d", e.code) }

// run is main without the process: everything testable is here and below.
func run(ctx context.Context, args, environ []string, stdout, stderr io.Writer) error {
	root := newRootCmd(environ, stdout, stderr)
	root.SetArgs(args)
	return root.ExecuteContext(ctx)
}
