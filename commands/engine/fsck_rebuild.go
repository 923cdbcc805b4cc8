package engine

import (
	"context"
	"errors"

	"pisess/readers"
	"pisess/readers/discover"
)

// rebuild rebuilds the sidecar of s from its source with the migrate
// pipeline (RebuildSidecar: session lock, staging, verification, clean
// source state, cutover with the old sidecar kept in the quarantine, every
// phase in the journal under this run's correlation id). A source the
// reference refuses comes back as a *readers.RefusedError. The caller
// holds the session lock (rollback.Repairer.Session holds it from its
// check to its rebuild); displaced is where the old sidecar went.
func (tr *treeRun) rebuild(ctx context.Context, s discover.Session, reason string) (displaced string, err error) {
	env := Env{
		Clock:         tr.opt.Clock,
		Ops:           tr.opt.Ops,
		LockTimeout:   tr.opt.LockTimeout,
		Journal:       tr.journal,
		Log:           tr.log.With().Str("correlationId", tr.cid).Logger(),
		waitAside:     tr.aside,
		sessionLocked: true,
	}
	res := RebuildSidecar(ctx, env, s, tr.cid, reason)
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
