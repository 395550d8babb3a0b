package node

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/esjet/esjet/internal/api"
	"github.com/esjet/esjet/internal/projection"
	"github.com/esjet/esjet/internal/shred"
)

// PersonalAction is the body of esjet.<ns>.ops.<user>.personal.forget and
// .rotate: the data subject's id (e.g. a traveler's name).
type PersonalAction struct {
	Subject string `json:"subject"`
}

// PersonalReply answers a personal action. It never repeats the subject's
// id: the tombstone and the node's log name the subject by its ref.
type PersonalReply struct {
	Action    string           `json:"action"`
	Ref       string           `json:"ref"`
	Tombstone *shred.Tombstone `json:"tombstone,omitempty"` // forget
	Version   int              `json:"version,omitempty"`   // rotate: the new key version
	// ViewsReset are the views marked personal that the forget reset: they
	// refill from the log with the subject's fields erased.
	ViewsReset []string `json:"views_reset,omitempty"`
}

// maxSubject bounds a data subject's id.
const maxSubject = 1024

// personalAction serves esjet forget and esjet keys rotate for by.
func (n *Node) personalAction(ctx context.Context, by, action string, body []byte) (any, error) {
	if action != "forget" && action != "rotate" {
		return nil, &api.Error{Status: 404, Code: "no_route", Message: fmt.Sprintf("no personal action %q; the actions are forget and rotate", action)}
	}
	var a PersonalAction
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil {
		return nil, &api.Error{Status: 400, Code: "bad_request", Message: fmt.Sprintf(`personal %s: the body must be {"subject": …}: %v`, action, err)}
	}
	if strings.TrimSpace(a.Subject) == "" || len(a.Subject) > maxSubject {
		return nil, &api.Error{Status: 400, Code: "bad_request", Message: fmt.Sprintf("personal %s: the subject must be 1-%d bytes, not blank", action, maxSubject)}
	}
	ring, err := n.keys.Keyring(ctx, true)
	if err != nil {
		return nil, err
	}
	ref, _ := ring.Ref(ctx, a.Subject)
	rep := PersonalReply{Action: action, Ref: ref}
	if action == "rotate" {
		if rep.Version, err = ring.Rotate(ctx, a.Subject); err != nil {
			return nil, err
		}
		n.logger.Info("personal data key rotated", "ref", ref, "version", rep.Version, "by", by)
		return rep, nil
	}
	t, err := ring.Forget(ctx, a.Subject, by)
	if err != nil {
		return nil, err
	}
	rep.Tombstone = &t
	n.logger.Info("personal data forgotten", "ref", ref, "through_version", t.Through, "keys_erased", t.Erased, "by", by)
	// The views' documents were written with the plaintext: each refills
	// from the log, where the subject's fields now read as erased. A purge
	// removes the bucket's block files, so no stale copy stays on disk.
	for _, name := range n.personalViews {
		err := n.views.Reset(ctx, name)
		if errors.Is(err, projection.ErrUnknown) {
			continue // never ran: nothing written yet
		}
		if err != nil {
			return rep, fmt.Errorf("forgot %s, but view %s was not reset (esjet projections reset %s): %w", ref, name, name, err)
		}
		rep.ViewsReset = append(rep.ViewsReset, name)
	}
	return rep, nil
}
