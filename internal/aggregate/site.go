package aggregate

import (
	"errors"
	"fmt"
)

// ErrWrongSite is wrapped by [*WrongSiteError]: the aggregate is written
// at another edge site (or the node is the hub, which writes none).
// Nothing was written. The API answers 409 wrong_site.
var ErrWrongSite = errors.New("aggregate: written at another site")

// WrongSiteError says which aggregate was refused where, and who owns it.
type WrongSiteError struct {
	Type, ID string
	Here     string // this node's site id, or "hub"
	Owner    string // the owning site; "" when no rule names one
	Hub      bool   // this node is the hub
}

func (e *WrongSiteError) Error() string {
	switch {
	case e.Hub && e.Owner != "":
		return fmt.Sprintf("%s/%s is written at site %s, not at the hub (the hub records no decisions, it aggregates the sites'); send the command to site %s. Nothing was written",
			e.Type, e.ID, e.Owner, e.Owner)
	case e.Hub:
		return fmt.Sprintf("%s/%s is owned by no site and the hub records no decisions; add an edge.owners rule for it (or give its id a site prefix, e.g. <site>-%s). Nothing was written",
			e.Type, e.ID, e.ID)
	case e.Owner == "":
		return fmt.Sprintf("%s/%s is owned by no site, so site %s may not write it: add an edge.owners rule (type %s or an id prefix) naming %s, or give its id the prefix %q. Nothing was written",
			e.Type, e.ID, e.Here, e.Type, e.Here, e.Here+"-")
	default:
		return fmt.Sprintf("%s/%s is written at site %s, not here at site %s (edge.owners): every aggregate has one writing site, since the hub cannot check concurrency across sites; send the command to site %s. Nothing was written",
			e.Type, e.ID, e.Owner, e.Here, e.Owner)
	}
}

// Unwrap makes the error match [ErrWrongSite].
func (e *WrongSiteError) Unwrap() error { return ErrWrongSite }

// Sites is the ownership rule of an edge fleet as one node applies it
// ([Config].Sites). The zero value allows every write (a node that is not
// part of a fleet).
type Sites struct {
	// Here is this node's site id; "" for the hub or a node on its own.
	Here string
	// Hub: this node is the hub, which writes no aggregate.
	Hub bool
	// OwnerOf names the site that writes typ/id, "" when none does.
	OwnerOf func(typ, id string) string
}

// check refuses a write of typ/id that belongs elsewhere.
func (s Sites) check(typ, id string) error {
	if !s.Hub && s.Here == "" {
		return nil
	}
	owner := ""
	if s.OwnerOf != nil {
		owner = s.OwnerOf(typ, id)
	}
	if !s.Hub && owner == s.Here {
		return nil
	}
	here := s.Here
	if s.Hub {
		here = "hub"
	}
	return &WrongSiteError{Type: typ, ID: id, Here: here, Owner: owner, Hub: s.Hub}
}
