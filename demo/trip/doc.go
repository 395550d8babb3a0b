// Package trip is the demo domain that `esjet run` registers by default: a
// trip booking as a saga on one aggregate (type "trip").
//
// A traveler requests a trip with a budget and the prices of a flight and a
// hotel (integer cents). The trip locks the budget, then books both legs in
// parallel; when both are booked it is confirmed. If either booking fails
// terminally the trip is cancelled and everything already done is undone:
// the budget is released and a booked leg is cancelled — including a leg
// whose success arrives after the cancellation.
//
//	request_trip ──▶ trip_requested ──issue──▶ lock_budget
//	                                             │
//	       lock_budget_failed ◀──────────────────┤
//	       → trip_rejected                       │ lock_budget_done
//	                                             ▼
//	                      budget_locked ──issue──▶ book_flight ┐ in parallel
//	                                       └─issue──▶ book_hotel  ┘
//	both *_done     → flight_booked, hotel_booked, trip_confirmed
//	one *_failed    → flight_failed|hotel_failed, trip_cancelled
//	                  ──issue──▶ release_budget [+ cancel_<other leg> if booked]
//	late *_done     → <leg>_booked ──issue──▶ cancel_<leg>   (trip stays cancelled)
//	compensations   → budget_released, flight_cancelled, hotel_cancelled
//	                  or compensation_failed (a human takes over)
//
// Every command the trip issues has Report set: the worker that ran it
// reports <kind>_done or <kind>_failed carrying an [esjet.Outcome]. Clients
// cannot send an outcome; the framework lets it reach Decide only for a
// command this trip issued that is still outstanding. Command ids are
// assigned at append, so Decide cannot match an outcome to the command that
// caused it; the saga's state does instead. An outcome the state does not expect is
// rejected with code "unexpected_outcome"; a repeated one (the leg is
// already booked, failed or cancelled) decides [esjet.Nothing].
//
// add_note records a note on any existing trip, one event per call: the
// concurrency tests count on it.
package trip
