package broker

import (
	"fmt"
	"slices"
	"strings"
)

// The accounts a namespace's users are placed in when NATS has users. An
// account is the only boundary the server keeps for its own writes: a stream
// stores whatever is published in its account on its subjects, including the
// server's answers to a request whose reply subject a user chose (measured
// here, nats-server 2.15: `$JS.API.INFO` asked with reply
// <ns>.outbox.<kind> stored the account info in OUTBOX; reply subjects are
// not checked against permissions) and the messages a stream it was allowed
// to create republishes, sources or mirrors. So only the node and admin
// share an account with esjet's streams; every other role reaches the node
// through service imports, whose replies the server carries back on its own
// reply subjects (_R_.…) into the caller's account.

// NamespaceAccount is the account of namespace ns's streams, buckets, node
// and admin users: ESJET_<NS>, JetStream on.
func NamespaceAccount(ns string) string { return "ESJET_" + strings.ToUpper(ns) }

// UsersAccount is the account of ns's clients and operators: no JetStream;
// it imports the node's API and, for operators, the read-only JetStream
// requests of the namespace account.
func UsersAccount(ns string) string { return NamespaceAccount(ns) + "_USERS" }

// ReceiverAccount is the account of receiver user: its own, with JetStream
// for its idempotency bucket; it exports its subject to the namespace
// account, whose node requests it.
func ReceiverAccount(ns, user string) string {
	return NamespaceAccount(ns) + "_RECV_" + strings.ToUpper(strings.NewReplacer("-", "_", ".", "_").Replace(user))
}

// RoleAccount is the account role's users of namespace ns belong to (user
// names the receiver's).
func RoleAccount(ns, role, user string) string {
	switch role {
	case RoleClient, RoleOperator:
		return UsersAccount(ns)
	case RoleReceiver:
		return ReceiverAccount(ns, user)
	}
	return NamespaceAccount(ns)
}

// Account is one account of a namespace's users: its users, whether it has
// JetStream, the services it exports and imports.
type Account struct {
	Name      string
	JetStream bool
	Users     []RoleUser
	Exports   []Export
	Imports   []Import
}

// Export is a service an account offers to others.
type Export struct {
	Subject string   `json:"service"`
	To      []string `json:"accounts"`
	// Stream marks a service that may answer with several messages (a
	// batched direct get, micro discovery): response_type stream.
	Stream bool `json:"response_stream,omitempty"`
}

// Import is a service an account uses from another.
type Import struct {
	Subject string `json:"service"`
	From    string `json:"account"`
}

// apiImports are what the users account imports from the namespace
// account: the API (clients and operators) and the read-only JetStream
// requests (operators only, by their permissions).
func apiExports(ns string) []Export {
	to := []string{UsersAccount(ns)}
	ex := []Export{{Subject: apiPrefix(ns) + ".>", To: to}, {Subject: "$SRV.>", To: to, Stream: true}}
	for _, s := range operatorReads {
		ex = append(ex, Export{Subject: s, To: to, Stream: strings.HasPrefix(s, "$JS.API.DIRECT.GET")})
	}
	return ex
}

// Accounts places users (every role's, of namespace ns) in their accounts
// and wires the imports between them: the users account imports the API
// and operator reads, the namespace account each receiver's subject. The
// namespace account comes first, then the users account (when there are
// clients or operators), then one account per receiver.
func Accounts(ns string, users []RoleUser) ([]Account, error) {
	nsAcc := Account{Name: NamespaceAccount(ns), JetStream: true}
	usersAcc := Account{Name: UsersAccount(ns)}
	var recv []Account
	seen := map[string]string{}
	for _, u := range users {
		if prev, ok := seen[u.Name]; ok {
			return nil, fmt.Errorf("user %q is listed twice (roles %s and %s): %w: one user, one role", u.Name, prev, u.Role, ErrRole)
		}
		seen[u.Name] = u.Role
		switch u.Role {
		case RoleClient, RoleOperator:
			usersAcc.Users = append(usersAcc.Users, u)
		case RoleReceiver:
			if u.Subject == "" {
				return nil, fmt.Errorf("receiver %q: %w: no subject", u.Name, ErrRole)
			}
			a := Account{Name: ReceiverAccount(ns, u.Name), JetStream: u.Bucket != "", Users: []RoleUser{u},
				Exports: []Export{{Subject: u.Subject, To: []string{nsAcc.Name}}}}
			if i := slices.IndexFunc(recv, func(r Account) bool { return r.Name == a.Name }); i >= 0 {
				return nil, fmt.Errorf("receivers %q and %q share account %s: %w: name them apart", recv[i].Users[0].Name, u.Name, a.Name, ErrRole)
			}
			for _, r := range recv {
				if r.Exports[0].Subject == u.Subject {
					return nil, fmt.Errorf("receivers %q and %q both serve %s: %w: one receiver account per subject (give the users one name)", r.Users[0].Name, u.Name, u.Subject, ErrRole)
				}
			}
			nsAcc.Imports = append(nsAcc.Imports, Import{Subject: u.Subject, From: a.Name})
			recv = append(recv, a)
		default:
			nsAcc.Users = append(nsAcc.Users, u)
		}
	}
	out := []Account{nsAcc}
	if len(usersAcc.Users) > 0 {
		out[0].Exports = apiExports(ns)
		for _, e := range out[0].Exports {
			usersAcc.Imports = append(usersAcc.Imports, Import{Subject: e.Subject, From: nsAcc.Name})
		}
		out = append(out, usersAcc)
	}
	return append(out, recv...), nil
}
