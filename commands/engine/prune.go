package engine

import (
	"context"
	"os"
	"path/filepath"
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
	log := zerolog.Ctx(ctx)
	for _, root := range roots {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		if fi, err := os.Lstat(filepath.Join(root, ledger.PisessDir)); err != nil || !fi.IsDir() {
			rep.Trees = append(rep.Trees, ledger.PruneTree{Root: root, Runs: []string{}, Quarantine: []string{}})
			continue // nothing pisess made here; nothing to create either
		}
		pt, err := ledger.Prune(ctx, *log, ledger.PruneOptions{DryRun: opt.DryRun, LockWait: opt.LockWait, Ops: opt.Ops}, root, cutoff)
		rep.Trees = append(rep.Trees, pt)
		if err != nil {
			return rep, err
		}
	}
	return rep, nil
}
