// Package services is the "outside world" of the demo trip saga: a budget
// service and two suppliers (flights, hotels) that esjet's workers call over
// NATS request/reply. They run inside a test or as their own process
// (esjet demo-services), and fail on demand so the saga's retries and
// compensations can be watched.
//
// # Subjects
//
// All request handlers are queue subscribers in group "demo-services", so
// several processes share the load:
//
//	demo.svc.budget.lock      {traveler, amount}              → {"lock_id": "BL-…"}
//	demo.svc.budget.release   {traveler, amount}              → {"released": true}
//	demo.svc.flights.book     {traveler, destination, price}  → {"booking_ref": "FL-…"}
//	demo.svc.flights.cancel   {booking_ref}                   → {"cancelled": true}
//	demo.svc.hotels.book      {traveler, destination, price}  → {"booking_ref": "HT-…"}
//	demo.svc.hotels.cancel    {booking_ref}                   → {"cancelled": true}
//	demo.svc.itineraries.send {traveler, destination}         → {"itinerary_ref": "IT-…"} (the trip's next shape)
//	demo.svc.control          {service, mode, count, delay}   → the current modes
//
// # Protocol
//
// This is what esjet's NATS target sends and expects. Request headers:
// Idempotency-Key (the esjet command id; required), Esjet-Command-Id,
// Esjet-Command-Kind, Esjet-Attempt (1, 2, …), Esjet-Aggregate-Type,
// Esjet-Aggregate-Id, Esjet-Aggregate-Version; the body is the command
// payload. The reply body is {"result": …} on success, or
// {"error": "…", "retryable": true|false, "retry_after_ms": n} on failure.
//
// Every effect goes through a [receiver.Receiver] on the KV bucket
// demo_services_receipts, keyed by Idempotency-Key: repeated deliveries of
// one command book once and get the same booking_ref. A failure does not
// consume the key, so a later attempt can succeed.
//
// # Failing on demand
//
// Each service (budget, flights, hotels) has a [Mode]: ok, transient
// ({"error":"supplier busy","retryable":true,"retry_after_ms":200}), terminal
// ("budget refused", "no seats", "no rooms"; retryable false) or slow (sleep
// Delay before answering). With Count n the mode applies to the next n
// requests that reach the service's effect, then the service recovers;
// Count 0 keeps it until changed. A replayed request (its key already done)
// answers the stored result whatever the mode. Set modes with
// [Options].Fail, with esjet demo-services --fail/--slow, or at runtime:
//
//	nats req demo.svc.control '{"service":"flights","mode":"transient","count":2}'
//	nats req demo.svc.control ''     # just print the modes
//
// # Atlantis
//
// A domain rule for the README demo: flights to destination "Atlantis"
// (any case) always fail terminally with "no seats", whatever the mode, so
// one request shows the saga compensating: the hotel is cancelled and the
// budget released.
package services
