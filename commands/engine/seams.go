package engine

import (
	"time"

	"pisess/verify"
)

// seams are the parts of a run a test replaces, given with the run's
// options (MigrateOptions.seams) rather than set in package variables, so
// that tests of the engine can run in parallel. A zero field is a run's
// own.
type seams struct {
	// judges replace the fresh cache's checks (verify.FreshJudges.OrDefault).
	judges verify.FreshJudges
	// opened is called with a session's path when its source has had its
	// first pass.
	opened func(path string)
	// noLinger: a session's seal does not wait for others to share its
	// syncfs.
	noLinger bool
	// walked is called as a migrate run ends a walk of its trees.
	walked func()
	// fullRefresh: every refresh is a full rebuild, which displaces the
	// old sidecar (as with --keep-displaced, whose keeping it does not
	// imply).
	fullRefresh bool
}

// freshJudges returns the fresh cache's checks: the test's where it gave
// them, else the defaults.
func (s *seams) freshJudges() verify.FreshJudges {
	if s == nil {
		return verify.DefaultFreshJudges()
	}
	return s.judges.OrDefault()
}

// linger is how long a session's seal waits for others to share its
// syncfs (durable.SyncGroup.Linger).
func (s *seams) linger() time.Duration {
	if s.noLinger {
		return 0
	}
	return sealLinger
}
