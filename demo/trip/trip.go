package trip

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/esjet/esjet"
)

// Type is the aggregate type name; StateSchema versions [State]'s JSON shape
// in snapshots.
const (
	Type        = "trip"
	StateSchema = 1
)

// Command kinds the trip handles from clients.
const (
	KindRequestTrip = "request_trip"
	KindAddNote     = "add_note"
)

// Command kinds the trip issues, all with Report set: their outcomes come
// back as esjet.DoneKind(kind) / esjet.FailedKind(kind) with an
// [esjet.Outcome] payload, and the trip handles those.
const (
	KindLockBudget    = "lock_budget"
	KindBookFlight    = "book_flight"
	KindBookHotel     = "book_hotel"
	KindReleaseBudget = "release_budget"
	KindCancelFlight  = "cancel_flight"
	KindCancelHotel   = "cancel_hotel"
)

// Event types.
const (
	EventTripRequested      = "trip_requested"
	EventBudgetLocked       = "budget_locked"
	EventTripRejected       = "trip_rejected"
	EventFlightBooked       = "flight_booked"
	EventHotelBooked        = "hotel_booked"
	EventTripConfirmed      = "trip_confirmed"
	EventFlightFailed       = "flight_failed"
	EventHotelFailed        = "hotel_failed"
	EventTripCancelled      = "trip_cancelled"
	EventBudgetReleased     = "budget_released"
	EventFlightCancelled    = "flight_cancelled"
	EventHotelCancelled     = "hotel_cancelled"
	EventCompensationFailed = "compensation_failed"
	EventNoteAdded          = "note_added"
)

// Trip statuses ([State].Status); "" means the trip does not exist.
const (
	StatusRequested    = "requested"
	StatusBudgetLocked = "budget_locked"
	StatusConfirmed    = "confirmed"
	StatusCancelled    = "cancelled"
	StatusRejected     = "rejected"
)

// Leg statuses ([Leg].Status); "" until the budget is locked and the leg's
// booking is issued.
const (
	LegStatusPending   = "pending"
	LegStatusBooked    = "booked"
	LegStatusFailed    = "failed"
	LegStatusCancelled = "cancelled"
)

// Budget statuses ([State].BudgetStatus); "" until the lock succeeds.
const (
	BudgetStatusLocked   = "locked"
	BudgetStatusReleased = "released"
)

// MaxNoteLen is the longest note, in characters.
const MaxNoteLen = 500

// State is a trip as its events leave it; it is also its snapshot JSON.
type State struct {
	Status       string `json:"status"`
	Reason       string `json:"reason,omitempty"` // why it was rejected or cancelled
	Traveler     string `json:"traveler" esjet:"personal,subject=traveler"`
	Destination  string `json:"destination"`
	Budget       int64  `json:"budget"` // cents
	Amount       int64  `json:"amount"` // cents locked: flight + hotel price
	Flight       Leg    `json:"flight"`
	Hotel        Leg    `json:"hotel"`
	BudgetStatus string `json:"budget_status"`
	Notes        int    `json:"notes"`
	// CompensationFailures lists the compensating command kinds that failed
	// terminally (each is issued at most once per trip); a human must finish
	// them. The errors are in the compensation_failed events.
	CompensationFailures []string `json:"compensation_failures,omitempty"`
}

// Leg is the flight or the hotel of a trip.
type Leg struct {
	Status     string `json:"status"`
	Price      int64  `json:"price"` // cents
	BookingRef string `json:"booking_ref,omitempty"`
	Error      string `json:"error,omitempty"` // why the booking failed
}

// Client command payloads.
type (
	RequestTrip struct {
		Traveler    string `json:"traveler"`
		Destination string `json:"destination"`
		Budget      int64  `json:"budget"`
		FlightPrice int64  `json:"flight_price"`
		HotelPrice  int64  `json:"hotel_price"`
	}
	AddNote struct {
		Text string `json:"text"`
	}
)

// Payloads of the commands the trip issues, as their workers receive them.
type (
	LockBudget struct {
		Traveler string `json:"traveler" esjet:"personal,subject=traveler"`
		Amount   int64  `json:"amount"`
	}
	BookFlight struct {
		Traveler    string `json:"traveler" esjet:"personal,subject=traveler"`
		Destination string `json:"destination"`
		Price       int64  `json:"price"`
	}
	BookHotel struct {
		Traveler    string `json:"traveler" esjet:"personal,subject=traveler"`
		Destination string `json:"destination"`
		Price       int64  `json:"price"`
	}
	ReleaseBudget struct {
		Traveler string `json:"traveler" esjet:"personal,subject=traveler"`
		Amount   int64  `json:"amount"`
	}
	CancelFlight struct {
		BookingRef string `json:"booking_ref"`
	}
	CancelHotel struct {
		BookingRef string `json:"booking_ref"`
	}
)

// BookingResult is what the trip reads from a book_flight_done or
// book_hotel_done outcome's result; a missing or unreadable result leaves
// BookingRef empty (the booking happened either way).
type BookingResult struct {
	BookingRef string `json:"booking_ref"`
}

// Event data.
type (
	// TripRequested is schema version 2: version 1 named the budget
	// "budget" (see upcastTripRequested).
	TripRequested struct {
		Traveler    string `json:"traveler" esjet:"personal,subject=traveler"`
		Destination string `json:"destination"`
		Budget      int64  `json:"budget_cents"`
		FlightPrice int64  `json:"flight_price"`
		HotelPrice  int64  `json:"hotel_price"`
		// Currency is schema 3's (the trip's next shape, next.go); absent
		// before.
		Currency string `json:"currency,omitempty"`
	}
	BudgetLocked struct {
		Amount int64 `json:"amount"`
	}
	TripRejected struct {
		Reason string `json:"reason"`
	}
	// LegBooked is flight_booked and hotel_booked.
	LegBooked struct {
		BookingRef string `json:"booking_ref"`
	}
	TripConfirmed struct{}
	// LegFailed is flight_failed and hotel_failed.
	LegFailed struct {
		Error string `json:"error"`
	}
	TripCancelled struct {
		Reason string `json:"reason"`
	}
	BudgetReleased struct {
		Amount int64 `json:"amount"`
	}
	// LegCancelled is flight_cancelled and hotel_cancelled.
	LegCancelled struct {
		BookingRef string `json:"booking_ref"`
	}
	CompensationFailed struct {
		Command string `json:"command"` // the compensating command kind
		Error   string `json:"error"`
	}
	NoteAdded struct {
		Text string `json:"text"`
	}
)

// leg describes one of the two bookings so that the flight and hotel rules
// are written once.
type leg struct {
	name                      string
	book, cancel              string
	booked, failed, cancelled string
	of                        func(*State) *Leg
	bookPayload               func(State) any
	cancelPayload             func(ref string) any
}

var (
	flight = leg{
		name: "flight", book: KindBookFlight, cancel: KindCancelFlight,
		booked: EventFlightBooked, failed: EventFlightFailed, cancelled: EventFlightCancelled,
		of: func(s *State) *Leg { return &s.Flight },
		bookPayload: func(s State) any {
			return BookFlight{Traveler: s.Traveler, Destination: s.Destination, Price: s.Flight.Price}
		},
		cancelPayload: func(ref string) any { return CancelFlight{BookingRef: ref} },
	}
	hotel = leg{
		name: "hotel", book: KindBookHotel, cancel: KindCancelHotel,
		booked: EventHotelBooked, failed: EventHotelFailed, cancelled: EventHotelCancelled,
		of: func(s *State) *Leg { return &s.Hotel },
		bookPayload: func(s State) any {
			return BookHotel{Traveler: s.Traveler, Destination: s.Destination, Price: s.Hotel.Price}
		},
		cancelPayload: func(ref string) any { return CancelHotel{BookingRef: ref} },
	}
)

// Definition returns the trip aggregate type, ready to register with a node.
func Definition() *esjet.Definition { return define(false) }

// define builds today's trip, or its next shape (next.go).
func define(next bool) *esjet.Definition {
	def := esjet.Define(Type, StateSchema, evolve)
	request, locked := requestTrip, lockBudgetDone
	if next {
		request, locked = requestTripNext, lockBudgetDoneNext
	}
	esjet.On(def, KindRequestTrip, request)
	esjet.On(def, KindAddNote, addNote)
	esjet.Upcast(def, EventTripRequested, 1, upcastTripRequested)
	if next {
		esjet.Upcast(def, EventTripRequested, 2, upcastTripRequestedV3)
	}
	esjet.On(def, esjet.DoneKind(KindLockBudget), locked)
	esjet.On(def, esjet.FailedKind(KindLockBudget), lockBudgetFailed)
	for _, l := range []struct{ me, other leg }{{flight, hotel}, {hotel, flight}} {
		if next {
			esjet.On(def, esjet.DoneKind(l.me.book), bookDoneNext(l.me, l.other))
		} else {
			esjet.On(def, esjet.DoneKind(l.me.book), bookDone(l.me, l.other))
		}
		esjet.On(def, esjet.FailedKind(l.me.book), bookFailed(l.me, l.other))
		esjet.On(def, esjet.DoneKind(l.me.cancel), cancelDone(l.me))
		esjet.On(def, esjet.FailedKind(l.me.cancel), compensationFailed(l.me.cancel, func(s State) bool {
			return l.me.of(&s).Status == LegStatusBooked
		}))
	}
	esjet.On(def, esjet.DoneKind(KindReleaseBudget), releaseDone)
	esjet.On(def, esjet.FailedKind(KindReleaseBudget), compensationFailed(KindReleaseBudget, func(s State) bool {
		return s.BudgetStatus == BudgetStatusLocked
	}))
	return def.Definition()
}

func requestTrip(s State, c RequestTrip) (esjet.Decision, error) {
	if s.Status != "" {
		return esjet.Decision{}, esjet.Reject("already_requested", "the trip was already requested (status %q); use a new trip id", s.Status)
	}
	var problems []string
	if strings.TrimSpace(c.Traveler) == "" {
		problems = append(problems, "traveler is empty")
	}
	if strings.TrimSpace(c.Destination) == "" {
		problems = append(problems, "destination is empty")
	}
	for _, f := range []struct {
		name  string
		cents int64
	}{{"budget", c.Budget}, {"flight_price", c.FlightPrice}, {"hotel_price", c.HotelPrice}} {
		if f.cents <= 0 {
			problems = append(problems, fmt.Sprintf("%s is %d, want a positive amount in cents", f.name, f.cents))
		}
	}
	if len(problems) > 0 {
		return esjet.Decision{}, esjet.Reject("invalid_request", "%s", strings.Join(problems, "; "))
	}
	// Both prices are positive, so budget-FlightPrice cannot overflow.
	if c.FlightPrice > c.Budget || c.HotelPrice > c.Budget-c.FlightPrice {
		return esjet.Decision{}, esjet.Reject("budget_exceeded",
			"flight %d + hotel %d cents exceed the budget of %d cents", c.FlightPrice, c.HotelPrice, c.Budget)
	}
	amount := c.FlightPrice + c.HotelPrice
	return esjet.Emit(EventTripRequested, TripRequested{Traveler: c.Traveler, Destination: c.Destination, Budget: c.Budget, FlightPrice: c.FlightPrice, HotelPrice: c.HotelPrice}).
		Issue(KindLockBudget, LockBudget{Traveler: c.Traveler, Amount: amount}), nil
}

func addNote(s State, c AddNote) (esjet.Decision, error) {
	if s.Status == "" {
		return esjet.Decision{}, esjet.Reject("not_found", "no such trip; request it first")
	}
	if n := utf8.RuneCountInString(c.Text); n == 0 || n > MaxNoteLen {
		return esjet.Decision{}, esjet.Reject("invalid_note", "text has %d characters, want 1 to %d", n, MaxNoteLen)
	}
	return esjet.Emit(EventNoteAdded, NoteAdded(c)), nil
}

func lockBudgetDone(s State, o esjet.Outcome) (esjet.Decision, error) {
	if s.Status != StatusRequested {
		return esjet.Decision{}, unexpected(s, esjet.DoneKind(KindLockBudget), o)
	}
	return esjet.Emit(EventBudgetLocked, BudgetLocked{Amount: s.Amount}).
		Issue(KindBookFlight, flight.bookPayload(s)).
		Issue(KindBookHotel, hotel.bookPayload(s)), nil
}

func lockBudgetFailed(s State, o esjet.Outcome) (esjet.Decision, error) {
	if s.Status != StatusRequested {
		return esjet.Decision{}, unexpected(s, esjet.FailedKind(KindLockBudget), o)
	}
	return esjet.Emit(EventTripRejected, TripRejected{Reason: "budget lock failed: " + o.Error}), nil
}

// bookDone records a booking. It confirms the trip when the other leg is
// booked too, and compensates a late success on a trip already cancelled.
func bookDone(me, other leg) func(State, esjet.Outcome) (esjet.Decision, error) {
	return func(s State, o esjet.Outcome) (esjet.Decision, error) {
		switch me.of(&s).Status {
		case LegStatusBooked, LegStatusCancelled:
			return esjet.Nothing(), nil // a duplicate outcome
		case LegStatusPending:
		default:
			return esjet.Decision{}, unexpected(s, esjet.DoneKind(me.book), o)
		}
		var r BookingResult
		_ = json.Unmarshal(o.Result, &r) // tolerated: the booking exists either way
		d := esjet.Emit(me.booked, LegBooked(r))
		switch {
		case s.Status == StatusCancelled:
			d = d.Issue(me.cancel, me.cancelPayload(r.BookingRef))
		case other.of(&s).Status == LegStatusBooked:
			d = d.Then(EventTripConfirmed, TripConfirmed{})
		}
		return d, nil
	}
}

// bookFailed cancels the trip on the first failed leg and compensates what
// was done: the budget, and the other leg if it is booked (if it is still
// pending, its late success is compensated by bookDone).
func bookFailed(me, other leg) func(State, esjet.Outcome) (esjet.Decision, error) {
	return func(s State, o esjet.Outcome) (esjet.Decision, error) {
		switch me.of(&s).Status {
		case LegStatusFailed:
			return esjet.Nothing(), nil // a duplicate outcome
		case LegStatusPending:
		default:
			return esjet.Decision{}, unexpected(s, esjet.FailedKind(me.book), o)
		}
		d := esjet.Emit(me.failed, LegFailed{Error: o.Error})
		if s.Status != StatusBudgetLocked {
			return d, nil // the other leg failed first and compensated already
		}
		d = d.Then(EventTripCancelled, TripCancelled{Reason: me.name + " booking failed: " + o.Error}).
			Issue(KindReleaseBudget, ReleaseBudget{Traveler: s.Traveler, Amount: s.Amount})
		if ol := other.of(&s); ol.Status == LegStatusBooked {
			d = d.Issue(other.cancel, other.cancelPayload(ol.BookingRef))
		}
		return d, nil
	}
}

// A cancel is issued exactly when a leg is booked on a cancelled trip, and a
// release exactly when the budget is locked on one: the state says whether
// a compensation outcome is expected.

func cancelDone(me leg) func(State, esjet.Outcome) (esjet.Decision, error) {
	return func(s State, o esjet.Outcome) (esjet.Decision, error) {
		l := me.of(&s)
		switch {
		case l.Status == LegStatusCancelled:
			return esjet.Nothing(), nil
		case l.Status == LegStatusBooked && s.Status == StatusCancelled:
			return esjet.Emit(me.cancelled, LegCancelled{BookingRef: l.BookingRef}), nil
		}
		return esjet.Decision{}, unexpected(s, esjet.DoneKind(me.cancel), o)
	}
}

func releaseDone(s State, o esjet.Outcome) (esjet.Decision, error) {
	switch {
	case s.BudgetStatus == BudgetStatusReleased:
		return esjet.Nothing(), nil
	case s.BudgetStatus == BudgetStatusLocked && s.Status == StatusCancelled:
		return esjet.Emit(EventBudgetReleased, BudgetReleased{Amount: s.Amount}), nil
	}
	return esjet.Decision{}, unexpected(s, esjet.DoneKind(KindReleaseBudget), o)
}

// compensationFailed records a compensation that failed terminally; the trip
// stays cancelled and a human takes over. pending says whether the
// compensation is outstanding.
func compensationFailed(kind string, pending func(State) bool) func(State, esjet.Outcome) (esjet.Decision, error) {
	return func(s State, o esjet.Outcome) (esjet.Decision, error) {
		switch {
		case slices.Contains(s.CompensationFailures, kind):
			return esjet.Nothing(), nil
		case s.Status == StatusCancelled && pending(s):
			return esjet.Emit(EventCompensationFailed, CompensationFailed{Command: kind, Error: o.Error}), nil
		}
		return esjet.Decision{}, unexpected(s, esjet.FailedKind(kind), o)
	}
}

// unexpected rejects an outcome the trip's state does not expect. The
// framework already lets through only outcomes of commands the trip issued
// and still awaits (a forged or repeated one never gets here); this check
// stays as defence in depth.
func unexpected(s State, kind string, o esjet.Outcome) error {
	status := s.Status
	if status == "" {
		status = "not requested"
	}
	return esjet.Reject("unexpected_outcome", "%s (command %q) does not match the trip: it is %s, budget %q, flight %q, hotel %q",
		kind, o.CommandID, status, s.BudgetStatus, s.Flight.Status, s.Hotel.Status)
}

// evolve folds one event into the state. It is pure: s is a copy, and the
// one slice is copied before it grows. Event data was written by Decide, so
// a decode error cannot happen short of a corrupted log; the event's type
// still applies. Unknown event types are ignored.
func evolve(s State, e esjet.Event) State {
	switch e.Type {
	case EventTripRequested:
		var d TripRequested
		_ = e.Decode(&d)
		s.Status = StatusRequested
		s.Traveler, s.Destination, s.Budget = d.Traveler, d.Destination, d.Budget
		s.Flight.Price, s.Hotel.Price = d.FlightPrice, d.HotelPrice
		s.Amount = d.FlightPrice + d.HotelPrice
	case EventBudgetLocked:
		s.Status = StatusBudgetLocked
		s.BudgetStatus = BudgetStatusLocked
		s.Flight.Status, s.Hotel.Status = LegStatusPending, LegStatusPending
	case EventTripRejected:
		var d TripRejected
		_ = e.Decode(&d)
		s.Status, s.Reason = StatusRejected, d.Reason
	case EventFlightBooked, EventHotelBooked:
		var d LegBooked
		_ = e.Decode(&d)
		l := legOf(&s, e.Type == EventFlightBooked)
		l.Status, l.BookingRef = LegStatusBooked, d.BookingRef
	case EventTripConfirmed:
		s.Status = StatusConfirmed
	case EventFlightFailed, EventHotelFailed:
		var d LegFailed
		_ = e.Decode(&d)
		l := legOf(&s, e.Type == EventFlightFailed)
		l.Status, l.Error = LegStatusFailed, d.Error
	case EventTripCancelled:
		var d TripCancelled
		_ = e.Decode(&d)
		s.Status, s.Reason = StatusCancelled, d.Reason
	case EventBudgetReleased:
		s.BudgetStatus = BudgetStatusReleased
	case EventFlightCancelled, EventHotelCancelled:
		legOf(&s, e.Type == EventFlightCancelled).Status = LegStatusCancelled
	case EventCompensationFailed:
		var d CompensationFailed
		_ = e.Decode(&d)
		s.CompensationFailures = append(slices.Clip(s.CompensationFailures), d.Command)
	case EventNoteAdded:
		s.Notes++
	}
	return s
}

func legOf(s *State, isFlight bool) *Leg {
	if isFlight {
		return &s.Flight
	}
	return &s.Hotel
}
