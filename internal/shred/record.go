package shred

import (
	"context"
	"fmt"

	"github.com/esjet/esjet/internal/streams"
)

// OpenRecord opens the sealed fields of a record's events and commands in
// place (a forgotten subject's read as erased): the log's reader hook
// (streams.Config.Open), so every read sees them opened.
func (s *Sealer) OpenRecord(ctx context.Context, rec *streams.Record) error {
	for i := range rec.Events {
		if IsSealed(rec.Events[i].Data) {
			data, _, err := s.OpenJSON(ctx, rec.Events[i].Data)
			if err != nil {
				return fmt.Errorf("personal data of %s/%s event %d: %w", rec.AggregateType, rec.AggregateID, rec.Events[i].Version, err)
			}
			rec.Events[i].Data = data
		}
	}
	for i := range rec.Commands {
		if IsSealed(rec.Commands[i].Payload) {
			p, _, err := s.OpenJSON(ctx, rec.Commands[i].Payload)
			if err != nil {
				return fmt.Errorf("personal data of %s/%s command %s: %w", rec.AggregateType, rec.AggregateID, rec.Commands[i].ID, err)
			}
			rec.Commands[i].Payload = p
		}
	}
	return nil
}
