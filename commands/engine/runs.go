package engine

import (
	"context"

	"pisess/ledger"
	"pisess/readers/discover"
)

// RunsReport is the result of Runs.
type RunsReport struct {
	Trees []ledger.TreeRuns `json:"trees"`
}

// Tally implements Report: listing runs finds no problem.
func (RunsReport) Tally() Tally { return Tally{} }

// RunsOptions configure Runs.
type RunsOptions struct {
	// Paths are trees or paths inside them; none: the default tree.
	Paths []string
}

// Runs lists the runs each tree's journal records (ledger.Runs). It only
// reads: no lock, nothing written.
func Runs(ctx context.Context, opt RunsOptions) (RunsReport, error) {
	roots, err := discover.TreeRoots(opt.Paths)
	if err != nil {
		return RunsReport{}, err
	}
	trees, err := ledger.Runs(ctx, roots)
	return RunsReport{Trees: trees}, err
}
