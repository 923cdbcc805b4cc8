package engine

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"

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
	roots, err := treeRoots(opt.Paths)
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

// treeRoots resolves paths (none: the default tree) to their distinct tree
// roots (discover.TreeRoot), sorted.
func treeRoots(paths []string) ([]string, error) {
	if len(paths) == 0 {
		d, err := discover.DefaultRoots()
		if err != nil {
			return nil, fmt.Errorf("default session tree: %w", err)
		}
		paths = d
	}
	seen := map[string]bool{}
	var out []string
	for _, p := range paths {
		abs, err := filepath.Abs(p)
		if err != nil {
			return nil, fmt.Errorf("tree %s: %w", p, err)
		}
		if _, err := os.Lstat(abs); err != nil {
			return nil, fmt.Errorf("session tree %s: %w", p, err)
		}
		root := discover.TreeRoot(abs)
		if !seen[root] {
			seen[root] = true
			out = append(out, root)
		}
	}
	sort.Strings(out)
	return out, nil
}
