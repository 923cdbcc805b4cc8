package engine

import (
	"context"

	"pisess/ledger"
	"pisess/readers/discover"
)

// TreeRuns is one tree's runs, oldest first.
type TreeRuns struct {
	Root string           `json:"root"`
	Runs []ledger.RunInfo `json:"runs"`
	// BadLines is how many journal lines do not parse (fsck reports them).
	BadLines int `json:"badLines"`
}

// RunsReport is the result of Runs.
type RunsReport struct {
	Trees []TreeRuns `json:"trees"`
}

// Tally implements Report: listing runs finds no problem.
func (RunsReport) Tally() Tally { return Tally{} }

// RunsOptions configure Runs.
type RunsOptions struct {
	// Paths are trees or paths inside them; none: the default tree.
	Paths []string
}

// Runs lists the runs each tree's journal records (issue 12, item 7). It
// only reads: no lock, nothing written.
func Runs(ctx context.Context, opt RunsOptions) (RunsReport, error) {
	roots, err := discover.TreeRoots(opt.Paths)
	if err != nil {
		return RunsReport{}, err
	}
	rep := RunsReport{Trees: []TreeRuns{}}
	for _, root := range roots {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		runs, bad, err := ledger.JournalRuns(root)
		if err != nil {
			return rep, err
		}
		rep.Trees = append(rep.Trees, TreeRuns{Root: root, Runs: runs, BadLines: bad})
	}
	return rep, nil
}
