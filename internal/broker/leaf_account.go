package broker

import (
	"fmt"
	"slices"
	"strings"

	"github.com/esjet/esjet/config"
	"github.com/esjet/esjet/internal/wire"
)

// The hub's leaf link lives in an account of its own. nats-server checks a
// leaf message's subject against the leaf user's permissions but never its
// reply subject, and lets $JS.ACK.… through unchecked (leafnode.go
// leafMsgAllowed, v2.15.2): a site bound to the account of the hub's
// streams could ask its own outcome consumer's INFO with reply
// <ns>.outcome.<other site> (the hub's JetStream answered into OUTCOMES: a
// forged outcome), $KV.<ns>_receipts.<id> or <ns>.dlq.… So every site's
// leaf connection is bound to [LeafAccount], which has no JetStream and
// stores nothing, and exactly what sourcing and the outcome pull need
// crosses between it and the account of the hub's streams, by exports and
// imports:
//
//   - the site's outcome pull (site → hub): the hub's streams account
//     exports its sites' outcome consumers' CONSUMER.INFO, CONSUMER.MSG.NEXT
//     and acks, the leaf account imports them (a site addresses them as
//     $JS.<hub>.API.…, which the hub maps to $JS.API.… in the account of
//     every leaf connection);
//   - sourcing (hub → site) goes through a staging account per site,
//     [StagingAccount], below.
//
// A request crossing by a service import is answered on a reply subject the
// server makes (_R_.…) and carried back into the asker's account: whatever
// reply subject a site names, the answer lands in the leaf account.
//
// Sourcing cannot cross that way: a source reads each delivery's sequences
// from its own $JS.ACK.… reply, so the deliveries cross by a stream import,
// which keeps the reply subject the site sent. A stream that sources
// answers a flow control request, and a heartbeat that says its consumer is
// stalled, by publishing on the subject the delivery names, in the
// stream's own account (stream.go handleFlowControl,
// processStalledFlowControl, v2.15.2). Measured here: a process at a site
// that reads its source consumer's delivery subject had the hub put empty
// messages into its OUTCOMES and DLQ, and with reply
// $JS.API.STREAM.DELETE.<NS>_OUTCOMES had it delete the stream. So the
// streams that source a site live in an account of that site's own,
// [StagingAccount], with JetStream and nothing but that site's staging
// streams (<NS>_SITE_<SITE>_EVENTS and _OUTBOX, no subjects, no purge), and
// the hub's EVENTS and OUTBOX source those: a forged answer reaches only
// what the site sent anyway. The staging account exports to the streams
// account what the hub's node and its sources need (the staging streams'
// create, info and update, their source consumers, flow control replies)
// under [StagingAPIPrefix], and its deliveries under
// [StagingDeliverPrefix]; the hub's sources of staging streams are answered
// by the staging account's own JetStream, which no site reaches.

// StagingAccount is the hub's account that stages site's streams:
// ESJET_<NS>_SITE_<SITE>, with JetStream.
func StagingAccount(ns, site string) string {
	return NamespaceAccount(ns) + "_SITE_" + strings.ToUpper(site)
}

// StagingStreams are the streams of site's staging account: the site's
// EVENTS and the hub kinds of its OUTBOX, <NS>_SITE_<SITE>_EVENTS and
// <NS>_SITE_<SITE>_OUTBOX.
func StagingStreams(ns, site string) (events, outbox string) {
	p := strings.ToUpper(ns) + "_SITE_" + strings.ToUpper(site) + "_"
	return p + "EVENTS", p + "OUTBOX"
}

// StagingAPIPrefix is where the hub's streams account reaches the JetStream
// API of site's staging account (jetstream.NewWithAPIPrefix,
// ExternalStream.APIPrefix): esjet-edge.<ns>.stage.<site>.API. Only the
// staging streams' create, info and update and their consumers' create and
// delete are served there.
func StagingAPIPrefix(ns, site string) string { return "esjet-edge." + ns + ".stage." + site + ".API" }

// StagingDeliverPrefix is where the hub's sources of site's staging streams
// deliver: esjet-edge.<ns>.staged.<site>.
func StagingDeliverPrefix(ns, site string) string { return "esjet-edge." + ns + ".staged." + site }

// HubAPIPrefix is the JetStream API prefix a site pulls its outcomes from
// the hub on (jetstream.NewWithAPIPrefix): esjet-edge.<ns>.hub.API. Only
// its outcome consumer's CONSUMER.INFO and CONSUMER.MSG.NEXT are served
// there, by the leaf account's imports.
func HubAPIPrefix(ns string) string { return "esjet-edge." + ns + ".hub.API" }

// LeafAccount is the account of the hub's leaf users: ESJET_<NS>_LEAF, no
// JetStream.
func LeafAccount(ns string) string { return NamespaceAccount(ns) + "_LEAF" }

// globalAccount is nats-server's account of users that name none: the
// hub's streams account when the hub has no nats.embedded.users.
const globalAccount = "$G"

// leafRole names the leaf users in a printed config.
const leafRole = "leaf"

// WithLeafAccount adds the hub's leaf account, with its leaf users
// ([LeafUsers]), to accounts and wires it to the account of the hub's
// streams (added, as $G with JetStream, when accounts has no
// [NamespaceAccount]). passwords puts the leaf users' bcrypt hashes in;
// without, a printed config reads each from [PasswordVar]. accounts
// unchanged when cfg is not a hub.
func WithLeafAccount(accounts []Account, cfg config.Config, passwords bool) ([]Account, error) {
	users := LeafUsers(cfg)
	if users == nil {
		return accounts, nil
	}
	ns := cfg.Namespace
	out := slices.Clone(accounts)
	streamsName := NamespaceAccount(ns)
	i := slices.IndexFunc(out, func(a Account) bool { return a.Name == streamsName })
	if i < 0 {
		streamsName = globalAccount
		if i = slices.IndexFunc(out, func(a Account) bool { return a.Name == globalAccount }); i < 0 {
			out = append([]Account{{Name: globalAccount, JetStream: true}}, out...)
			i = 0
		}
	}
	leaf := Account{Name: LeafAccount(ns)}
	for _, u := range users {
		for _, a := range out {
			if slices.ContainsFunc(a.Users, func(r RoleUser) bool { return r.Name == u.Name }) {
				return nil, fmt.Errorf("edge leaf user %q is also a user of nats.embedded: give the site another user name", u.Name)
			}
		}
		ru := RoleUser{Name: u.Name, Role: leafRole, Permissions: u.Permissions, NoPassword: u.Password == "",
			ConnectionTypes: []string{"LEAFNODE", "LEAFNODE_WS"}}
		if passwords {
			ru.Password = u.Password
		}
		leaf.Users = append(leaf.Users, ru)
	}
	streams := &out[i]
	toStreams, toLeaf := []string{streams.Name}, []string{leaf.Name}
	export := func(from, to *Account, e Export) {
		from.Exports = append(from.Exports, e)
		to.Imports = append(to.Imports, Import{Subject: e.Subject, From: from.Name, Messages: e.Messages})
	}
	// The outcome pull's requests: asked in the leaf account on
	// HubAPIPrefix, not $JS.<hub>.API (the hub maps that to $JS.API in a
	// leaf connection's account, where the server's own import answers
	// every request of an account without JetStream as well: two answers).
	pull := func(verb string, stream bool) {
		subj := "$JS.API." + verb
		streams.Exports = append(streams.Exports, Export{Subject: subj, To: toLeaf, Stream: stream})
		leaf.Imports = append(leaf.Imports, Import{Subject: subj, From: streams.Name, To: HubAPIPrefix(ns) + "." + verb})
	}
	names := wire.NamesFor(ns)
	outcomes, events, outbox := names.Outcomes(), names.Events, names.Outbox
	var stagings []*Account
	for _, s := range cfg.Edge.Sites {
		c := OutcomeConsumer(s)
		pull("CONSUMER.INFO."+outcomes+"."+c, false)
		pull("CONSUMER.MSG.NEXT."+outcomes+"."+c, true)
		export(streams, &leaf, Export{Subject: "$JS.ACK." + outcomes + "." + c + ".>", To: toLeaf})
		// the ack subject's form with domain and account hash (ADR-15)
		export(streams, &leaf, Export{Subject: "$JS.ACK." + cfg.Edge.HubDomain + ".*." + outcomes + "." + c + ".>", To: toLeaf})

		// Sourcing: the site's staging account sources the site through
		// the leaf account; the streams account sources the staging one.
		stage := &Account{Name: StagingAccount(ns, s), JetStream: true}
		toStage := []string{stage.Name}
		api := "$JS." + s + ".API."
		for _, st := range []string{events, outbox} {
			for _, verb := range []string{"CONSUMER.CREATE." + st, "CONSUMER.CREATE." + st + ".>", "CONSUMER.DELETE." + st + ".*"} {
				export(&leaf, stage, Export{Subject: api + verb, To: toStage})
			}
			// the hub's site monitor reads the site's streams too
			info := Export{Subject: api + "STREAM.INFO." + st, To: []string{stage.Name, streams.Name}}
			leaf.Exports = append(leaf.Exports, info)
			stage.Imports = append(stage.Imports, Import{Subject: info.Subject, From: leaf.Name})
			streams.Imports = append(streams.Imports, Import{Subject: info.Subject, From: leaf.Name})
		}
		export(&leaf, stage, Export{Subject: SourceDeliverPrefix(ns, s) + ".>", To: toStage, Messages: true})
		for _, st := range []string{events, outbox} {
			stage.Imports = append(stage.Imports, Import{Subject: "$JS.FC." + st + ".>", From: leaf.Name})
		}
		sEvents, sOutbox := StagingStreams(ns, s)
		prefix := StagingAPIPrefix(ns, s) + "."
		for _, st := range []string{sEvents, sOutbox} {
			for _, verb := range []string{"STREAM.CREATE." + st, "STREAM.UPDATE." + st, "STREAM.INFO." + st,
				"CONSUMER.CREATE." + st, "CONSUMER.CREATE." + st + ".>", "CONSUMER.DELETE." + st + ".*"} {
				stage.Exports = append(stage.Exports, Export{Subject: "$JS.API." + verb, To: toStreams})
				streams.Imports = append(streams.Imports, Import{Subject: "$JS.API." + verb, From: stage.Name, To: prefix + verb})
			}
			export(stage, streams, Export{Subject: "$JS.FC." + st + ".>", To: toStreams})
		}
		export(stage, streams, Export{Subject: StagingDeliverPrefix(ns, s) + ".>", To: toStreams, Messages: true})
		stagings = append(stagings, stage)
	}
	var stageNames []string
	for _, st := range stagings {
		stageNames = append(stageNames, st.Name)
	}
	for _, st := range []string{events, outbox} {
		leaf.Exports = append(leaf.Exports, Export{Subject: "$JS.FC." + st + ".>", To: stageNames})
	}
	out = append(out, leaf)
	for _, st := range stagings {
		out = append(out, *st)
	}
	return out, nil
}
