package engine

import (
	"context"
	"time"

	"github.com/rs/zerolog"

	"pisess/ledger"
	"pisess/readers/discover"
	"pisess/writers/durable"
)

// PruneOptions configure Prune.
type PruneOptions struct {
	// Paths are trees or paths inside them; none: the default tree.
	Paths []string
	// KeepWithin keeps every run whose last record (a rollback of it
	// included) is this recent, and its quarantine entries.
	KeepWithin time.Duration
	DryRun     bool
	LockWait   time.Duration
	Clock      func() time.Time
	Ops        durable.Ops
}

// PruneReport is the result of Prune.
type PruneReport struct {
	DryRun bool               `json:"dryRun"`
	Cutoff string             `json:"cutoff"`
	Trees  []ledger.PruneTree `json:"trees"`
}

// Tally implements Report.
func (PruneReport) Tally() Tally { return Tally{} }

// Prune removes the quarantine entries and journal records of runs that
// ended before now − KeepWithin (issue 12, item 7): the one place pisess
// deletes, and only when asked. A run with a record inside the window (a
// rollback of it included) or a record without a readable time is kept
// whole, so every rollback the journal still allows works as before; the
// journal keeps its other lines byte for byte and in order, and is
// replaced atomically. Quarantine entries no journal record names are
// removed when their own time is outside the window. Each removal is
// logged.
func Prune(ctx context.Context, opt PruneOptions) (PruneReport, error) {
	if opt.KeepWithin <= 0 {
		return PruneReport{}, Usagef("--keep-within %s: want a positive duration such as 720h (30 days)", opt.KeepWithin)
	}
	now := time.Now()
	if opt.Clock != nil {
		now = opt.Clock()
	}
	cutoff := now.Add(-opt.KeepWithin)
	rep := PruneReport{DryRun: opt.DryRun, Cutoff: cutoff.UTC().Format(time.RFC3339), Trees: []ledger.PruneTree{}}
	roots, err := discover.TreeRoots(opt.Paths)
	if err != nil {
		return rep, err
	}
	rep.Trees, err = ledger.PruneTrees(ctx, *zerolog.Ctx(ctx), ledger.PruneOptions{DryRun: opt.DryRun, LockWait: opt.LockWait, Ops: opt.Ops}, roots, cutoff)
	return rep, err
}
