package broker

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// RoleUser is one user of a role: its name, the role, and its permissions.
type RoleUser struct {
	Name        string
	Role        string
	Permissions *server.Permissions
}

// PasswordVar is the environment variable a printed server config reads
// user's password from (nats-server resolves $NAME in its config from the
// environment): ESJET_<USER>_PASSWORD with the user's name upper-cased and
// '-' as '_'.
func PasswordVar(user string) string {
	return "ESJET_" + strings.ToUpper(strings.NewReplacer("-", "_", ".", "_").Replace(user)) + "_PASSWORD"
}

// ServerAuthorization renders users as a nats-server config authorization
// block. Each password is read from the environment variable [PasswordVar]
// names: set it to a bcrypt hash (`nats server passwd`) before the server
// starts.
func ServerAuthorization(users []RoleUser) string {
	var b strings.Builder
	b.WriteString("authorization {\n  users = [\n")
	for _, u := range users {
		fmt.Fprintf(&b, "    # role %s\n    {\n      user: %s\n      password: $%s\n      permissions: {\n", u.Role, strconv.Quote(u.Name), PasswordVar(u.Name))
		writeSubjectPerm(&b, "publish", u.Permissions.Publish)
		writeSubjectPerm(&b, "subscribe", u.Permissions.Subscribe)
		if r := u.Permissions.Response; r != nil {
			fmt.Fprintf(&b, "        allow_responses: { max: %d, expires: %s }\n", r.MaxMsgs, strconv.Quote(r.Expires.String()))
		}
		b.WriteString("      }\n    }\n")
	}
	b.WriteString("  ]\n}\n")
	return b.String()
}

func writeSubjectPerm(b *strings.Builder, name string, p *server.SubjectPermission) {
	if p == nil {
		return
	}
	fmt.Fprintf(b, "        %s: {\n", name)
	if p.Allow != nil {
		fmt.Fprintf(b, "          allow: %s\n", quoteList(p.Allow))
	}
	if p.Deny != nil {
		fmt.Fprintf(b, "          deny: %s\n", quoteList(p.Deny))
	}
	b.WriteString("        }\n")
}

func quoteList(l []string) string {
	q := make([]string, len(l))
	for i, s := range l {
		q[i] = strconv.Quote(s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// JWTPermissions is the permissions part of a NATS user JWT (the
// nats-io/jwt v2 Permissions shape): what to put in an account's user
// claims, e.g. with nsc edit user --allow-pub … or an auth callout.
type JWTPermissions struct {
	Pub  JWTPermission `json:"pub"`
	Sub  JWTPermission `json:"sub"`
	Resp *JWTResponse  `json:"resp,omitempty"`
}

// JWTPermission is one direction's allow and deny lists.
type JWTPermission struct {
	Allow []string `json:"allow,omitempty"`
	Deny  []string `json:"deny,omitempty"`
}

// JWTResponse is allow_responses: replies to at most Max messages received,
// within TTL (nanoseconds, as jwt encodes a time.Duration).
type JWTResponse struct {
	Max int           `json:"max"`
	TTL time.Duration `json:"ttl"`
}

// ToJWT converts server permissions to the JWT shape.
func ToJWT(p *server.Permissions) JWTPermissions {
	var j JWTPermissions
	if p.Publish != nil {
		j.Pub = JWTPermission{Allow: p.Publish.Allow, Deny: p.Publish.Deny}
	}
	if p.Subscribe != nil {
		j.Sub = JWTPermission{Allow: p.Subscribe.Allow, Deny: p.Subscribe.Deny}
	}
	if p.Response != nil {
		j.Resp = &JWTResponse{Max: p.Response.MaxMsgs, TTL: p.Response.Expires}
	}
	return j
}
