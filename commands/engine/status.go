package engine

import (
	"context"

	"pisess/readers/discover"
	"pisess/verify"
)

// StatusOptions configure Status.
type StatusOptions struct {
	// Paths are session files or trees; none means discover.DefaultRoots.
	Paths []string
}

// StatusReport is every session's status, in tree order
// (verify.ListStatus).
type StatusReport struct {
	verify.StatusListing
}

// Tally: status is informational; whatever it finds, it has run cleanly.
func (StatusReport) Tally() Tally { return Tally{} }

// Status lists the status of every session under opt.Paths
// (verify.ListStatus). It never writes and never locks.
func Status(ctx context.Context, opt StatusOptions) (StatusReport, error) {
	roots := opt.Paths
	if len(roots) == 0 {
		var err error
		if roots, err = discover.DefaultRoots(); err != nil {
			return StatusReport{}, err
		}
	}
	l, err := verify.ListStatus(ctx, roots)
	return StatusReport{l}, err
}
