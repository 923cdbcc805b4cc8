package rollback

import (
	"errors"
	"fmt"
)

// ErrBadCorrelationID is matched by an id that does not match the
// contract's ^[A-Za-z0-9._:-]{8,128}$: a usage error (exit 16).
var ErrBadCorrelationID = errors.New("malformed correlation id")

// ErrUnknownCorrelation is matched when the tree journal holds no record of
// the correlation id: nothing to roll back (exit 4).
var ErrUnknownCorrelation = errors.New("unknown correlation id")

// ErrSourceChanged is matched by a session whose source is neither what the
// run left nor what it found: pi wrote it after the run (new entries
// appended to an upgraded file, or a rewrite). Restoring the original would
// lose those bytes, so the session is left as it is and reported.
var ErrSourceChanged = errors.New("source changed since the run")

// ErrSuperseded is matched by a session whose sidecar is no longer the one
// the run installed (a later run, or pi itself, replaced it): rolling back
// the run would remove a store it did not make. The later run must be
// rolled back first.
var ErrSuperseded = errors.New("sidecar replaced since the run")

// ErrMissing is matched when something a rollback must put back is gone
// from the quarantine (a displaced sidecar, an original source).
var ErrMissing = errors.New("quarantined copy missing")

// ErrNoCheckpoint is matched when the checkpoint to roll back to does not
// exist in the store.
var ErrNoCheckpoint = errors.New("checkpoint not found")

// StepError places a failure in a session's rollback.
type StepError struct {
	Session string
	Step    string
	Err     error
}

func (e *StepError) Error() string {
	return fmt.Sprintf("%s: %s: %v", e.Session, e.Step, e.Err)
}

func (e *StepError) Unwrap() error { return e.Err }
