package config

import (
	"strings"
	"time"
)

// Config is the whole configuration of an esjet node. The zero value is not useful:
// start from [Default] (which [Load] does) and call [Config.Validate].
type Config struct {
	// Namespace is the bounded context this node serves. It becomes a subject token
	// ("<ns>.evt.>") and, upper-cased, the stream name prefix ("<NS>_EVENTS"), so it
	// must match ^[a-z0-9][a-z0-9_-]{0,31}$. Default "demo".
	Namespace  string     `yaml:"namespace"`
	NATS       NATS       `yaml:"nats"`
	Streams    Streams    `yaml:"streams"`
	Aggregates Aggregates `yaml:"aggregates"`
	Outbox     Outbox     `yaml:"outbox"`
	// Projections tunes the read models' ownership (a node given projections).
	Projections Projections `yaml:"projections"`
	// Workers says who carries out each command kind, keyed by kind. Kinds
	// without an entry (and without a Go handler) wait in OUTBOX. Only the
	// config file sets it (no environment variables).
	Workers map[string]Worker `yaml:"workers"`
	Demo    Demo              `yaml:"demo"`
	HTTP    HTTP              `yaml:"http"`
	Console Console           `yaml:"console"`
	// Edge makes the node an edge site or the hub of a fleet of them.
	Edge   Edge   `yaml:"edge"`
	Memory Memory `yaml:"memory"`
	Log    Log    `yaml:"log"`
	// Archive moves closed aggregates out of the event log (archive.go).
	Archive Archive `yaml:"archive"`
}

// Memory bounds the node process's memory.
type Memory struct {
	// Limit is the node process's memory budget, the embedded nats-server's
	// included: the process's soft memory limit (Go's
	// debug.SetMemoryLimit) while the live heap leaves the collector room
	// under it, so the garbage the file store leaves behind (whole blocks
	// read to serve one message, held weakly) is collected before RSS
	// grows. When live data outgrows it (the server keeps each block's
	// subject index two minutes after the block's last read: a large store
	// read at random holds hundreds of megabytes live), the node raises
	// the soft limit to the live heap plus half of it, and says so, rather
	// than let the collector run without pause. 0: no limit (GOGC pacing
	// alone). A GOMEMLIMIT environment variable wins over it. 0 or at least
	// 64MiB. Default 512MiB. Applied by the esjet binary (run, bench) only:
	// a node embedded in another Go program leaves the process's limit to
	// it.
	Limit ByteSize `yaml:"limit"`
}

// Values of [NATS.Mode].
const (
	ModeEmbedded = "embedded"
	ModeExternal = "external"
)

// NATS says where the broker comes from: a nats-server started inside this process
// or an existing NATS cluster.
type NATS struct {
	// Mode is "embedded" (default) or "external". Only the section it names is used.
	Mode     string   `yaml:"mode"`
	Embedded Embedded `yaml:"embedded"`
	External External `yaml:"external"`
}

// Values of [Embedded.Sync].
const (
	SyncAlways   = "always"
	SyncInterval = "interval"
)

// ListenNone as a listen address disables the listener.
const ListenNone = "none"

// Embedded configures the in-process nats-server.
type Embedded struct {
	// DataDir holds the JetStream file store, relative to the working directory.
	// Created (0750) if missing. Default "data".
	DataDir string `yaml:"data_dir"`
	// Listen is the client host:port, or "none" for no TCP listener (in-process
	// clients only). Port 0 picks a free port. A host that is not loopback requires
	// Auth and TLS. Default "127.0.0.1:4222".
	Listen string `yaml:"listen"`
	// Sync is "always" (fsync every write; default) or "interval" (fsync every
	// SyncInterval: faster, but an OS crash or power loss can lose acknowledged writes).
	Sync string `yaml:"sync"`
	// SyncInterval is the fsync period when Sync is "interval". Default 2m.
	SyncInterval Duration `yaml:"sync_interval"`
	// MaxMemory limits the JetStream memory store; 0 means the server default.
	MaxMemory ByteSize `yaml:"max_memory"`
	// MaxStore limits the JetStream file store; 0 means the server default.
	MaxStore ByteSize `yaml:"max_store"`
	// ServerName names the server in monitoring and JetStream metadata. Default "esjet".
	ServerName string `yaml:"server_name"`
	// Auth is the one all-powerful user (or token) of the server when Users
	// is empty. With Users, the server knows only them (and the node, which
	// connects in-process as role node with a key made at start), and Auth
	// is what the CLI commands present: one of the users' name and plaintext
	// password.
	Auth Auth `yaml:"auth"`
	// Users are the server's users, each with a role (see [UserRoles] and
	// `esjet permissions`). Empty (default): no users; loopback with no
	// users is the zero-config default.
	Users []User `yaml:"users"`
	// AllowPlaintextPasswords accepts a Users password that is not a bcrypt
	// hash. Default false.
	AllowPlaintextPasswords bool `yaml:"allow_plaintext_passwords"`
	TLS                     TLS  `yaml:"tls"`
	// RequireClientCerts makes the TLS listener require a client
	// certificate signed by TLS.CAFile (mTLS). The esjet CLI presents
	// TLS.CertFile/KeyFile, which then need the clientAuth usage too.
	// Default false.
	RequireClientCerts bool `yaml:"require_client_certs"`
}

// Roles a [User] may have (package broker defines what each may do).
const (
	RoleNode     = "node"
	RoleClient   = "client"
	RoleReceiver = "receiver"
	RoleOperator = "operator"
	RoleAdmin    = "admin"
)

// UserRoles lists the roles.
var UserRoles = []string{RoleNode, RoleClient, RoleReceiver, RoleOperator, RoleAdmin}

// User is one user of the embedded server.
type User struct {
	// Name is the user name (password users) or a label (nkey users).
	Name string `yaml:"name"`
	// Password is a bcrypt hash ("$2a$…", from `nats server passwd`);
	// plaintext only with allow_plaintext_passwords. Set it or NKey.
	Password string `yaml:"password"`
	// NKey is the user's public nkey ("U…", from `nsc generate nkey --user`).
	NKey string `yaml:"nkey"`
	// Role is node, client, receiver, operator or admin.
	Role string `yaml:"role"`
	// Subject is the one subject a receiver serves (role receiver only).
	Subject string `yaml:"subject"`
	// Bucket is a receiver's idempotency KV bucket, if it keeps one.
	Bucket string `yaml:"bucket"`
}

// External configures the connection to an existing NATS cluster.
type External struct {
	// URLs are the servers to try, e.g. "nats://a:4222" (schemes nats, tls, ws, wss).
	// Required in external mode.
	URLs []string `yaml:"urls"`
	// CredentialsFile is a NATS .creds file (JWT + nkey seed); empty means none.
	CredentialsFile string `yaml:"credentials_file"`
	Auth            Auth   `yaml:"auth"`
	TLS             TLS    `yaml:"tls"`
	// ConnectTimeout bounds each connection attempt. Default 5s.
	ConnectTimeout Duration `yaml:"connect_timeout"`
	// AllowPlaintextAuth lets a password or token (Auth, or in a URL) go to a
	// host that is not loopback without TLS (a tls:// or wss:// URL, or
	// TLS.CAFile / TLS.CertFile). Default false: such a config is refused.
	AllowPlaintextAuth bool `yaml:"allow_plaintext_auth"`
}

// Auth is user/password or token authentication; all empty means none.
type Auth struct {
	User     string `yaml:"user"`
	Password string `yaml:"password"`
	Token    string `yaml:"token"`
}

// TLS names PEM files. CertFile and KeyFile go together; CAFile alone is enough for a
// client to verify a server with a private CA.
type TLS struct {
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
	CAFile   string `yaml:"ca_file"`
}

// Streams tunes the JetStream streams the node provisions.
type Streams struct {
	// Replicas is 1, 3 or 5; embedded mode requires 1. Default 0: the node
	// decides when it connects — 3 on a cluster of three or more servers,
	// else 1 (ReplicasAuto).
	Replicas int `yaml:"replicas"`
	// DuplicateWindow is the Nats-Msg-Id dedup window of EVENTS and DLQ: > 0
	// and ≤ OutboxMaxAge. Default 2m.
	DuplicateWindow Duration `yaml:"duplicate_window"`
	// OutboxDuplicateWindow is OUTBOX's dedup window: a command the relay
	// publishes again after a crash is dropped within it. Keep it well above
	// the relay's redelivery horizon (outbox.ack_wait); > 0 and ≤
	// OutboxMaxAge. Default 10m.
	OutboxDuplicateWindow Duration `yaml:"outbox_duplicate_window"`
	// OutboxMaxAge is how long OUTBOX keeps commands for audit. Default 168h (7 days).
	OutboxMaxAge Duration `yaml:"outbox_max_age"`
	// DLQSettledMaxAge is how long a dead letter that was retried or
	// discarded stays in the DLQ, whole (`esjet dlq show` still shows it),
	// before it expires; its audit record (who, when, what, why; no
	// payload) is kept. Open dead letters never expire. At least 1s.
	// Default 720h (30 days).
	DLQSettledMaxAge Duration `yaml:"dlq_settled_max_age"`
	// ReceiptsMaxAge is how long a finished command's receipt is kept
	// after its last write (done or failed): the receipt is what stops a
	// done command from running again, so it must outlive every way the
	// command can come back — at least OutboxMaxAge + ReceiptsMargin.
	// 0: kept forever. Default 0 (see docs/streams.md, "How long esjet
	// keeps what").
	ReceiptsMaxAge Duration `yaml:"receipts_max_age"`
	// UnservedViewsMaxAge is how long a view generation that no longer
	// serves queries is kept after a rebuild switched away from it (the
	// previous one keeps following the log, so `esjet projections switch`
	// can go back) before it stops and its bucket is deleted: a view is
	// rebuildable from EVENTS. 0: kept until a later rebuild takes its
	// bucket. Default 168h (7 days).
	UnservedViewsMaxAge Duration `yaml:"unserved_views_max_age"`
	// MaxMessageSize is the largest message (one decision) a stream accepts, between
	// 1KiB and 8MiB; the embedded server's max_payload is raised to match. Default 1MiB.
	MaxMessageSize ByteSize `yaml:"max_message_size"`
	// Compression is how the file store keeps EVENTS and OUTBOX blocks on
	// disk: "none" or "s2". Default "none": s2 takes a third of the disk,
	// but a read of one message decompresses its whole block (up to 8 MB),
	// which made cold loads of a large log cost milliseconds each. Changing
	// it on existing streams applies to blocks written after the server
	// restarts.
	Compression string `yaml:"compression"`
}

// ReplicasAuto is streams.replicas' default: the node picks the replicas
// when it connects — 3 when the server it reaches is one of a cluster of
// three or more, 1 otherwise (an embedded server, a single server, two).
const ReplicasAuto = 0

// ReceiptsMargin is how much longer than OUTBOX a receipt must be kept
// (streams.receipts_max_age): a command delivered just before OUTBOX ages
// it out still runs and reads its receipt, and servers' clocks differ.
const ReceiptsMargin = 24 * time.Hour

// Stream compression values.
const (
	CompressionS2   = "s2"
	CompressionNone = "none"
)

// Aggregates tunes the aggregate repository.
type Aggregates struct {
	// CacheSize is how many hot aggregates are kept in memory (LRU); 0
	// disables the cache. Default 10000.
	CacheSize int `yaml:"cache_size"`
	// CacheBytes also bounds the cache by the aggregates' estimated memory
	// (state as of the last snapshot plus the events folded since, recent
	// idempotency keys, outstanding commands): least recently used first
	// out. 0: by count only. Default 64MiB.
	CacheBytes ByteSize `yaml:"cache_bytes"`
	// SnapshotEvery writes a snapshot after that many events since the last
	// one; 0 disables snapshots. Default 100.
	SnapshotEvery int `yaml:"snapshot_every"`
	// SnapshotSpan also writes a snapshot when an aggregate's events since
	// its last one span more than this many messages of the log, so a cold
	// load of an aggregate whose events lie far apart reads only that much
	// of the log; 0: only SnapshotEvery counts. Default 10000.
	SnapshotSpan int `yaml:"snapshot_span"`
	// ConflictRetries is how often a command is decided again on the
	// reloaded tail after a version conflict before the request fails with
	// 409. Default 5.
	ConflictRetries int `yaml:"conflict_retries"`
	// IdempotencyHorizon is how long a request's Idempotency-Key answers its
	// retries with the first result. Default 24h.
	IdempotencyHorizon Duration `yaml:"idempotency_horizon"`
	// Raw configures the raw event-store API per aggregate type (a type not
	// registered in Go). Default empty: a raw append may record events but
	// issue no command; a command kind a raw type may issue must be listed
	// here. Set in the file only, not by environment.
	Raw map[string]RawType `yaml:"raw"`
}

// RawType is what appends to one raw aggregate type may do.
type RawType struct {
	// Commands are the command kinds its appends may issue; an append that
	// issues any other is refused (403) and writes nothing. Empty: none.
	Commands []string `yaml:"commands"`
	// Events declare, per event type, how its stored data is brought to the
	// current shape (rawschema.go). Empty: events are read as stored.
	Events map[string]RawEvent `yaml:"events"`
	// Personal marks the personal fields of its events and commands, by
	// event type or command kind: stored sealed under the data key of the
	// data subject named in member Subject (docs/personal-data.md).
	// Empty: nothing is personal.
	Personal map[string]PersonalFields `yaml:"personal"`
}

// PersonalFields are the personal members of one event type's data or one
// command kind's payload (top-level JSON members).
type PersonalFields struct {
	// Subject is the member holding the data subject's id (a string; it
	// may be one of Fields).
	Subject string `yaml:"subject"`
	// Fields are the members sealed under the subject's data key.
	Fields []string `yaml:"fields"`
}

// Projections tunes how the nodes that run the read models share their
// partitions: one owner each, holding a lease it renews.
type Projections struct {
	// LeaseTTL is how long a partition's lease outlives its owner's last
	// heartbeat: then another node may take the partition over, and status
	// shows the owner frozen (red). Shorter moves a dead node's partitions
	// sooner; longer rides out longer pauses (GC, a slow disk) without a
	// take-over. At least twice Heartbeat. Default 5s.
	LeaseTTL Duration `yaml:"lease_ttl"`
	// Heartbeat is how often an owner renews its leases and reads the
	// control record and the operators' requests (pause, rebuild, retry,
	// skip are acted on within it). At least 100ms. Default 1s.
	Heartbeat Duration `yaml:"heartbeat"`
}

// Outbox tunes the relay that carries recorded commands to OUTBOX.
type Outbox struct {
	// RelayBatch is the most decisions relayed together. Default 256.
	RelayBatch int `yaml:"relay_batch"`
	// FailoverAfter is how long the active relay may stop pulling before
	// another node's relay takes over. Default 5s.
	FailoverAfter Duration `yaml:"failover_after"`
	// AckWait is how long a decision handed to a relay may stay
	// unacknowledged before JetStream redelivers it. Default 10s.
	AckWait Duration `yaml:"ack_wait"`
}

// Values of [Worker.Target].
const (
	TargetNATS = "nats" // a NATS request to Subject
	TargetHTTP = "http" // an HTTP POST to URL
	TargetGo   = "go"   // a handler registered in Go (esjet.Options.Handlers)
)

// Worker configures one command kind's workers. Zero tunables mean their
// defaults ([DefaultWorker]).
type Worker struct {
	// Target is "nats", "http" or "go".
	Target string `yaml:"target"`
	// Subject is the NATS request subject (target nats).
	Subject string `yaml:"subject"`
	// URL receives the POST (target http).
	URL string `yaml:"url"`
	// Pool is this node's workers for the kind. Default 4.
	Pool int `yaml:"pool"`
	// AckWait is the lease on a delivered command, kept alive while the
	// handler runs. Default 30s.
	AckWait Duration `yaml:"ack_wait"`
	// Timeout cancels a handler. Default 30s.
	Timeout Duration `yaml:"timeout"`
	// MaxAttempts before the command is dead-lettered. Default 15: with the
	// default backoff a target may be down for about 8 minutes.
	MaxAttempts int `yaml:"max_attempts"`
	// BackoffInitial and BackoffMax shape retry delays (doubling, ±10%
	// jitter). Defaults 500ms and 1m.
	BackoffInitial Duration `yaml:"backoff_initial"`
	BackoffMax     Duration `yaml:"backoff_max"`
	// Rate limits the calls to the target, per second, across every node
	// serving the kind (a token bucket in KV <ns>_workers). 0: no limit.
	// Set it the same on every node.
	Rate float64 `yaml:"rate"`
	// Burst is how many calls above the rate may start at once after a
	// quiet spell: over any interval T at most burst + rate × T calls
	// start. Default 1 (only with rate).
	Burst int `yaml:"burst"`
	// ConcurrencyKey limits the calls in flight per key across every node
	// serving the kind: "aggregate_id" (the issuing aggregate's id) or a
	// payload field path ("booking_id", "booking.id"). Empty: no limit.
	ConcurrencyKey string `yaml:"concurrency_key"`
	// Concurrency is the most calls in flight for one key value. Default 1
	// (only with concurrency_key).
	Concurrency int `yaml:"concurrency"`
	// Schema is the newest schema version of the kind's payload this
	// node's target understands. A command of a newer one (a newer build's,
	// in a rolling upgrade) is left for a node that understands it,
	// counting no attempt. Default 1.
	Schema int `yaml:"schema"`
}

// Console configures the web console the node serves at /console on the
// HTTP listener (http.listen), under the HTTP listener's checks and, when
// http.auth is set, its roles (operator and admin see the console).
type Console struct {
	// AllowActions lets the console retry and discard dead letters (with
	// the checks and audit records of `esjet dlq`). With http.auth they
	// need the operator or admin role; without it, whoever reaches the
	// HTTP listener could act. Default false: the console only reads.
	AllowActions bool `yaml:"allow_actions"`
}

// Log configures the node's slog output.
type Log struct {
	// Level is debug, info (default), warn or error.
	Level string `yaml:"level"`
	// Format is text (default) or json.
	Format string `yaml:"format"`
}

// Default returns the defaults: an embedded server on 127.0.0.1:4222 with sync always,
// a "demo" namespace, R1 streams.
func Default() Config {
	return Config{
		Namespace: "demo",
		NATS: NATS{
			Mode: ModeEmbedded,
			Embedded: Embedded{
				DataDir:      "data",
				Listen:       "127.0.0.1:4222",
				Sync:         SyncAlways,
				SyncInterval: Duration(2 * time.Minute),
				ServerName:   "esjet",
				Users:        []User{},
			},
			External: External{
				URLs:           []string{},
				ConnectTimeout: Duration(5 * time.Second),
			},
		},
		Streams: Streams{
			Replicas:              ReplicasAuto,
			DuplicateWindow:       Duration(2 * time.Minute),
			OutboxDuplicateWindow: Duration(10 * time.Minute),
			OutboxMaxAge:          Duration(168 * time.Hour),
			DLQSettledMaxAge:      Duration(720 * time.Hour),
			ReceiptsMaxAge:        0,
			UnservedViewsMaxAge:   Duration(168 * time.Hour),
			MaxMessageSize:        MiB,
			Compression:           CompressionNone,
		},
		Archive: Archive{Every: Duration(24 * time.Hour)},
		Aggregates: Aggregates{
			CacheSize:          10_000,
			CacheBytes:         64 * MiB,
			SnapshotEvery:      100,
			SnapshotSpan:       10_000, // about one file store block (8 MB) of ~800-byte decisions
			ConflictRetries:    5,
			IdempotencyHorizon: Duration(24 * time.Hour),
			Raw:                map[string]RawType{},
		},
		Outbox: Outbox{
			RelayBatch:    256,
			FailoverAfter: Duration(5 * time.Second),
			AckWait:       Duration(10 * time.Second),
		},
		Projections: Projections{
			LeaseTTL:  Duration(5 * time.Second),
			Heartbeat: Duration(time.Second),
		},
		Workers: map[string]Worker{},
		Demo:    Demo{Services: true},
		HTTP: HTTP{Listen: "127.0.0.1:8080", AllowedHosts: []string{},
			Auth: HTTPAuth{Tokens: []HTTPToken{}, Certs: []HTTPCert{}}},
		Edge:   DefaultEdge(),
		Memory: Memory{Limit: 512 * MiB},
		Log:    Log{Level: "info", Format: "text"},
	}
}

// StreamPrefix is the upper-cased namespace that prefixes stream names ("DEMO" for
// DEMO_EVENTS).
func (c Config) StreamPrefix() string { return strings.ToUpper(c.Namespace) }

const redacted = "[redacted]"

// Redacted returns a copy of c safe to print: passwords, tokens and passwords inside
// URLs are replaced by "[redacted]" (empty ones stay empty, so the reader can see
// which are set).
func (c Config) Redacted() Config {
	redactAuth := func(a *Auth) {
		if a.Password != "" {
			a.Password = redacted
		}
		if a.Token != "" {
			a.Token = redacted
		}
	}
	redactAuth(&c.NATS.Embedded.Auth)
	if c.NATS.Embedded.Users != nil {
		users := make([]User, len(c.NATS.Embedded.Users))
		for i, u := range c.NATS.Embedded.Users {
			if u.Password != "" {
				u.Password = redacted
			}
			users[i] = u
		}
		c.NATS.Embedded.Users = users
	}
	redactAuth(&c.NATS.External.Auth)
	if c.NATS.External.URLs != nil {
		urls := make([]string, len(c.NATS.External.URLs))
		for i, raw := range c.NATS.External.URLs {
			urls[i] = RedactURL(raw)
		}
		c.NATS.External.URLs = urls
	}
	return c
}

// RedactURL returns raw with the password replaced by "[redacted]" (the
// user name kept), or a bare userinfo, which is a token, replaced whole.
func RedactURL(raw string) string {
	scheme := strings.Index(raw, "://")
	if scheme < 0 {
		return raw
	}
	rest := raw[scheme+3:]
	if end := strings.IndexAny(rest, "/?#"); end >= 0 {
		rest = rest[:end]
	}
	at := strings.LastIndex(rest, "@")
	if at < 0 {
		return raw
	}
	prefix, userinfo, tail := raw[:scheme+3], rest[:at], raw[scheme+3+at:]
	if user, _, ok := strings.Cut(userinfo, ":"); ok {
		return prefix + user + ":" + redacted + tail
	}
	return prefix + redacted + tail
}

// MinMemoryLimit is the smallest memory.limit other than 0.
const MinMemoryLimit = 64 * MiB
