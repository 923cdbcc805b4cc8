package engine

import (
	"context"
	"time"

	"github.com/rs/zerolog"

	"pisess/ledger"
	"pisess/readers/discover"
	"pisess/rollback"
	"pisess/verify"
)

// HealReport is what a migrate run did about the leftovers of an
// interrupted run before planning (issue 12, item 9).
type HealReport struct {
	// CorrelationID is the heal's own run id: its journal notes and
	// quarantine, listed by `pisess runs` as an fsck --repair.
	CorrelationID string `json:"correlationId"`
	// StaleLock is the holder text of the dead run whose tree lock this
	// run took over ("" when none).
	StaleLock string          `json:"staleLock,omitempty"`
	Tree      verify.FsckTree `json:"tree"`
}

// heal finishes or undoes what an interrupted run left in tree t before
// migrate plans it, exactly as fsck --repair would for those sessions and
// directories (staging quarantined, a backup restored when no sidecar is
// installed and it verifies, else quarantined, a sidecar an interrupted
// cutover lost rebuilt from the source), each step journaled under a run
// id of its own. The caller holds the tree lock. nil when there was
// nothing to do.
func heal(ctx context.Context, log zerolog.Logger, opt MigrateOptions, t discover.Tree, stale string, hold func() error) (*HealReport, error) {
	if t.SymlinkAncestor != "" {
		return nil, nil
	}
	j, err := ledger.OpenJournalWith(opt.Ops, t.Root)
	if err != nil {
		return nil, err
	}
	defer j.Close()
	sel, ok := rollback.NeedsHeal(t, j, stale != "")
	if !ok {
		return nil, nil
	}
	// The repairs move directories before they journal them: the run is
	// the lock's holder from now on.
	if hold != nil {
		if err := hold(); err != nil {
			return nil, err
		}
	}
	cid := ledger.NewCorrelationID()
	clock := opt.Clock
	if clock == nil {
		clock = func() time.Time { return time.Now().UTC() }
	}
	r := &fsckRun{opt: FsckOptions{Repair: true, Jobs: 1, CorrelationID: cid, LockTimeout: opt.LockTimeout,
		Clock: clock, Ops: opt.Ops}, log: &log, cid: cid, total: len(sel.Sessions)}
	log.Warn().Str("tree", t.Root).Str("healCorrelationId", cid).Int("sessions", len(sel.Sessions)).
		Int("orphans", len(sel.Leftovers)).Msg("an interrupted run left staging/backup directories: repairing them as fsck --repair would")
	out, err := r.treeLocked(ctx, sel, stale, nil, nil)
	rep := &HealReport{CorrelationID: cid, StaleLock: stale, Tree: out}
	return rep, err
}
