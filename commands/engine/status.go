package engine

import (
	"context"
	"fmt"
	"path/filepath"

	"pisess/ledger"
	"pisess/readers/discover"
	"pisess/verify"
)

// StatusOptions configure Status.
type StatusOptions struct {
	// Paths are session files or trees; none means discover.DefaultRoots.
	Paths []string
}

// StatusReport is every session's status, in tree order.
type StatusReport struct {
	Sessions []verify.StatusEntry `json:"sessions"`
	Totals   map[verify.Class]int `json:"totals"`
	// Trees is each tree's own state: its journal and quarantine sizes
	// and its last run.
	Trees []ledger.TreeSummary `json:"trees"`
	// Skipped are entries that are not sessions (notices).
	Skipped []discover.Skipped `json:"skippedEntries"`
}

// Tally: status is informational; whatever it finds, it has run cleanly.
func (StatusReport) Tally() Tally { return Tally{} }

// Status lists the status of every session under opt.Paths, one entry
// each (verify.StatusOf): path, source format and version, entries, size,
// the reference's status class, the session's name, and the last
// migration run (the tree journal). It never writes and never locks.
//
// An error means the trees could not be walked or a journal could not be
// read; a session that cannot be classified has its Error set.
func Status(ctx context.Context, opt StatusOptions) (StatusReport, error) {
	roots := opt.Paths
	if len(roots) == 0 {
		var err error
		if roots, err = discover.DefaultRoots(); err != nil {
			return StatusReport{}, err
		}
	}
	trees, err := discover.Walk(roots)
	if err != nil {
		return StatusReport{}, fmt.Errorf("status: %w", err)
	}
	rep := StatusReport{Sessions: []verify.StatusEntry{}, Totals: map[verify.Class]int{}, Skipped: []discover.Skipped{}}
	for _, t := range trees {
		// A journal status cannot read is said (exit 8, naming it), not
		// shown as a tree without runs (issue 32 §4).
		st, err := ledger.Summary(t.Root)
		if err != nil {
			return rep, fmt.Errorf("status %s: %w", t.Root, err)
		}
		rep.Trees = append(rep.Trees, st)
		rep.Skipped = append(rep.Skipped, t.Skipped...)
		last, err := ledger.LastMigrations(t.Root)
		if err != nil {
			return rep, fmt.Errorf("status %s: %w", t.Root, err)
		}
		var fc *verify.FreshCache
		if t.SymlinkAncestor == "" {
			fc = verify.LoadFreshCache(t.Root, verify.DefaultFreshJudges())
		}
		for _, s := range t.Sessions {
			if err := ctx.Err(); err != nil {
				return rep, err
			}
			e := verify.StatusOf(s, fc)
			e.Tree = t.Root
			e.LastMigration = last[filepath.Clean(s.Path)]
			rep.Sessions = append(rep.Sessions, e)
			rep.Totals[e.Class]++
		}
	}
	return rep, nil
}
