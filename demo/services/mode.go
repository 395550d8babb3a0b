package services

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The services whose behaviour can be switched.
const (
	Budget  = "budget"
	Flights = "flights"
	Hotels  = "hotels"
	// Itineraries sends a confirmed trip's itinerary (the trip's next
	// shape only).
	Itineraries = "itineraries"
)

// Names lists the services, in order.
var Names = []string{Budget, Flights, Hotels, Itineraries}

// Kind is how a service answers.
type Kind string

const (
	OK        Kind = "ok"        // perform the effect
	Transient Kind = "transient" // {"error":"supplier busy","retryable":true,"retry_after_ms":200}
	Terminal  Kind = "terminal"  // a refusal, retryable false
	Slow      Kind = "slow"      // sleep Delay, then perform the effect
)

// Mode is a service's failure switch.
type Mode struct {
	Kind Kind // "" means OK
	// Count is how many more requests the mode applies to before the service
	// recovers (back to OK); 0 means until changed.
	Count int
	// Delay is how long a Slow service sleeps before answering.
	Delay time.Duration
}

// modeJSON is a Mode on the wire: {"mode":"slow","count":2,"delay":"3s"}.
type modeJSON struct {
	Mode  Kind   `json:"mode"`
	Count int    `json:"count,omitempty"`
	Delay string `json:"delay,omitempty"`
}

// MarshalJSON writes {"mode": …, "count": …, "delay": "3s"}.
func (m Mode) MarshalJSON() ([]byte, error) {
	w := modeJSON{Mode: m.Kind, Count: m.Count}
	if w.Mode == "" {
		w.Mode = OK
	}
	if m.Delay > 0 {
		w.Delay = m.Delay.String()
	}
	return json.Marshal(w)
}

// UnmarshalJSON reads what MarshalJSON writes.
func (m *Mode) UnmarshalJSON(data []byte) error {
	var w modeJSON
	if err := json.Unmarshal(data, &w); err != nil {
		return err
	}
	mode := Mode{Kind: w.Mode, Count: w.Count}
	if w.Delay != "" {
		d, err := time.ParseDuration(w.Delay)
		if err != nil {
			return fmt.Errorf("delay %q: want a duration such as 3s", w.Delay)
		}
		mode.Delay = d
	}
	*m = mode
	return nil
}

// Validate reports what is wrong with m.
func (m Mode) Validate() error {
	switch m.Kind {
	case "", OK, Transient, Terminal:
		if m.Delay != 0 {
			return fmt.Errorf("delay %s is only for mode slow", m.Delay)
		}
	case Slow:
		if m.Delay <= 0 {
			return fmt.Errorf("mode slow needs a positive delay, such as 3s")
		}
	default:
		return fmt.Errorf("mode %q: want ok, transient, terminal or slow", m.Kind)
	}
	if m.Count < 0 {
		return fmt.Errorf("count %d: want 0 (until changed) or more", m.Count)
	}
	return nil
}

func validService(name string) error {
	if !slices.Contains(Names, name) {
		return fmt.Errorf("unknown service %q: want one of %s", name, strings.Join(Names, ", "))
	}
	return nil
}

// ParseFail parses a --fail flag value, service=kind[:count]:
// flights=terminal, hotels=transient:2, budget=ok.
func ParseFail(spec string) (service string, m Mode, err error) {
	service, rest, ok := strings.Cut(spec, "=")
	if !ok {
		return "", Mode{}, fmt.Errorf("--fail %q: want service=mode[:count], e.g. flights=terminal or hotels=transient:2", spec)
	}
	kind, count, _ := strings.Cut(rest, ":")
	m.Kind = Kind(kind)
	if m.Kind == Slow {
		return "", Mode{}, fmt.Errorf("--fail %q: use --slow %s=<delay>[:count] for a slow service", spec, service)
	}
	if count != "" {
		if m.Count, err = strconv.Atoi(count); err != nil {
			return "", Mode{}, fmt.Errorf("--fail %q: count %q is not a number", spec, count)
		}
	}
	if err := validService(service); err != nil {
		return "", Mode{}, fmt.Errorf("--fail %q: %w", spec, err)
	}
	if err := m.Validate(); err != nil {
		return "", Mode{}, fmt.Errorf("--fail %q: %w", spec, err)
	}
	return service, m, nil
}

// ParseSlow parses a --slow flag value, service=delay[:count]: budget=3s,
// flights=500ms:2.
func ParseSlow(spec string) (service string, m Mode, err error) {
	service, rest, ok := strings.Cut(spec, "=")
	if !ok {
		return "", Mode{}, fmt.Errorf("--slow %q: want service=delay[:count], e.g. budget=3s", spec)
	}
	delay, count, _ := strings.Cut(rest, ":")
	m.Kind = Slow
	if m.Delay, err = time.ParseDuration(delay); err != nil {
		return "", Mode{}, fmt.Errorf("--slow %q: delay %q is not a duration such as 3s", spec, delay)
	}
	if count != "" {
		if m.Count, err = strconv.Atoi(count); err != nil {
			return "", Mode{}, fmt.Errorf("--slow %q: count %q is not a number", spec, count)
		}
	}
	if err := validService(service); err != nil {
		return "", Mode{}, fmt.Errorf("--slow %q: %w", spec, err)
	}
	if err := m.Validate(); err != nil {
		return "", Mode{}, fmt.Errorf("--slow %q: %w", spec, err)
	}
	return service, m, nil
}

// ControlRequest is the body of a request to demo.svc.control. An empty
// body only asks for the current modes.
type ControlRequest struct {
	Service string `json:"service"`
	Mode    Kind   `json:"mode"`
	Count   int    `json:"count,omitempty"`
	Delay   string `json:"delay,omitempty"` // a Go duration: "3s"
}

// ControlReply is the answer on demo.svc.control: the modes after the
// change, or why the request was refused.
type ControlReply struct {
	Modes map[string]Mode `json:"modes,omitempty"`
	Error string          `json:"error,omitempty"`
}
