package broker

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// RoleUser is one user of a role: its name, the role, its permissions, and
// how it authenticates. A printed config reads the password of a user with
// neither Password nor NKey from the environment ([PasswordVar]).
type RoleUser struct {
	Name        string
	Role        string
	Permissions *server.Permissions
	// Subject and Bucket are a receiver's (its account exports Subject).
	Subject, Bucket string
	// Password is a bcrypt hash (or, where allowed, a plaintext password);
	// NKey a public user nkey. Both empty: $<PasswordVar>.
	Password, NKey string
	// NoPassword is a user that presents its name only (a loopback
	// fleet's site); ConnectionTypes, when set, are the only connections
	// it may make (allowed_connection_types).
	NoPassword      bool
	ConnectionTypes []string
}

// PasswordVar is the environment variable a printed server config reads
// user's password from (nats-server resolves $NAME in its config from the
// environment): ESJET_<USER>_PASSWORD with the user's name upper-cased and
// '-' as '_'.
func PasswordVar(user string) string {
	return "ESJET_" + strings.ToUpper(strings.NewReplacer("-", "_", ".", "_").Replace(user)) + "_PASSWORD"
}

// ServerAccounts renders accounts as a nats-server config accounts block:
// each account's users with their permissions, JetStream where the account
// keeps streams, and the service exports and imports between them. A user
// without a password or nkey reads its password from the environment
// variable [PasswordVar] names: set it to a bcrypt hash (`nats server
// passwd`) before the server starts.
func ServerAccounts(accounts []Account) string {
	var b strings.Builder
	b.WriteString("accounts {\n")
	for _, a := range accounts {
		fmt.Fprintf(&b, "  %s: {\n", strconv.Quote(a.Name))
		if a.JetStream {
			b.WriteString("    jetstream: enabled\n")
		}
		b.WriteString("    users: [\n")
		for _, u := range a.Users {
			cred := "password: $" + PasswordVar(u.Name)
			switch {
			case u.NKey != "":
				cred = "nkey: " + strconv.Quote(u.NKey)
			case u.Password != "":
				cred = "password: " + strconv.Quote(u.Password)
			}
			user := "user: " + strconv.Quote(u.Name) + "\n        "
			if u.NKey != "" {
				user = ""
			}
			if u.NoPassword {
				user, cred = "user: "+strconv.Quote(u.Name), ""
			}
			if len(u.ConnectionTypes) > 0 {
				cred += "\n        allowed_connection_types: " + quoteList(u.ConnectionTypes)
			}
			fmt.Fprintf(&b, "      # role %s\n      {\n        %s%s\n        permissions: {\n", u.Role, user, cred)
			writeSubjectPerm(&b, "publish", u.Permissions.Publish)
			writeSubjectPerm(&b, "subscribe", u.Permissions.Subscribe)
			if r := u.Permissions.Response; r != nil {
				fmt.Fprintf(&b, "          allow_responses: { max: %d, expires: %s }\n", r.MaxMsgs, strconv.Quote(r.Expires.String()))
			}
			b.WriteString("        }\n      }\n")
		}
		b.WriteString("    ]\n")
		if len(a.Exports) > 0 {
			b.WriteString("    exports: [\n")
			for _, e := range a.Exports {
				to := ""
				if len(e.To) > 0 {
					to = ", accounts: " + quoteList(e.To)
				}
				if e.Messages {
					fmt.Fprintf(&b, "      { stream: %s%s }\n", strconv.Quote(e.Subject), to)
					continue
				}
				rt := ""
				if e.Stream {
					rt = ", response_type: stream"
				}
				fmt.Fprintf(&b, "      { service: %s%s%s }\n", strconv.Quote(e.Subject), to, rt)
			}
			b.WriteString("    ]\n")
		}
		if len(a.Imports) > 0 {
			b.WriteString("    imports: [\n")
			for _, i := range a.Imports {
				if i.Messages {
					fmt.Fprintf(&b, "      { stream: { account: %s, subject: %s } }\n", strconv.Quote(i.From), strconv.Quote(i.Subject))
					continue
				}
				to := ""
				if i.To != "" {
					to = ", to: " + strconv.Quote(i.To)
				}
				fmt.Fprintf(&b, "      { service: { account: %s, subject: %s }%s }\n", strconv.Quote(i.From), strconv.Quote(i.Subject), to)
			}
			b.WriteString("    ]\n")
		}
		b.WriteString("  }\n")
	}
	b.WriteString("}\n")
	return b.String()
}

func writeSubjectPerm(b *strings.Builder, name string, p *server.SubjectPermission) {
	if p == nil {
		return
	}
	fmt.Fprintf(b, "          %s: {\n", name)
	if p.Allow != nil {
		fmt.Fprintf(b, "            allow: %s\n", quoteList(p.Allow))
	}
	if p.Deny != nil {
		fmt.Fprintf(b, "            deny: %s\n", quoteList(p.Deny))
	}
	b.WriteString("          }\n")
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
