package engine

import (
	"context"

	"pisess/verify"
)

// VerifyOptions configure Verify.
type VerifyOptions struct {
	// Paths are session files, their <stem>.v2 sidecars, or trees (every
	// session with a sidecar in them). At least one is required.
	Paths []string
}

// VerifyReport is what Verify found (verify.Sidecars).
type VerifyReport struct {
	verify.SidecarsReport
}

// Tally counts every session that did not verify as a problem left.
func (r VerifyReport) Tally() Tally { return Tally{Problems: r.Failed} }

// Verify checks each sidecar against its source in full (FORMAT.md §9,
// §11; verify.Sidecars): the three verification flags (entry ids in order,
// the hash chain recomputed from the source, index ↔ frames ↔ manifest),
// every invariant INV-001..INV-007, and pi's acceptance rules (types,
// private modes, the session owner, no symlink, no pending rollback). It
// never writes and never locks. An error means verify could not run (no
// path, a path that does not exist).
func Verify(ctx context.Context, opt VerifyOptions) (VerifyReport, error) {
	if len(opt.Paths) == 0 {
		return VerifyReport{}, Usagef("verify wants at least one PATH: a session file, its <stem>.v2 sidecar, or a tree")
	}
	rep, err := verify.Sidecars(ctx, opt.Paths)
	return VerifyReport{rep}, err
}
