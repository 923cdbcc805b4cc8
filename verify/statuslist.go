package verify

import (
	"context"
	"fmt"
	"path/filepath"

	"pisess/ledger"
	"pisess/readers/discover"
)

// StatusListing is every session's status under some trees, in tree
// order: what `pisess status` reports (ListStatus).
type StatusListing struct {
	Sessions []StatusEntry `json:"sessions"`
	Totals   map[Class]int `json:"totals"`
	// Trees is each tree's own state: its journal and quarantine sizes
	// and its last run.
	Trees []ledger.TreeSummary `json:"trees"`
	// Skipped are entries that are not sessions (notices).
	Skipped []discover.Skipped `json:"skippedEntries"`
}

// ListStatus lists the status of every session under roots, one entry
// each (StatusOf): path, source format and version, entries, size, the
// reference's status class, the session's name, and the last migration
// run (the tree journal). It never writes and never locks.
//
// An error means the trees could not be walked or a journal could not be
// read; a session that cannot be classified has its Error set.
func ListStatus(ctx context.Context, roots []string) (StatusListing, error) {
	trees, err := discover.Walk(roots)
	if err != nil {
		return StatusListing{}, fmt.Errorf("status: %w", err)
	}
	rep := StatusListing{Sessions: []StatusEntry{}, Totals: map[Class]int{}, Skipped: []discover.Skipped{}}
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
		var fc *FreshCache
		if t.SymlinkAncestor == "" {
			fc = LoadFreshCache(t.Root, DefaultFreshJudges())
		}
		for _, s := range t.Sessions {
			if err := ctx.Err(); err != nil {
				return rep, err
			}
			e := StatusOf(s, fc)
			e.Tree = t.Root
			e.LastMigration = last[filepath.Clean(s.Path)]
			rep.Sessions = append(rep.Sessions, e)
			rep.Totals[e.Class]++
		}
	}
	return rep, nil
}
