package engine

import (
	"context"
	"errors"

	"pisess/ledger"
	"pisess/readers"
	"pisess/readers/discover"
	"pisess/rollback"
)

// FsckRebuild is fsck's rollback.Fsck.Rebuild (package commands sets it on
// the rollback.Fsck it runs, heal on its own): it rebuilds the sidecar of
// s from its source with the migrate pipeline (RebuildSidecar: staging,
// verification, clean source state, cutover with the old sidecar kept in
// the quarantine, every phase in journal j under the run's correlation id).
// A source the reference refuses comes back as a *readers.RefusedError.
// The caller holds the session lock (rollback.Repairer.Session holds it
// from its check to its rebuild); displaced is where the old sidecar went.
func FsckRebuild(r *rollback.Fsck) func(context.Context, discover.Session, string, *ledger.Journal, func(func())) (string, error) {
	return func(ctx context.Context, s discover.Session, reason string, j *ledger.Journal, aside func(wait func())) (displaced string, err error) {
		env := Env{
			Clock:         r.Clock,
			Ops:           r.Ops,
			LockTimeout:   r.LockTimeout,
			Journal:       j,
			Log:           r.Log.With().Str("correlationId", r.CorrelationID).Logger(),
			waitAside:     aside,
			sessionLocked: true,
		}
		res := RebuildSidecar(ctx, env, s, r.CorrelationID, reason)
		switch {
		case res.Outcome == OutcomeDone:
			return res.Displaced, nil
		case res.Outcome == OutcomeRefused && res.Error != nil:
			return "", &readers.RefusedError{Path: s.Path, Line: res.Error.Line, Class: readers.Class(res.Error.Class), Reason: res.Error.Message}
		case res.Error != nil:
			return res.Displaced, errors.New("rebuild from the source: " + res.Error.Message)
		}
		return res.Displaced, errors.New("rebuild from the source: " + string(res.Outcome))
	}
}
