package config

import (
	"errors"
	"strings"
	"syscall"
)

// ListenError is a listener of the node that could not open its address:
// which setting asked for it, the address, and why.
type ListenError struct {
	Setting string // the config path, e.g. "nats.embedded.listen"
	Addr    string
	Err     error
}

func (e *ListenError) Error() string { return e.Setting + " " + e.Addr + ": " + e.Err.Error() }
func (e *ListenError) Unwrap() error { return e.Err }

// InUse reports whether another process already listens on the address.
func (e *ListenError) InUse() bool {
	return errors.Is(e.Err, syscall.EADDRINUSE) || strings.Contains(e.Err.Error(), "address already in use")
}

// EnvName is the environment variable that sets the config path p:
// EnvName("http.listen") is "ESJET_HTTP_LISTEN".
func EnvName(p string) string {
	return EnvPrefix + strings.ToUpper(strings.ReplaceAll(p, ".", "_"))
}
