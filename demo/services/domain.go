package services

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/esjet/esjet/demo/trip"
)

// Subjects served; [SubjectControl] switches the failure modes.
const (
	SubjectBudgetLock     = "demo.svc.budget.lock"
	SubjectBudgetRelease  = "demo.svc.budget.release"
	SubjectFlightsBook    = "demo.svc.flights.book"
	SubjectFlightsCancel  = "demo.svc.flights.cancel"
	SubjectHotelsBook     = "demo.svc.hotels.book"
	SubjectHotelsCancel   = "demo.svc.hotels.cancel"
	SubjectItinerarySend  = "demo.svc.itineraries.send"
	SubjectControl        = "demo.svc.control"
	SubjectAll            = "demo.svc.>"
	Queue                 = "demo-services"
	DefaultBucket         = "demo_services_receipts"
	AtlantisDestination   = "Atlantis"
	transientRetryAfter   = 200 * time.Millisecond
	transientErrorMessage = "supplier busy"
)

// KindSubjects maps each command kind the trip issues to the subject that
// carries it out: the NATS targets to configure for the demo.
var KindSubjects = map[string]string{
	trip.KindLockBudget:    SubjectBudgetLock,
	trip.KindReleaseBudget: SubjectBudgetRelease,
	trip.KindBookFlight:    SubjectFlightsBook,
	trip.KindCancelFlight:  SubjectFlightsCancel,
	trip.KindBookHotel:     SubjectHotelsBook,
	trip.KindCancelHotel:   SubjectHotelsCancel,
}

// NextKindSubjects maps the command kinds only the trip's next shape
// issues (trip.NextKinds) to their subjects: a node of today's build routes
// none of them, so they wait for the next build's workers.
var NextKindSubjects = map[string]string{
	trip.KindSendItinerary: SubjectItinerarySend,
}

// refusal is each service's terminal error.
var refusal = map[string]string{Budget: "budget refused", Flights: "no seats", Hotels: "no rooms", Itineraries: "mailbox full"}

// endpoint is one subject: the service it belongs to and its effect, which
// sees only the decoded payload.
type endpoint struct {
	subject string
	service string
	effect  func(payload []byte) (any, error)
}

type (
	budgetPayload struct {
		Traveler string `json:"traveler"`
		Amount   int64  `json:"amount"`
	}
	// bookPayload reads book_hotel at both payload schemas: 1 says
	// "price", 2 (the trip's next shape) "price_cents".
	bookPayload struct {
		Traveler    string `json:"traveler"`
		Destination string `json:"destination"`
		Price       int64  `json:"price"`
		PriceCents  int64  `json:"price_cents"`
	}
	cancelPayload struct {
		BookingRef string `json:"booking_ref"`
	}
)

func endpoints() []endpoint {
	return []endpoint{
		{SubjectBudgetLock, Budget, func(p []byte) (any, error) {
			if _, err := decodeBudget(p); err != nil {
				return nil, err
			}
			return map[string]string{"lock_id": ref("BL")}, nil
		}},
		{SubjectBudgetRelease, Budget, func(p []byte) (any, error) {
			if _, err := decodeBudget(p); err != nil {
				return nil, err
			}
			return map[string]bool{"released": true}, nil
		}},
		{SubjectFlightsBook, Flights, book("FL", func(b bookPayload) error {
			if strings.EqualFold(strings.TrimSpace(b.Destination), AtlantisDestination) {
				return terminal(refusal[Flights]) // the README's compensation demo
			}
			return nil
		})},
		{SubjectFlightsCancel, Flights, cancel("FL")},
		{SubjectHotelsBook, Hotels, book("HT", nil)},
		{SubjectHotelsCancel, Hotels, cancel("HT")},
		{SubjectItinerarySend, Itineraries, func(p []byte) (any, error) {
			var it trip.SendItinerary
			if err := decode(p, &it); err != nil {
				return nil, err
			}
			if strings.TrimSpace(it.Traveler) == "" || strings.TrimSpace(it.Destination) == "" {
				return nil, terminal(fmt.Sprintf("invalid payload: traveler %q, destination %q: want both", it.Traveler, it.Destination))
			}
			return map[string]string{"itinerary_ref": ref("IT")}, nil
		}},
	}
}

func decode(payload []byte, v any) error {
	if err := json.Unmarshal(payload, v); err != nil {
		return terminal(fmt.Sprintf("undecodable payload: %v", err))
	}
	return nil
}

func decodeBudget(p []byte) (budgetPayload, error) {
	var b budgetPayload
	if err := decode(p, &b); err != nil {
		return b, err
	}
	if strings.TrimSpace(b.Traveler) == "" || b.Amount <= 0 {
		return b, terminal(fmt.Sprintf("invalid payload: traveler %q, amount %d: want a traveler and a positive amount in cents", b.Traveler, b.Amount))
	}
	return b, nil
}

func book(prefix string, rule func(bookPayload) error) func([]byte) (any, error) {
	return func(p []byte) (any, error) {
		var b bookPayload
		if err := decode(p, &b); err != nil {
			return nil, err
		}
		if b.Price == 0 {
			b.Price = b.PriceCents
		}
		if strings.TrimSpace(b.Traveler) == "" || strings.TrimSpace(b.Destination) == "" || b.Price <= 0 {
			return nil, terminal(fmt.Sprintf("invalid payload: traveler %q, destination %q, price %d: want all three, price positive in cents", b.Traveler, b.Destination, b.Price))
		}
		if rule != nil {
			if err := rule(b); err != nil {
				return nil, err
			}
		}
		return map[string]string{"booking_ref": ref(prefix)}, nil
	}
}

func cancel(prefix string) func([]byte) (any, error) {
	return func(p []byte) (any, error) {
		var c cancelPayload
		if err := decode(p, &c); err != nil {
			return nil, err
		}
		if !strings.HasPrefix(c.BookingRef, prefix+"-") {
			return nil, terminal(fmt.Sprintf("unknown booking_ref %q: want %s-…", c.BookingRef, prefix))
		}
		return map[string]bool{"cancelled": true}, nil
	}
}

// ref is a booking reference such as FL-K3J7QZ: the prefix and six random
// base32 characters. It is random on purpose: only the receiver makes a
// repeated delivery get the same one.
func ref(prefix string) string { return prefix + "-" + rand.Text()[:6] }
