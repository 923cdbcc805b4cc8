package engine

import "time"

// seams are the parts of a run a test replaces, given with the run's
// options (MigrateOptions.seams) rather than set in package variables, so
// that tests of the engine can run in parallel. nil is a run's own.
type seams struct {
	// judges replace the fresh cache's checks; a nil function (or a zero
	// racy window) is the default's (defaultJudges).
	judges freshJudges
	// opened is called with a session's path when its source has had its
	// first pass.
	opened func(path string)
	// noLinger: a session's seal does not wait for others to share its
	// syncfs.
	noLinger bool
}

// freshJudges returns the fresh cache's checks: the test's where it gave
// them, else the defaults.
func (s *seams) freshJudges() freshJudges {
	j := defaultJudges()
	if s == nil {
		return j
	}
	if s.judges.racyWindow != 0 {
		j.racyWindow = s.judges.racyWindow
	}
	if s.judges.statusFast != nil {
		j.statusFast = s.judges.statusFast
	}
	if s.judges.statusVouched != nil {
		j.statusVouched = s.judges.statusVouched
	}
	if s.judges.fineCtime != nil {
		j.fineCtime = s.judges.fineCtime
	}
	return j
}

// linger is how long a session's seal waits for others to share its
// syncfs (durable.SyncGroup.Linger).
func (s *seams) linger() time.Duration {
	if s != nil && s.noLinger {
		return 0
	}
	return sealLinger
}

// openedHook is seams.opened, nil when none.
func (s *seams) openedHook() func(path string) {
	if s == nil {
		return nil
	}
	return s.opened
}
