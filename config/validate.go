package config

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// FieldError is one invalid setting.
type FieldError struct {
	Path   string // yaml path, e.g. "nats.embedded.sync"
	Value  any    // the offending value; nil when the problem is a missing value
	Reason string // what would be valid, or what to do
}

func (e *FieldError) Error() string {
	if e.Value == nil {
		return e.Path + ": " + e.Reason
	}
	v := fmt.Sprintf("%v", e.Value)
	if s, ok := e.Value.(string); ok {
		v = strconv.Quote(s)
	} else if l, ok := e.Value.([]string); ok {
		v = fmt.Sprintf("%q", l)
	}
	return fmt.Sprintf("%s: %s is not valid: %s", e.Path, v, e.Reason)
}

var namespacePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,31}$`)

// Validate reports every problem in c, joined with errors.Join; each is a
// *[FieldError]. It returns nil if c is usable.
var kindPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)

func (c *Config) Validate() error { return c.validate(&validator{}) }

// ValidateTool is [Config.Validate] for a tool that reaches a node (esjet
// sites, events, streams…) rather than runs one: it also takes a fleet's
// shared file, whose edge block serves every process and whose edge.role
// each node adds itself (ESJET_EDGE_ROLE), where a node without a role
// would refuse the edge settings as having no effect.
func (c *Config) ValidateTool() error { return c.validate(&validator{tool: true}) }

func (c *Config) validate(v *validator) error {
	if !namespacePattern.MatchString(c.Namespace) {
		v.add("namespace", c.Namespace, "use 1-32 characters of a-z, 0-9, '_' and '-', starting with a letter or digit (it becomes a subject token and a stream name prefix)")
	} else if n := c.Namespace; strings.HasSuffix(n, "_clients") || strings.HasSuffix(n, "_ops") || strings.HasSuffix(n, "_leaf") || strings.Contains(n, "_recv_") || strings.Contains(n, "_site_") {
		// The roles' accounts are ESJET_<NS>, ESJET_<NS>_CLIENTS, _OPS,
		// _LEAF and _RECV_<user>: such a namespace's own account would be
		// another namespace's clients', operators' or receiver's.
		v.add("namespace", n, "may not end in _clients, _ops or _leaf nor contain _recv_ or _site_: the NATS accounts of another namespace's roles have those names; use '-' instead")
	}
	if b := c.Demo.Build; b != "" && b != DemoBuildNext {
		v.add("demo.build", b, "leave it empty for today's trip, or \"next\" for its next shape (docs/schema-evolution.md)")
	}
	c.NATS.validate(v, c.Streams.Replicas)
	c.Streams.validate(v)
	a := c.Aggregates
	if a.CacheSize < 0 {
		v.add("aggregates.cache_size", a.CacheSize, "must be 0 (no cache) or a positive count")
	}
	if a.CacheBytes < 0 {
		v.add("aggregates.cache_bytes", a.CacheBytes, "must be 0 (bounded by count only) or a size, e.g. 64MiB")
	}
	if a.SnapshotEvery < 0 {
		v.add("aggregates.snapshot_every", a.SnapshotEvery, "must be 0 (no snapshots) or a positive event count")
	}
	if a.SnapshotSpan < 0 {
		v.add("aggregates.snapshot_span", a.SnapshotSpan, "must be 0 (snapshot by event count only) or a positive count of log messages, e.g. 10000")
	}
	if a.ConflictRetries < 0 || a.ConflictRetries > 100 {
		v.add("aggregates.conflict_retries", a.ConflictRetries, "use 0 to 100")
	}
	if a.IdempotencyHorizon <= 0 {
		v.add("aggregates.idempotency_horizon", a.IdempotencyHorizon, "must be greater than 0, e.g. 24h")
	}
	a.validateRaw(v)
	c.Archive.validate(v)
	if l := c.Memory.Limit; l != 0 && l < MinMemoryLimit {
		v.add("memory.limit", l, "use 0 (no limit) or at least 64MiB: below that the garbage collector would run all the time")
	}
	o := c.Outbox
	if o.RelayBatch < 1 || o.RelayBatch > 10_000 {
		v.add("outbox.relay_batch", o.RelayBatch, "use 1 to 10000")
	}
	if o.FailoverAfter < Duration(2*time.Second) {
		v.add("outbox.failover_after", o.FailoverAfter, "must be at least 2s (the relay renews its pull every failover_after/2, at least every second)")
	}
	if o.AckWait < Duration(time.Second) {
		v.add("outbox.ack_wait", o.AckWait, "must be at least 1s")
	} else if c.Streams.OutboxDuplicateWindow > 0 && c.Streams.OutboxDuplicateWindow < 2*o.AckWait {
		v.add("streams.outbox_duplicate_window", c.Streams.OutboxDuplicateWindow, fmt.Sprintf("must be at least twice outbox.ack_wait (%s), so a redelivered decision's commands are still recognised as duplicates", o.AckWait))
	}
	if p := c.Projections; p.Heartbeat < Duration(100*time.Millisecond) {
		v.add("projections.heartbeat", p.Heartbeat, "must be at least 100ms (an owner renews its leases that often), e.g. 1s")
	} else if p.LeaseTTL < 2*p.Heartbeat {
		v.add("projections.lease_ttl", p.LeaseTTL, fmt.Sprintf("must be at least twice projections.heartbeat (%s): a lease that lapses between two renewals passes its partition to another node while its owner runs; e.g. 5s", p.Heartbeat))
	}
	c.validateRetryHorizon(v, "", Worker{})
	for kind, w := range c.Workers {
		if w.MaxAttempts >= 0 && w.BackoffInitial >= 0 && w.BackoffMax >= 0 && w.Timeout >= 0 {
			c.validateRetryHorizon(v, "workers."+kind, w)
		}
		// A worker that crashes after writing a dead letter is redelivered
		// after its ack_wait; the DLQ must still drop the second write.
		if aw := w.AckWait; aw > 0 && c.Streams.DuplicateWindow > 0 && c.Streams.DuplicateWindow < 2*aw {
			v.add("streams.duplicate_window", c.Streams.DuplicateWindow, fmt.Sprintf("must be at least twice workers.%s.ack_wait (%s), so a dead letter written twice by a redelivered worker is dropped", kind, aw))
		}
		path := "workers." + kind
		if !kindPattern.MatchString(kind) {
			v.add(path, kind, "a command kind is 1-128 characters of A-Z a-z 0-9 _ -")
		}
		switch w.Target {
		case TargetNATS:
			if w.Subject == "" || strings.ContainsAny(w.Subject, " \t*>") {
				v.add(path+".subject", w.Subject, "a NATS target needs a literal subject, e.g. billing.charge")
			}
		case TargetHTTP:
			if u, err := url.Parse(w.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				v.add(path+".url", w.URL, "an HTTP target needs an http:// or https:// URL")
			}
		case TargetGo:
		default:
			v.add(path+".target", w.Target, `use "nats", "http" or "go"`)
		}
		if w.Pool < 0 || w.Pool > 1000 {
			v.add(path+".pool", w.Pool, "use 0 (default 4) to 1000")
		}
		if w.MaxAttempts < 0 {
			v.add(path+".max_attempts", w.MaxAttempts, "use 0 (default 15) or more")
		}
		for name, d := range map[string]Duration{"ack_wait": w.AckWait, "timeout": w.Timeout, "backoff_initial": w.BackoffInitial, "backoff_max": w.BackoffMax} {
			if d < 0 {
				v.add(path+"."+name, d, "must not be negative (0 means the default)")
			}
		}
		if w.AckWait > 0 && w.AckWait < Duration(time.Second) {
			v.add(path+".ack_wait", w.AckWait, "must be at least 1s")
		}
		// Past backoff_max the delay stops doubling, so a larger first
		// delay is cut to it: the file would not say what the workers do.
		// Only a backoff_initial the file sets: a backoff_max below the
		// default first delay just starts the delays at it.
		if d := w.WithDefaults(); w.BackoffInitial > 0 && w.BackoffMax >= 0 && d.BackoffInitial > d.BackoffMax {
			which := "backoff_max"
			if w.BackoffMax == 0 {
				which = "the default backoff_max"
			}
			v.add(path+".backoff_initial", d.BackoffInitial, fmt.Sprintf("must be at most %s (%s): the first retry delay doubles up to it; lower backoff_initial or raise backoff_max", which, d.BackoffMax))
		}
		validateFlow(v, path, w)
		validateKeyLimit(v, path, w)
	}
	c.HTTP.validate(v)
	c.validateEdge(v)
	if c.HTTP.MetricsListen != "" {
		v.listen("http.metrics_listen", c.HTTP.MetricsListen)
	}
	v.oneOf("log.level", c.Log.Level, "debug", "info", "warn", "error")
	v.oneOf("log.format", c.Log.Format, "text", "json")
	return errors.Join(v.errs...)
}

func (n *NATS) validate(v *validator, replicas int) {
	v.oneOf("nats.mode", n.Mode, ModeEmbedded, ModeExternal)

	e := &n.Embedded
	if e.DataDir == "" && n.Mode == ModeEmbedded {
		v.add("nats.embedded.data_dir", nil, "must not be empty: set a directory for the JetStream file store")
	}
	v.oneOf("nats.embedded.sync", e.Sync, SyncAlways, SyncInterval)
	if e.Sync == SyncInterval && e.SyncInterval <= 0 {
		v.add("nats.embedded.sync_interval", e.SyncInterval, "must be greater than 0 when sync is \"interval\"")
	}
	if e.MaxMemory < 0 {
		v.add("nats.embedded.max_memory", e.MaxMemory, "must be 0 (server default) or a positive size")
	}
	if e.MaxStore < 0 {
		v.add("nats.embedded.max_store", e.MaxStore, "must be 0 (server default) or a positive size")
	}
	if e.ServerName == "" || strings.ContainsAny(e.ServerName, " \t\r\n") {
		v.add("nats.embedded.server_name", e.ServerName, "use a non-empty name without spaces")
	}
	v.auth("nats.embedded.auth", e.Auth)
	e.validateUsers(v)
	v.tls("nats.embedded.tls", e.TLS)
	if e.RequireClientCerts && (e.TLS.CAFile == "" || e.TLS.CertFile == "") {
		v.add("nats.embedded.require_client_certs", true, "needs nats.embedded.tls cert_file, key_file and ca_file (the CA that signs the client certificates)")
	}
	if host, ok := v.listen("nats.embedded.listen", e.Listen); ok && n.Mode == ModeEmbedded && e.Listen != ListenNone && !isLoopback(host) {
		var missing []string
		if !e.Auth.set() && len(e.Users) == 0 {
			missing = append(missing, "auth")
		}
		if e.TLS.CertFile == "" || e.TLS.KeyFile == "" {
			missing = append(missing, "TLS")
		}
		if len(missing) > 0 {
			v.add("nats.embedded.listen", e.Listen, fmt.Sprintf(
				"listening on %s without %s would expose the event log to the network; set nats.embedded.users (or auth) and nats.embedded.tls, or listen on 127.0.0.1",
				e.Listen, strings.Join(missing, " and ")))
		}
	}
	if n.Mode == ModeEmbedded && (replicas == 3 || replicas == 5) {
		v.add("streams.replicas", replicas, "a single embedded server cannot hold more than 1 replica; use 1, or nats.mode \"external\" with a cluster")
	}

	x := &n.External
	if len(x.URLs) == 0 && n.Mode == ModeExternal {
		v.add("nats.external.urls", nil, "external mode needs at least one server URL, e.g. nats://127.0.0.1:4222")
	}
	for i, raw := range x.URLs {
		u, err := url.Parse(raw)
		if err != nil || u.Host == "" {
			v.add(fmt.Sprintf("nats.external.urls[%d]", i), RedactURL(raw), "use a URL like nats://host:4222")
			continue
		}
		switch u.Scheme {
		case "nats", "tls", "ws", "wss":
		default:
			v.add(fmt.Sprintf("nats.external.urls[%d]", i), RedactURL(raw), "use the scheme nats, tls, ws or wss")
		}
	}
	v.auth("nats.external.auth", x.Auth)
	v.tls("nats.external.tls", x.TLS)
	if n.Mode == ModeExternal && !x.AllowPlaintextAuth && x.TLS.CAFile == "" && x.TLS.CertFile == "" {
		x.refusePlaintextSecrets(v)
	}
	if x.ConnectTimeout <= 0 {
		v.add("nats.external.connect_timeout", x.ConnectTimeout, "must be greater than 0, e.g. 5s")
	}
}

func (s *Streams) validate(v *validator) {
	if s.Replicas != ReplicasAuto && s.Replicas != 1 && s.Replicas != 3 && s.Replicas != 5 {
		v.add("streams.replicas", s.Replicas, "use 1, 3 or 5 (or 0: 3 on a cluster of three or more servers, else 1)")
	}
	if s.DuplicateWindow <= 0 {
		v.add("streams.duplicate_window", s.DuplicateWindow, "must be greater than 0, e.g. 2m")
	}
	if s.OutboxDuplicateWindow <= 0 {
		v.add("streams.outbox_duplicate_window", s.OutboxDuplicateWindow, "must be greater than 0, e.g. 10m")
	} else if s.OutboxMaxAge > 0 && s.OutboxMaxAge < s.OutboxDuplicateWindow {
		v.add("streams.outbox_max_age", s.OutboxMaxAge, fmt.Sprintf("must be at least streams.outbox_duplicate_window (%s)", s.OutboxDuplicateWindow))
	}
	if s.OutboxMaxAge <= 0 {
		v.add("streams.outbox_max_age", s.OutboxMaxAge, "must be greater than 0, e.g. 168h")
	} else if s.DuplicateWindow > 0 && s.OutboxMaxAge < s.DuplicateWindow {
		v.add("streams.outbox_max_age", s.OutboxMaxAge, fmt.Sprintf("must be at least streams.duplicate_window (%s)", s.DuplicateWindow))
	}
	if s.DLQSettledMaxAge < Duration(time.Second) {
		v.add("streams.dlq_settled_max_age", s.DLQSettledMaxAge, "must be at least 1s (JetStream's shortest message TTL), e.g. 720h")
	}
	if s.ReceiptsMaxAge < 0 {
		v.add("streams.receipts_max_age", s.ReceiptsMaxAge, "use 0 (kept forever) or an age such as 2160h")
	} else if s.ReceiptsMaxAge > 0 && s.OutboxMaxAge > 0 && s.ReceiptsMaxAge < s.OutboxMaxAge+Duration(ReceiptsMargin) {
		v.add("streams.receipts_max_age", s.ReceiptsMaxAge, fmt.Sprintf(
			"must be 0 (kept forever) or at least streams.outbox_max_age + %s (%s): a command OUTBOX still holds can be delivered again, and without its receipt a done command would run twice",
			Duration(ReceiptsMargin), s.OutboxMaxAge+Duration(ReceiptsMargin)))
	}
	if s.UnservedViewsMaxAge < 0 {
		v.add("streams.unserved_views_max_age", s.UnservedViewsMaxAge, "use 0 (kept until the next rebuild takes its bucket) or an age such as 168h")
	}
	if s.MaxMessageSize < KiB || s.MaxMessageSize > 8*MiB {
		v.add("streams.max_message_size", s.MaxMessageSize, "use a size between 1KiB and 8MiB")
	}
	if s.Compression != CompressionS2 && s.Compression != CompressionNone {
		v.add("streams.compression", s.Compression, "use s2 or none")
	}
}

type validator struct {
	errs []error
	tool bool // ValidateTool: an edge block without a role is a fleet file
}

func (v *validator) add(path string, value any, reason string) {
	v.errs = append(v.errs, &FieldError{Path: path, Value: value, Reason: reason})
}

func (v *validator) oneOf(path, value string, valid ...string) {
	for _, ok := range valid {
		if value == ok {
			return
		}
	}
	quoted := make([]string, len(valid))
	for i, s := range valid {
		quoted[i] = strconv.Quote(s)
	}
	reason := "use " + strings.Join(quoted[:len(quoted)-1], ", ") + " or " + quoted[len(quoted)-1]
	v.add(path, value, reason)
}

// listen checks a "none" or host:port address and returns its host.
func (v *validator) listen(path, addr string) (host string, ok bool) {
	if addr == ListenNone {
		return "", true
	}
	host, port, err := net.SplitHostPort(addr)
	if err == nil {
		var n int
		n, err = strconv.Atoi(port)
		if err == nil && (n < 0 || n > 65535) {
			err = errors.New("port out of range")
		}
	}
	if err != nil {
		v.add(path, addr, "use host:port with a port from 0 to 65535 (0 picks a free port), or \"none\"")
		return "", false
	}
	return host, true
}

func (v *validator) auth(path string, a Auth) {
	if (a.User == "") != (a.Password == "") {
		v.add(path, nil, "user and password go together: set both or neither")
	}
	if a.Token != "" && a.User != "" {
		v.add(path, nil, "use either a token or user and password, not both")
	}
}

func (v *validator) tls(path string, t TLS) {
	if (t.CertFile == "") != (t.KeyFile == "") {
		v.add(path, nil, "cert_file and key_file go together: set both or neither")
	}
}

func (a Auth) set() bool { return (a.User != "" && a.Password != "") || a.Token != "" }

func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// apiRouteWords are the words the API routes on where an aggregate type
// goes (internal/api.RouteWords; internal/api's tests hold the two lists
// together: config imports nothing of esjet).
var apiRouteWords = []string{"raw", "types", "ops", "state", "events", "log", "views", "multi"}

// validateRaw checks aggregates.raw: type names and command kinds are
// subject tokens, each kind listed once.
func (a Aggregates) validateRaw(v *validator) {
	for _, typ := range slices.Sorted(maps.Keys(a.Raw)) {
		field := "aggregates.raw." + typ
		if !kindPattern.MatchString(typ) {
			v.add("aggregates.raw", typ, "an aggregate type is 1-128 characters of A-Z, a-z, 0-9, '_' and '-'")
			continue
		}
		if slices.Contains(apiRouteWords, typ) {
			v.add("aggregates.raw", typ, fmt.Sprintf("is one of the API's route words (%s): its events could not be read back where a type goes (esjet.<ns>.%s.<id>.state, /v1/%s/<id>); name the type otherwise",
				strings.Join(apiRouteWords, ", "), typ, typ))
			continue
		}
		seen := map[string]bool{}
		for _, kind := range a.Raw[typ].Commands {
			switch {
			case !kindPattern.MatchString(kind):
				v.add(field+".commands", kind, "a command kind is 1-128 characters of A-Z, a-z, 0-9, '_' and '-'")
			case seen[kind]:
				v.add(field+".commands", kind, "listed twice; list each kind once")
			}
			seen[kind] = true
		}
		a.Raw[typ].validateEvents(v, field)
		for _, kind := range slices.Sorted(maps.Keys(a.Raw[typ].Personal)) {
			pf := a.Raw[typ].Personal[kind]
			f := field + ".personal." + kind
			if pf.Subject == "" {
				v.add(f+".subject", "", "name the member holding the data subject's id, e.g. traveler")
			}
			if len(pf.Fields) == 0 {
				v.add(f+".fields", "", "list the personal members, e.g. [traveler, phone]")
			}
		}
	}
}

var bcryptPattern = regexp.MustCompile(`^\$2[abxy]\$\d{2}\$.+`)

// validateUsers checks nats.embedded.users: each a name, a bcrypt hash or
// an nkey, a role, a receiver's subject.
func (e *Embedded) validateUsers(v *validator) {
	if len(e.Users) > 0 && e.Auth.Token != "" {
		v.add("nats.embedded.auth.token", redacted, "a token cannot be combined with nats.embedded.users: give the CLI a user's name and password in auth.user and auth.password")
	}
	names := map[string]bool{}
	for i, u := range e.Users {
		path := fmt.Sprintf("nats.embedded.users[%d]", i)
		if u.Name == "" || strings.ContainsAny(u.Name, " \t\r\n") {
			v.add(path+".name", u.Name, "give each user a name without spaces")
		} else if names[u.Name] {
			v.add(path+".name", u.Name, "listed twice; give each user its own name")
		}
		names[u.Name] = true
		switch {
		case (u.Password == "") == (u.NKey == ""):
			v.add(path, nil, "set either password (a bcrypt hash) or nkey (a public user key)")
		case u.NKey != "" && (len(u.NKey) != 56 || u.NKey[0] != 'U'):
			v.add(path+".nkey", u.NKey, "use a public user nkey: 56 characters starting with U (nsc generate nkey --user)")
		case u.Password != "" && !bcryptPattern.MatchString(u.Password) && !e.AllowPlaintextPasswords:
			v.add(path+".password", redacted, "is not a bcrypt hash: store `nats server passwd` output (\"$2a$11$…\"), or set nats.embedded.allow_plaintext_passwords: true")
		}
		v.oneOf(path+".role", u.Role, UserRoles...)
		if u.Role == RoleReceiver && (u.Subject == "" || strings.ContainsAny(u.Subject, " \t*>")) {
			v.add(path+".subject", u.Subject, "a receiver serves one literal subject, e.g. billing.charge")
		}
		if u.Role != RoleReceiver && (u.Subject != "" || u.Bucket != "") {
			v.add(path+".subject", u.Subject, "subject and bucket are for role receiver only")
		}
	}
}

// refusePlaintextSecrets refuses a password or token bound for a host
// that is not loopback over a URL without TLS.
func (x *External) refusePlaintextSecrets(v *validator) {
	for i, raw := range x.URLs {
		u, err := url.Parse(raw)
		if err != nil || u.Host == "" || u.Scheme == "tls" || u.Scheme == "wss" || isLoopback(u.Hostname()) {
			continue
		}
		if x.Auth.Password == "" && x.Auth.Token == "" && u.User == nil {
			continue
		}
		v.add(fmt.Sprintf("nats.external.urls[%d]", i), RedactURL(raw), fmt.Sprintf(
			"a password or token would travel unencrypted to %s: use a tls:// URL (or nats.external.tls.ca_file), a credentials_file, or set nats.external.allow_plaintext_auth: true on a trusted network",
			u.Hostname()))
	}
}
