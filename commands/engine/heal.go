package engine

import (
	"context"
	"path/filepath"
	"time"

	"github.com/rs/zerolog"

	"pisess/ledger"
	"pisess/readers/discover"
	"pisess/rollback"
	"pisess/writers/wire"
)

// HealReport is what a migrate run did about the leftovers of an
// interrupted run before planning (issue 12, item 9).
type HealReport struct {
	// CorrelationID is the heal's own run id: its journal notes and
	// quarantine, listed by `pisess runs` as an fsck --repair.
	CorrelationID string `json:"correlationId"`
	// StaleLock is the holder text of the dead run whose tree lock this
	// run took over ("" when none).
	StaleLock string   `json:"staleLock,omitempty"`
	Tree      FsckTree `json:"tree"`
}

// needsHeal returns the part of tree t an interrupted pisess run left:
// sessions with <stem>.v2.staging.* or .v2.backup.* siblings, and staging
// or backup directories whose session is gone (an orphaned sidecar may be
// a user's and is left for fsck). The reference uses the same names for
// its own staging and backups, so unless this run took over the tree lock
// of a pisess run that died (stale: then everything there is that run's),
// only what is recognisably pisess's is taken: a backup named after a run
// this tree's journal knows (rollback.BackupPath), a staging store whose
// own ledger holds a phase only pisess writes, for such a run. ok is
// false when there is nothing of the kind.
func needsHeal(t discover.Tree, j *ledger.Journal, stale bool) (discover.Tree, bool) {
	var known map[string]bool
	ours := func(dir, sidecar string, backup bool) bool {
		if stale {
			return true
		}
		if known == nil {
			known = map[string]bool{}
			if ids, err := j.CorrelationIDs(); err == nil {
				for _, id := range ids {
					known[id] = true
				}
			}
		}
		if backup {
			for id := range known {
				if rollback.BackupPath(sidecar, id) == filepath.Clean(dir) {
					return true
				}
			}
			return false
		}
		evs, err := ledger.ReadStoreEvents(dir)
		if err != nil {
			return false
		}
		for _, ev := range evs {
			if ev.Phase != wire.PhaseCompleted && known[ev.CorrelationID] {
				return true // the reference writes completed events only
			}
		}
		return false
	}
	sel := discover.Tree{Root: t.Root}
	for i := range t.Sessions {
		s := &t.Sessions[i]
		if s.Refusal != nil || len(s.Staging)+len(s.Backups) == 0 {
			continue // nothing left beside it (a clean tree: every session, at no cost)
		}
		sidecar := discover.SidecarPath(s.Path)
		x := *s
		x.Staging, x.Backups = nil, nil
		for _, p := range s.Staging {
			if ours(p, sidecar, false) {
				x.Staging = append(x.Staging, p)
			}
		}
		for _, p := range s.Backups {
			if ours(p, sidecar, true) {
				x.Backups = append(x.Backups, p)
			}
		}
		if len(x.Staging)+len(x.Backups) > 0 {
			sel.Sessions = append(sel.Sessions, x)
		}
	}
	for _, l := range t.Leftovers {
		if l.IsSymlink {
			continue
		}
		sidecar := filepath.Join(filepath.Dir(l.Path), l.Stem+discover.SidecarSuffix)
		if (l.Kind == discover.LeftoverStaging && ours(l.Path, sidecar, false)) ||
			(l.Kind == discover.LeftoverBackup && ours(l.Path, sidecar, true)) {
			sel.Leftovers = append(sel.Leftovers, l)
		}
	}
	return sel, len(sel.Sessions)+len(sel.Leftovers) > 0
}

// heal finishes or undoes what an interrupted run left in tree t before
// migrate plans it, exactly as fsck --repair would for those sessions and
// directories (staging quarantined, a backup restored when no sidecar is
// installed and it verifies, else quarantined, a sidecar an interrupted
// cutover lost rebuilt from the source), each step journaled under a run
// id of its own. The caller holds the tree lock. nil when there was
// nothing to do.
func heal(ctx context.Context, log zerolog.Logger, opt MigrateOptions, t discover.Tree, stale string) (*HealReport, error) {
	if t.SymlinkAncestor != "" {
		return nil, nil
	}
	j, err := ledger.OpenJournalWith(opt.Ops, t.Root)
	if err != nil {
		return nil, err
	}
	defer j.Close()
	sel, ok := needsHeal(t, j, stale != "")
	if !ok {
		return nil, nil
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
	out, err := r.treeLocked(ctx, sel, stale)
	rep := &HealReport{CorrelationID: cid, StaleLock: stale, Tree: out}
	return rep, err
}
