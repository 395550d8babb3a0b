package config

// Demo configures the trip-booking demo.
type Demo struct {
	// Services runs the demo's budget and supplier services inside the node,
	// and `esjet run` routes the trip's commands that workers leaves out to
	// them. With false, `esjet demo-services` beside the node answers
	// demo.svc.>, and the trip's commands still go there unless workers
	// routes any of them (then it routes all it wants this node to serve).
	// Default true.
	Services bool `yaml:"services"`
	// Build is the shape of the trip's definition `esjet run` serves: ""
	// (today's), or "next" — trip_requested at schema 3 (a currency, with
	// an upcaster), book_hotel issued at payload schema 2 (price_cents),
	// which its workers must understand, and a new kind, send_itinerary,
	// fired when a trip is confirmed (only a node of this build serves it). The rolling-upgrade test and
	// docs/schema-evolution.md upgrade a fleet from "" to "next".
	Build string `yaml:"build"`
}

// DemoBuildNext is [Demo].Build's next shape of the trip.
const DemoBuildNext = "next"
