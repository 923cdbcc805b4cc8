package engine

import (
	"context"

	"github.com/rs/zerolog"

	"pisess/writers/store"
)

// InspectReport is one store's inspection (store.Inspect).
type InspectReport struct {
	store.Inspection
}

// Tally counts every problem as left: inspect repairs nothing.
func (r InspectReport) Tally() Tally { return Tally{Problems: len(r.Problems)} }

// Inspect reads the store at dir without writing or locking anything
// (store.Inspect). An error means the store could not be opened at all
// (dir missing, not a directory, reached through a symlink); everything
// else is a problem in the report.
func Inspect(ctx context.Context, dir string) (InspectReport, error) {
	in, err := store.Inspect(ctx, dir)
	if err != nil {
		return InspectReport{}, err
	}
	if in.ManifestErr != nil {
		zerolog.Ctx(ctx).Debug().Err(in.ManifestErr).Str("store", dir).Msg("no readable manifest")
	}
	return InspectReport{in}, nil
}
