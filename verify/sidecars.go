package verify

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"pisess/readers/discover"
)

// SidecarsReport is what Sidecars found: `pisess verify`'s report.
type SidecarsReport struct {
	Sessions []Verdict `json:"sessions"`
	Verified int       `json:"verified"`
	Failed   int       `json:"failed"`
	Stale    int       `json:"stale"`
	// Skipped are entries that are not sessions, named or found: notices,
	// as in every command.
	Skipped []discover.Skipped `json:"skippedEntries"`
	Trees   []string           `json:"trees"`
}

// Sidecars checks the sidecar of each session under paths (session files,
// their <stem>.v2 sidecars, or trees) against its source in full
// (Sidecar). It never writes and never locks. A session named directly
// that has no sidecar fails; one met while walking a tree is skipped. An
// error means it could not run (a path that does not exist).
func Sidecars(ctx context.Context, paths []string) (SidecarsReport, error) {
	named := map[string]bool{}
	var roots []string
	for _, p := range paths {
		abs, err := filepath.Abs(p)
		if err != nil {
			return SidecarsReport{}, fmt.Errorf("verify: %w", err)
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
		return SidecarsReport{}, fmt.Errorf("verify: %w", err)
	}
	rep := SidecarsReport{Sessions: []Verdict{}, Skipped: []discover.Skipped{}, Trees: []string{}}
	for _, t := range trees {
		for _, s := range t.Sessions {
			if err := ctx.Err(); err != nil {
				return rep, err
			}
			v := Sidecar(ctx, s, named[s.Path])
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
