package api

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/esjet/esjet/internal/aggregate"
)

// RouteWords are the words the API routes on, on both surfaces: "raw",
// "types", "ops", "log", "views" and "multi" where a type would go
// (esjet.<ns>.raw.…, /v1/types, esjet.<ns>.ops.<user>.dlq.<action>,
// /v1/log, /v1/views/…, /v1/multi and the micro endpoint of that name),
// "state" and "events" where a command kind would go
// (esjet.<ns>.<type>.<id>.state).
// An aggregate type or command kind may not be one of them: [New] refuses
// a registry that uses one, so the node does not start; config refuses one
// as a raw type (aggregates.raw), and a raw append to one is answered 400.
var RouteWords = []string{"raw", "types", "ops", "state", "events", "log", "views", "multi"}

// ErrRouteWord is wrapped by the error [New] returns for an aggregate type
// or command kind that is one of [RouteWords].
var ErrRouteWord = errors.New("reserved API route word")

// checkRouteWords reports every type and command kind in reg that collides
// with the API's routes.
func checkRouteWords(reg *aggregate.Registry) error {
	var errs []error
	words := strings.Join(RouteWords, ", ")
	for _, typ := range reg.Types() {
		if slices.Contains(RouteWords, typ) {
			errs = append(errs, fmt.Errorf("%w: aggregate type %q collides with the API's routes (reserved: %s); rename the type", ErrRouteWord, typ, words))
		}
		def, err := reg.Get(typ)
		if err != nil {
			continue
		}
		for _, kind := range def.Commands() {
			if slices.Contains(RouteWords, kind) {
				errs = append(errs, fmt.Errorf("%w: command kind %q of aggregate type %q collides with the API's routes (reserved: %s); rename the command", ErrRouteWord, kind, typ, words))
			}
		}
	}
	return errors.Join(errs...)
}
