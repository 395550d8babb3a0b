package wire

// The API's subjects. The node serves the namespace's command and query API
// under esjet.<ns> (a NATS micro service, in one queue group only the node
// may join); an operator's DLQ and projection requests go under
// esjet.<ns>.ops.<user>, the user being the one subject token its NATS
// permissions allow.

// APIPrefix is where the namespace's API listens: esjet.<ns>.
func APIPrefix(ns string) string { return "esjet." + ns }

// APIQueue is the queue group of the namespace's API service: esjet-<ns>.
func APIQueue(ns string) string { return "esjet-" + ns }

// OpsPrefix is where user's operator requests go: esjet.<ns>.ops.<user>.
// The API (esjet.<ns>.>) routes the word "ops" there.
func OpsPrefix(ns, user string) string { return APIPrefix(ns) + ".ops." + user }

// ActionSubject is the subject of DLQ action (retry, discard) of user:
// esjet.<ns>.ops.<user>.dlq.<action>.
func ActionSubject(ns, user, action string) string { return OpsPrefix(ns, user) + ".dlq." + action }

// EdgeSubjectRoot starts every subject of the link between an edge site and
// its hub (esjet-edge.<ns>.…): none of the namespace's own.
const EdgeSubjectRoot = "esjet-edge."

// Headers of the API's requests, beside [HeaderIdempotencyKey],
// [HeaderCorrelationID], [HeaderCausationID] and [HeaderTraceParent]: where
// a history or log read starts and how much it returns (HTTP says the same
// with ?after=N&limit=N).
const (
	HeaderAfterVersion  = "Esjet-After-Version"  // history of one aggregate: after this version
	HeaderAfterPosition = "Esjet-After-Position" // the whole log: after this global position
	HeaderLimit         = "Esjet-Limit"
)
