package broker

// For the external tests (matrix_test.go): nats-server releases other than
// the pinned one, built from the module proxy and run as child processes.
var (
	ServerSource    = serverSource
	RunServerConfig = runServerConfig
)
