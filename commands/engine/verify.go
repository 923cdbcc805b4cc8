package engine

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"pisess/readers/discover"
	"pisess/verify"
)

// VerifyOptions configure Verify.
type VerifyOptions struct {
	// Paths are session files, their <stem>.v2 sidecars, or trees (every
	// session with a sidecar in them). At least one is required.
	Paths []string
}

// VerifyReport is what Verify found.
type VerifyReport struct {
	Sessions []verify.Verdict `json:"sessions"`
	Verified int              `json:"verified"`
	Failed   int              `json:"failed"`
	Stale    int              `json:"stale"`
	// Skipped are entries that are not sessions, named or found: notices,
	// as in every command.
	Skipped []discover.Skipped `json:"skippedEntries"`
	Trees   []string           `json:"trees"`
}

// Tally counts every session that did not verify as a problem left.
func (r VerifyReport) Tally() Tally { return Tally{Problems: r.Failed} }

// Verify checks each sidecar against its source in full (FORMAT.md §9,
// §11; verify.Sidecar): the three verification flags (entry ids in order,
// the hash chain recomputed from the source, index ↔ frames ↔ manifest),
// every invariant INV-001..INV-007, and pi's acceptance rules (types,
// private modes, the session owner, no symlink, no pending rollback). It
// never writes and never locks. A session named directly that has no
// sidecar fails; one met while walking a tree is skipped. An error means
// verify could not run (no path, a path that does not exist).
func Verify(ctx context.Context, opt VerifyOptions) (VerifyReport, error) {
	if len(opt.Paths) == 0 {
		return VerifyReport{}, Usagef("verify wants at least one PATH: a session file, its <stem>.v2 sidecar, or a tree")
	}
	named := map[string]bool{}
	var roots []string
	for _, p := range opt.Paths {
		abs, err := filepath.Abs(p)
		if err != nil {
			return VerifyReport{}, fmt.Errorf("verify: %w", err)
		}
		if src, ok := discover.SessionOfSidecar(abs); ok {
			abs = src
		}
		if fi, err := os.Lstat(abs); err == nil && !fi.IsDir() {
			named[abs] = true
		}
		roots = append(roots, abs)
	}
	trees, err := discover.Walk(roots)
	if err != nil {
		return VerifyReport{}, fmt.Errorf("verify: %w", err)
	}
	rep := VerifyReport{Sessions: []verify.Verdict{}, Skipped: []discover.Skipped{}, Trees: []string{}}
	for _, t := range trees {
		for _, s := range t.Sessions {
			if err := ctx.Err(); err != nil {
				return rep, err
			}
			v := verify.Sidecar(ctx, s, named[s.Path])
			switch {
			case v.Skipped:
			case v.Verified:
				rep.Verified++
			case v.Stale:
				rep.Stale++
			default:
				rep.Failed++
			}
			rep.Sessions = append(rep.Sessions, v)
		}
		rep.Skipped = append(rep.Skipped, t.Skipped...)
		rep.Trees = append(rep.Trees, t.Root)
	}
	return rep, nil
}
