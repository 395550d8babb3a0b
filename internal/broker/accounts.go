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

// ClientsAccount is the account of ns's clients: no JetStream; it imports
// the node's API.
func ClientsAccount(ns string) string { return NamespaceAccount(ns) + "_CLIENTS" }

// OperatorsAccount is the account of ns's operators: no JetStream; it
// imports the node's API and the read-only JetStream requests of the
// namespace account. Apart from the clients: a request's reply subject
// names where the answer goes, so a user could send the node's answers into
// another user's inbox in its own account (nothing stores them, but the
// operators' inboxes are theirs alone).
func OperatorsAccount(ns string) string { return NamespaceAccount(ns) + "_OPS" }

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
	case RoleClient:
		return ClientsAccount(ns)
	case RoleOperator:
		return OperatorsAccount(ns)
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

// Export is a service an account offers to others (or, with Messages, a
// stream of messages).
type Export struct {
	Subject string   `json:"service"`
	To      []string `json:"accounts"`
	// Stream marks a service that may answer with several messages (a
	// batched direct get, micro discovery): response_type stream.
	Stream bool `json:"response_stream,omitempty"`
	// Messages makes it a stream export: the messages published on
	// Subject in the account, delivered to the importers' subscribers
	// (no replies carried back).
	Messages bool `json:"messages,omitempty"`
}

// Import is a service an account uses from another (or, with Messages, a
// stream export it subscribes to).
type Import struct {
	Subject  string `json:"service"`
	From     string `json:"account"`
	Messages bool   `json:"messages,omitempty"`
	// To is the subject the importer asks on, when not Subject.
	To string `json:"to,omitempty"`
}

// apiExports are what the namespace account offers to the accounts named:
// the API to the clients and operators (each by its users' permissions: no
// client asks on an ops subject), micro discovery, and the read-only
// JetStream requests to the operators only.
func apiExports(ns string, clients, operators bool) []Export {
	var both []string
	if clients {
		both = append(both, ClientsAccount(ns))
	}
	if operators {
		both = append(both, OperatorsAccount(ns))
	}
	ex := []Export{{Subject: apiPrefix(ns) + ".>", To: both}, {Subject: "$SRV.>", To: both, Stream: true}}
	if !operators {
		return ex
	}
	for _, s := range operatorReads {
		ex = append(ex, Export{Subject: s, To: []string{OperatorsAccount(ns)}, Stream: strings.HasPrefix(s, "$JS.API.DIRECT.GET")})
	}
	return ex
}

// Accounts places users (every role's, of namespace ns) in their accounts
// and wires the imports between them: the clients' and operators' accounts
// import the API (the operators' the read-only JetStream requests too), the
// namespace account each receiver's subject. The namespace account comes
// first, then the clients' and the operators' (each when it has users), then
// one account per receiver.
func Accounts(ns string, users []RoleUser) ([]Account, error) {
	nsAcc := Account{Name: NamespaceAccount(ns), JetStream: true}
	clients := Account{Name: ClientsAccount(ns)}
	operators := Account{Name: OperatorsAccount(ns)}
	var recv []Account
	seen := map[string]string{}
	for _, u := range users {
		if prev, ok := seen[u.Name]; ok {
			return nil, fmt.Errorf("user %q is listed twice (roles %s and %s): %w: one user, one role", u.Name, prev, u.Role, ErrRole)
		}
		seen[u.Name] = u.Role
		switch u.Role {
		case RoleClient:
			clients.Users = append(clients.Users, u)
		case RoleOperator:
			operators.Users = append(operators.Users, u)
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
	if len(clients.Users)+len(operators.Users) > 0 {
		out[0].Exports = apiExports(ns, len(clients.Users) > 0, len(operators.Users) > 0)
		for _, e := range out[0].Exports {
			for _, to := range e.To {
				imp := Import{Subject: e.Subject, From: nsAcc.Name}
				if to == clients.Name {
					clients.Imports = append(clients.Imports, imp)
				} else {
					operators.Imports = append(operators.Imports, imp)
				}
			}
		}
		for _, a := range []Account{clients, operators} {
			if len(a.Users) > 0 {
				out = append(out, a)
			}
		}
	}
	return append(out, recv...), nil
}
