package ledger

import (
	"fmt"
	"path/filepath"
	"sort"

	"pisess/writers/wire"
)

// UnfinishedError is a run that wrote an intent for a session and no
// outcome after it: the run died (or was killed) in Phase. Its Error names
// the command that resolves it.
type UnfinishedError struct {
	CorrelationID string
	Session       string
	Phase         wire.Phase
	Line          int64 // the journal line of the last intent
}

func (e *UnfinishedError) Error() string {
	if e.Phase == wire.PhaseCutoverCommit {
		return fmt.Sprintf("run %s stopped during %s of %s: the sidecar may be new or old; "+
			"run `pisess fsck --repair %s` to check and finish it, or `pisess rollback %s` to undo the run",
			e.CorrelationID, e.Phase, e.Session, e.Session, e.CorrelationID)
	}
	return fmt.Sprintf("run %s stopped in %s of %s before its cutover (no sidecar was installed); "+
		"run `pisess migrate %s` again to clear its staging and converge",
		e.CorrelationID, e.Phase, e.Session, e.Session)
}

// isIntent reports whether p announces work not yet done.
func isIntent(p wire.Phase) bool {
	switch p {
	case wire.PhasePlanned, wire.PhaseStagingCopy, wire.PhaseIntegrityCheck, wire.PhaseCutoverCommit:
		return true
	}
	return false
}

// resolves reports whether ev is an outcome for an earlier intent of the
// same run and session: completed or failed, or a successful rollback of
// that run (which undid whatever the intent started).
func resolves(ev *wire.MigrationEvent) bool {
	switch ev.Phase {
	case wire.PhaseCompleted, wire.PhaseFailed:
		return true
	case wire.PhaseRollback:
		return ev.Outcome == wire.OutcomeOK
	}
	return false
}

// Unfinished returns every intent left without an outcome, sorted by
// journal line: a planned, staging_copy, integrity_check or cutover_commit
// event of a run for a session that has neither completed nor failed (nor
// a successful rollback) after it in the same run. Call it under the tree
// lock: a run in progress has intents without outcomes too.
func (j *Journal) Unfinished() ([]*UnfinishedError, error) {
	type key struct{ cid, session string }
	open := map[key]*UnfinishedError{}
	_, err := j.Scan(func(r Record) error {
		ev := r.Event
		if ev == nil {
			return nil
		}
		k := key{ev.CorrelationID, filepath.Clean(ev.SourcePath)}
		switch {
		case isIntent(ev.Phase):
			open[k] = &UnfinishedError{CorrelationID: ev.CorrelationID, Session: ev.SourcePath,
				Phase: ev.Phase, Line: r.Line}
		case resolves(ev):
			delete(open, k)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]*UnfinishedError, 0, len(open))
	for _, u := range open {
		out = append(out, u)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Line < out[b].Line })
	return out, nil
}
