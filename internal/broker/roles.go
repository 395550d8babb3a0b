package broker

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/esjet/esjet/config"
	"github.com/esjet/esjet/internal/wire"
	"github.com/nats-io/nats-server/v2/server"
)

// Role names (config's, where a user is given one): what a NATS user may do
// to one namespace. Each is a least privilege permission set derived from
// the namespace (see [RolePermissions]).
const (
	// RoleNode runs the API, the relay, the workers and projections: it owns
	// the namespace's streams and buckets. It may create them when missing,
	// never update, delete or purge them (an edge hub updates its own
	// sources), in the namespace account ([NamespaceAccount]).
	RoleNode = config.RoleNode
	// RoleClient calls the command and query API (esjet.<ns>.>) and nothing
	// else, from its own account ([ClientsAccount]).
	RoleClient = config.RoleClient
	// RoleReceiver serves one target subject and replies to what it
	// receives, from an account of its own ([ReceiverAccount]).
	RoleReceiver = config.RoleReceiver
	// RoleOperator reads everything (streams, consumers, state and history
	// through the API) and asks the node to retry or discard dead letters on
	// its own ops subject, esjet.<ns>.ops.<user>.> (the node writes OUTBOX
	// and the audit record naming that user; see [wire.OpsPrefix]), from its own
	// account ([OperatorsAccount]): it creates nothing in JetStream.
	RoleOperator = config.RoleOperator
	// RoleAdmin provisions (esjet provision): everything, including updating,
	// deleting and purging streams.
	RoleAdmin = config.RoleAdmin
)

// Roles lists every role, in the order `esjet permissions` prints them
// (config.UserRoles, which names them).
var Roles = config.UserRoles

// RoleSpec is what the permission sets derive from.
type RoleSpec struct {
	// Namespace is the namespace served (config.Config.Namespace).
	Namespace string
	// Targets are the subjects the node's workers send commands to (workers
	// with target nats, the demo's demo.svc.>). The node may request them,
	// and serve them in-process (the demo services). Wildcards allowed.
	Targets []string
	// Buckets are further KV buckets the node writes: the receiver buckets
	// of services it runs in-process (the demo's demo_services_receipts).
	Buckets []string
	// Subject is the one subject a receiver serves (RoleReceiver).
	Subject string
	// Bucket is the receiver's idempotency KV bucket (receiver.Config.Bucket);
	// "" gives the receiver no JetStream access at all.
	Bucket string
	// Views are the names of the read models the node runs with the
	// built-in store (projection.Definition.Name): the node owns their
	// buckets ([wire.ViewBuckets]), the operator reads them, and no other role
	// touches them. Every projection shares the control bucket
	// <ns>_projections, granted whenever Views is not empty.
	Views []string
	// User is the operator's NATS user (its name, or its nkey for an nkey
	// user): the one ops subject token it may publish under, which the
	// node's DLQ audit records name (RoleOperator; required there).
	User string
}

// responseTTL bounds how long a role may answer a request it received (its
// allow_responses): longer than any worker's timeout a receiver serves.
const responseTTL = 10 * time.Minute

// APIQueue is the queue group of the namespace's API service: only the node
// may subscribe in it.
func APIQueue(ns string) string { return wire.APIQueue(ns) }

// NodeInboxPrefix is the node's reply subject prefix (nats.CustomInboxPrefix),
// outside _INBOX.> where the other roles receive their replies: a client
// subscribed to _INBOX.> does not see the replies to the node's requests
// (JetStream reads of events, snapshots and receipts).
func NodeInboxPrefix(ns string) string { return "_INBOX_" + ns + "_node" }

// apiPrefix is [wire.APIPrefix].
//
// TODO(issue 27): leaf.go and accounts.go call it; once issue 26's rewrite
// lands they call wire.APIPrefix and this goes.
func apiPrefix(ns string) string { return wire.APIPrefix(ns) }

// viewStreams are the streams of spec's views' buckets (none without
// views).
func viewStreams(spec RoleSpec) []string {
	var s []string
	for _, v := range spec.Views {
		for _, b := range wire.ViewBuckets(spec.Namespace, v) {
			s = append(s, wire.KVStream(b))
		}
	}
	return s
}

// readModelStreams are the control bucket's stream and the views' (none
// without views).
func readModelStreams(spec RoleSpec) []string {
	if len(spec.Views) == 0 {
		return nil
	}
	return append([]string{wire.KVStream(wire.ProjectionsBucket(spec.Namespace))}, viewStreams(spec)...)
}

// kvSubjects are the subjects of the buckets whose streams are streams.
func kvSubjects(streams []string) []string {
	out := make([]string, len(streams))
	for i, s := range streams {
		out[i] = wire.KVFilter(strings.TrimPrefix(s, wire.KVStreamPrefix))
	}
	return out
}

// nodeDenied are the destructive requests denied to the node (deleting a
// stream or a message, purging; only admin may): all of them but purging its views' buckets (a rebuild empties the bucket it takes, a
// reset the serving one), which the node may; so purges are denied stream
// by stream for every other stream it owns (a deny overrides any allow).
//
// Deleting a message is denied stream by stream too: the node deletes
// (securely erases) messages of its keys bucket, and only there.
func nodeDenied(spec RoleSpec, owned []string) []string {
	deny := []string{"$JS.API.STREAM.DELETE.*", "$JS.API.ACCOUNT.PURGE.*"}
	for _, s := range append(slices.Clone(owned), readModelStreams(spec)...) {
		deny = append(deny, "$JS.API.STREAM.MSG.DELETE."+s)
	}
	if len(spec.Views) == 0 {
		return append(deny, "$JS.API.STREAM.PURGE.*")
	}
	for _, s := range owned {
		deny = append(deny, "$JS.API.STREAM.PURGE."+s)
	}
	return append(deny, "$JS.API.STREAM.PURGE."+wire.KVStream(wire.ProjectionsBucket(spec.Namespace)), "$JS.API.STREAM.PURGE."+keysStream(spec.Namespace))
}

// nodeStreams are the streams the node owns, KV buckets by their streams.
func nodeStreams(ns string, buckets ...string) []string {
	n := wire.NamesFor(ns)
	s := []string{n.Events, n.Outbox, n.DLQ, wire.KVStream(n.Snapshots), wire.KVStream(n.Receipts), wire.KVStream(n.Workers)}
	for _, b := range buckets {
		s = append(s, wire.KVStream(b))
	}
	return s
}

// streamReads are the JetStream API requests that read stream s without a
// consumer of one's own.
func streamReads(s string) []string {
	return []string{
		"$JS.API.STREAM.INFO." + s, "$JS.API.STREAM.MSG.GET." + s,
		"$JS.API.DIRECT.GET." + s, "$JS.API.DIRECT.GET." + s + ".>",
		"$JS.API.CONSUMER.INFO." + s + ".*", "$JS.API.CONSUMER.NAMES." + s, "$JS.API.CONSUMER.LIST." + s,
	}
}

// streamOwner are the requests that create (when missing) and consume
// stream s, short of updating, deleting or purging it: an update can set
// limits that delete history even where purge is denied, so only admin
// updates (esjet provision), and a node checks what it finds
// (streams.Ensure).
func streamOwner(s string) []string {
	return append(streamReads(s),
		"$JS.API.STREAM.CREATE."+s,
		"$JS.API.CONSUMER.CREATE."+s, "$JS.API.CONSUMER.CREATE."+s+".>", "$JS.API.CONSUMER.DURABLE.CREATE."+s+".*",
		"$JS.API.CONSUMER.DELETE."+s+".*", "$JS.API.CONSUMER.MSG.NEXT."+s+".*", "$JS.API.CONSUMER.UNPIN."+s+".*",
		"$JS.ACK."+s+".>",
	)
}

// jsAccount are the account-wide read requests every JetStream user makes.
var jsAccount = []string{"$JS.API.INFO", "$JS.API.STREAM.NAMES", "$JS.API.STREAM.LIST"}

// InboxPrefix is the reply subject prefix of user (nats.CustomInboxPrefix,
// nats --inbox-prefix): _INBOX_<user>. Each role's user may subscribe to
// its own replies only, so no user reads another's (a shared _INBOX.> let an
// operator read a client's state replies).
func InboxPrefix(user string) string { return "_INBOX_" + user }

// validUserToken reports whether user can be one subject token (its inbox
// prefix and, for an operator, its ops subject name it).
func validUserToken(user string) bool {
	return user != "" && !strings.ContainsAny(user, ".*> \t\r\n")
}

// operatorReads are the JetStream API requests an operator makes to read the
// namespace account's streams and consumers: info, messages and direct gets,
// never a consumer of its own (a push consumer's deliveries are published by
// the server in the namespace account, where a deliver subject such as
// <ns>.outbox.<kind> would be stored). The namespace account exports exactly
// these to the operators' account ([Accounts]).
var operatorReads = []string{
	"$JS.API.INFO", "$JS.API.STREAM.NAMES", "$JS.API.STREAM.LIST",
	"$JS.API.STREAM.INFO.*", "$JS.API.STREAM.MSG.GET.*", "$JS.API.DIRECT.GET.>",
	"$JS.API.CONSUMER.INFO.*.*", "$JS.API.CONSUMER.NAMES.*", "$JS.API.CONSUMER.LIST.*",
}

// RolePermissions returns the NATS permissions of role for spec, inside the
// account the role's users belong to ([RoleAccount]). The same set goes into
// a server's accounts block ([ServerAccounts]), a user JWT (see
// [JWTPermissions]) and the embedded server's users.
//
// Only the node and admin share the namespace account with the streams:
// every request made in an account is answered in it, and a reply subject is
// not checked against the requester's permissions, so a user there who may
// ask anything (even $JS.API.INFO) could have the server or the node publish
// the answer to <ns>.outbox.<kind>. Clients and operators live in accounts
// of their own kind and receivers each in one of its own, reaching the node's
// API (and an operator the read-only JetStream API) through imports, whose
// replies travel back through the server.
func RolePermissions(role string, spec RoleSpec) (*server.Permissions, error) {
	ns := spec.Namespace
	if ns == "" {
		return nil, fmt.Errorf("permissions of role %q: %w: no namespace", role, ErrRole)
	}
	api := apiPrefix(ns)
	allResponses := &server.ResponsePermission{MaxMsgs: 1, Expires: responseTTL}
	switch role {
	case RoleNode:
		n := wire.NamesFor(ns)
		pub := []string{n.EventsFilter(), n.OutboxFilter(), n.ScheduleFilter(), n.DLQFilter(),
			wire.KVFilter(n.Snapshots), wire.KVFilter(n.Receipts), wire.KVFilter(n.Workers), "$SRV.>",
			// Asked once at start: whether the server has users, and so
			// checked an operator's ops subject (the DLQ audit's "nats user").
			UserInfoSubject}
		for _, b := range spec.Buckets {
			pub = append(pub, wire.KVFilter(b))
		}
		pub = append(pub, jsAccount...)
		owned := nodeStreams(ns, spec.Buckets...)
		for _, s := range owned {
			pub = append(pub, streamOwner(s)...)
		}
		// Read models: the control bucket and each view's buckets, which
		// a rebuild or a reset may empty.
		rm := readModelStreams(spec)
		pub = append(pub, kvSubjects(rm)...)
		for _, s := range rm {
			pub = append(pub, streamOwner(s)...)
		}
		for _, s := range viewStreams(spec) {
			pub = append(pub, "$JS.API.STREAM.PURGE."+s)
		}
		pub = append(pub, nodeKeys(ns)...)
		// The archive (<ns>_archive): a history read of an archived
		// aggregate reads its object. Read only: the admin's archive job
		// writes it (and purges EVENTS).
		archive := wire.ObjStream(wire.ArchiveBucket(ns))
		pub = append(pub, streamReads(archive)...)
		pub = append(pub, "$JS.API.CONSUMER.CREATE."+archive+".>", "$JS.API.CONSUMER.DELETE."+archive+".*")
		pub = append(pub, spec.Targets...)
		sub := []string{NodeInboxPrefix(ns) + ".>", api + ".> " + APIQueue(ns), "$SRV.>"}
		sub = append(sub, spec.Targets...)
		return &server.Permissions{
			Publish:   &server.SubjectPermission{Allow: pub, Deny: nodeDenied(spec, owned)},
			Subscribe: &server.SubjectPermission{Allow: sub},
			Response:  allResponses,
		}, nil
	case RoleClient:
		if !validUserToken(spec.User) {
			return nil, fmt.Errorf("permissions of role client: %w: user %q is not one subject token (its replies come on %s.>; name the user without '.', '*', '>' or spaces)", ErrRole, spec.User, InboxPrefix(spec.User))
		}
		// The API only (views are read through it, as the node serves
		// them); the clients' account has no JetStream and sees nothing of
		// the namespace account but the API.
		return &server.Permissions{
			Publish:   &server.SubjectPermission{Allow: []string{api + ".>", "$SRV.>"}, Deny: []string{api + ".ops.>"}},
			Subscribe: &server.SubjectPermission{Allow: []string{InboxPrefix(spec.User) + ".>"}},
		}, nil
	case RoleOperator:
		if !validUserToken(spec.User) {
			return nil, fmt.Errorf("permissions of role operator: %w: user %q is not one subject token (its ops subject is %s.ops.<user>.>; name the user without '.', '*', '>' or spaces)", ErrRole, spec.User, api)
		}
		pub := []string{api + ".*.*.state", api + ".*.*.events", api + ".types", api + ".raw.events.*.*", api + ".log", "$SRV.>", UserInfoSubject}
		// The views, read through the node (esjet projections ls|status|parked,
		// GET-like queries).
		pub = append(pub, api+".views", api+".views.>")
		pub = append(pub, operatorReads...)
		// Retrying and discarding a dead letter: a request to the node on
		// this user's ops subject only, so the node's audit record can name
		// the user (the subject token) and no operator can name another.
		pub = append(pub, wire.OpsPrefix(ns, spec.User)+".>")
		return &server.Permissions{
			Publish:   &server.SubjectPermission{Allow: pub, Deny: operatorKeysDenied(ns)},
			Subscribe: &server.SubjectPermission{Allow: []string{InboxPrefix(spec.User) + ".>"}},
		}, nil
	case RoleReceiver:
		if spec.Subject == "" {
			return nil, fmt.Errorf("permissions of role receiver: %w: no subject (the one target subject it serves)", ErrRole)
		}
		if !validUserToken(spec.User) {
			return nil, fmt.Errorf("permissions of role receiver: %w: user %q is not one subject token (its replies come on %s.>; name the user without '.', '*', '>' or spaces)", ErrRole, spec.User, InboxPrefix(spec.User))
		}
		if err := receiverSubject(ns, spec.Subject); err != nil {
			return nil, fmt.Errorf("permissions of role receiver: %w", err)
		}
		p := &server.Permissions{
			Subscribe: &server.SubjectPermission{Allow: []string{spec.Subject}},
			Response:  allResponses,
		}
		if spec.Bucket == "" {
			p.Publish = &server.SubjectPermission{Deny: []string{">"}}
			return p, nil
		}
		if b := spec.Bucket; wire.IsNodeBucket(ns, b) {
			return nil, fmt.Errorf("permissions of role receiver: %w: bucket %q is the node's own (namespace %s keeps its snapshots, receipts and read models in %s_*); name the receiver's idempotency bucket otherwise, e.g. billing_receipts", ErrRole, b, ns, ns)
		}
		// Its bucket lives in the receiver's own account: whatever the
		// receiver does to that stream stays in that account.
		s := wire.KVStream(spec.Bucket)
		pub := append(slices.Clone(jsAccount), wire.KVFilter(spec.Bucket),
			"$JS.API.STREAM.CREATE."+s, "$JS.API.STREAM.UPDATE."+s)
		pub = append(pub, streamReads(s)...)
		p.Publish = &server.SubjectPermission{Allow: pub}
		p.Subscribe.Allow = append(p.Subscribe.Allow, InboxPrefix(spec.User)+".>")
		return p, nil
	case RoleAdmin:
		return &server.Permissions{
			Publish:   &server.SubjectPermission{Allow: []string{">"}},
			Subscribe: &server.SubjectPermission{Allow: []string{">"}},
		}, nil
	}
	return nil, fmt.Errorf("permissions of role %q: %w: use %s", role, ErrRole, strings.Join(Roles, ", "))
}

// receiverSubject refuses a receiver subject that is not one literal
// subject of the receiver's own: its account exports it to the namespace
// account, whose node's publishes and requests on it then reach the
// receiver (which may answer them), so it may overlap nothing esjet sends
// or serves — the namespace's streams, the API, the JetStream and system
// subjects, the inboxes, the edge link.
func receiverSubject(ns, subject string) error {
	if strings.ContainsAny(subject, "*> \t\r\n") || subject == "" || strings.HasPrefix(subject, ".") || strings.HasSuffix(subject, ".") || strings.Contains(subject, "..") {
		return fmt.Errorf("%w: subject %q is not one literal subject (no wildcards, spaces or empty tokens): a receiver serves exactly one", ErrRole, subject)
	}
	for _, p := range []string{ns + ".", wire.APIPrefix(ns) + ".", wire.EdgeSubjectRoot, "$", "_INBOX", "_R_."} {
		if strings.HasPrefix(subject, p) {
			return fmt.Errorf("%w: subject %q is under %s, which esjet uses itself: the node's own messages there would reach the receiver; give the service a subject of its own, e.g. billing.charge", ErrRole, subject, p)
		}
	}
	return nil
}
