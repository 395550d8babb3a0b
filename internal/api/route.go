package api

import (
	"fmt"
	"strings"
)

// Operations a request can name.
const (
	opSend      = "send"
	opState     = "state"
	opEvents    = "events"
	opRawAppend = "raw_append"
	opRawEvents = "raw_events"
	opTypes     = "types"
	opOps       = "ops"
	opLog       = "log"
	opViewGet   = "view_get"
	opViewsLs   = "views"
	opViewOps   = "view_ops"
)

// Micro endpoint names (besides one per aggregate type, named after it).
const (
	endpointTypes     = "types"
	endpointRawAppend = "raw_append"
	endpointRawEvents = "raw_events"
	endpointUnrouted  = "unrouted"
	endpointOps       = "ops"
	endpointLog       = "log"
	endpointViews     = "views"
)

// NATSRoutes lists the micro service's subjects, for the message of a
// request to a subject of the wrong shape.
var NATSRoutes = []string{
	"<type>.<id>.<command>", "<type>.<id>.state", "<type>.<id>.events",
	"raw.append.<type>.<id>", "raw.events.<type>.<id>", "types",
	"ops.<user>.dlq.<retry|discard>", "ops.<user>.projections.<action>", "ops.<user>.workers.<ls|pause|resume>", "ops.<user>.personal.<forget|rotate>", "log", "multi", "views", "views.<name>.<get|list|parked>",
}

// route is what a subject asks for.
type route struct {
	op       string
	typ, id  string
	kind     string // opSend only
	user     string // opOps only: the user token
	action   string // opOps only: the dlq action, workers.<action> or personal.<action>
	view     string // opViewGet: the view's name (action: get, list, parked)
	endpoint string // the endpoint its stats are counted under
}

// routeSubject reads a request subject under prefix (esjet.<ns>) the way
// the HTTP gateway reads a path, so both surfaces answer alike: the type is
// the first token, the operation or command the last, and everything
// between is the id — an id with a dot is then refused as an invalid id
// (400), as HTTP refuses /v1/trip/a.b, instead of going unanswered. A
// subject of no known shape is answered 404 no_route.
func routeSubject(prefix, subject string) (route, error) {
	rest, ok := strings.CutPrefix(subject, prefix+".")
	toks := strings.Split(rest, ".")
	switch {
	case !ok:
	case len(toks) == 1 && toks[0] == "types":
		return route{op: opTypes, endpoint: endpointTypes}, nil
	case len(toks) == 1 && toks[0] == "multi":
		return route{op: opMulti, endpoint: endpointMulti}, nil
	case len(toks) == 1 && toks[0] == "log":
		return route{op: opLog, endpoint: endpointLog}, nil
	case toks[0] == "views":
		if r, ok := viewRoute(toks); ok {
			return r, nil
		}
	case len(toks) == 4 && toks[0] == "ops" && toks[2] == "projections":
		return route{op: opViewOps, user: toks[1], action: toks[3], endpoint: endpointOps}, nil
	case len(toks) == 4 && toks[0] == "ops" && toks[2] == "dlq":
		return route{op: opOps, user: toks[1], action: toks[3], endpoint: endpointOps}, nil
	case len(toks) == 4 && toks[0] == "ops" && toks[2] == "workers":
		return route{op: opOps, user: toks[1], action: "workers." + toks[3], endpoint: endpointOps}, nil
	case len(toks) == 4 && toks[0] == "ops" && toks[2] == "personal":
		return route{op: opOps, user: toks[1], action: "personal." + toks[3], endpoint: endpointOps}, nil
	case toks[0] == "ops":
		// No other shape under ops: not an aggregate type either.
	case len(toks) >= 4 && toks[0] == "raw" && toks[1] == "append":
		return route{op: opRawAppend, typ: toks[2], id: strings.Join(toks[3:], "."), endpoint: endpointRawAppend}, nil
	case len(toks) >= 4 && toks[0] == "raw" && toks[1] == "events":
		return route{op: opRawEvents, typ: toks[2], id: strings.Join(toks[3:], "."), endpoint: endpointRawEvents}, nil
	case len(toks) >= 3:
		r := route{typ: toks[0], id: strings.Join(toks[1:len(toks)-1], "."), endpoint: toks[0]}
		switch last := toks[len(toks)-1]; last {
		case "state":
			r.op = opState
		case "events":
			r.op = opEvents
		default:
			r.op, r.kind = opSend, last
		}
		return r, nil
	}
	return route{endpoint: endpointUnrouted}, &Error{Status: 404, Code: CodeNoRoute,
		Message: fmt.Sprintf("no route for subject %s; the subjects are %s.%s", subject, prefix, strings.Join(NATSRoutes, ", "+prefix+"."))}
}
