// Package broker gives an esjet node its NATS connection and JetStream context.
//
// In embedded mode [Start] runs nats-server inside the process (file store under the
// configured data dir, loopback listener by default, sync always) and connects to it
// in-process; in external mode it connects to an existing cluster. Either way the
// caller gets a [*Broker] whose [Broker.Conn] and [Broker.JetStream] feed stream
// provisioning and everything above it, and whose [Broker.Close] drains the
// connection before stopping the server.
//
// An embedded server owns its data dir: [LockDataDir] takes an OS lock on the dir's
// lock file before nats-server opens the store and holds it until Close (or the
// process's death), so a second node on the same dir is refused with a
// [*DataDirLockedError] naming the holder. `esjet server` takes the same lock.
//
// [Connect] is the other side: a CLI command (esjet streams, …) connecting as a plain
// client to the node a config describes.
//
// Roles ([RolePermissions]) and the accounts they live in ([Accounts]) are the
// NATS boundary: only node and admin share an account with the namespace's
// streams; clients, operators, each receiver and the edge hub's leaf link
// reach it through service imports, so nothing they send — a reply subject,
// a stream of their own — can make the server write there. `esjet
// permissions` prints them ([ServerAccounts]); the embedded server loads the
// same text.
package broker
