package rollback

import (
	"context"
	"path/filepath"
	"time"

	"pisess/ledger"
	"pisess/readers/discover"
	"pisess/verify"
	"pisess/writers/durable"
	"pisess/writers/wire"
)

// NeedsHeal returns the part of tree t an interrupted pisess run left:
// sessions with <stem>.v2.staging.* or .v2.backup.* siblings, and staging
// or backup directories whose session is gone (an orphaned sidecar may be
// a user's and is left for fsck). The reference uses the same names for
// its own staging and backups, so unless this run took over the tree lock
// of a pisess run that died (stale: then everything there is that run's),
// only what is recognisably pisess's is taken: a backup named after a run
// this tree's journal knows (BackupPath), a staging directory named after
// a migration the journal planned (StagingPath), a staging store whose
// own ledger holds a phase only pisess writes, for such a run. Nothing
// beside a session whose lock is held is taken, stale or not: a live
// writer's. ok is false when there is nothing of the kind.
func NeedsHeal(t discover.Tree, j *ledger.Journal, stale bool) (discover.Tree, bool) {
	var known, planned map[string]bool
	ours := func(dir, sidecar string, backup bool) bool {
		if stale {
			return true
		}
		if known == nil {
			known, planned = map[string]bool{}, map[string]bool{}
			_, _ = j.Scan(func(r ledger.Record) error {
				known[r.CorrelationID()] = true
				if ev := r.Event; ev != nil && ev.Phase == wire.PhasePlanned && ev.MigrationID != "" {
					planned[StagingPath(ev.TargetPath, ev.MigrationID)] = true
				}
				return nil
			})
		}
		if !backup && planned[filepath.Clean(dir)] {
			return true
		}
		if backup {
			for id := range known {
				if BackupPath(sidecar, id) == filepath.Clean(dir) {
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
		if held, err := durable.OS.LockHeld(s.Lock); err != nil || held {
			// A live writer's (pi stages its own rebuild under the
			// session lock, with the names pisess uses), or unknown:
			// never an interrupted run's (issue 34 §1).
			continue
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

// Heal finishes or undoes what an interrupted run left in tree t before
// migrate plans it, exactly as fsck --repair would for those sessions and
// directories (staging quarantined, a backup restored when no sidecar is
// installed and it verifies, else quarantined, a sidecar an interrupted
// cutover lost rebuilt from the source), each step journaled under a run
// id of its own. f gives the run's Ops, LockTimeout, Clock (nil: the
// wall clock), Log and Rebuild; Heal sets the rest. The caller holds the
// tree lock; stale is the holder text of the dead run whose lock it took
// over, and hold records the caller as the lock's holder. nil when there
// was nothing to do.
func Heal(ctx context.Context, f *Fsck, t discover.Tree, stale string, hold func() error) (*HealReport, error) {
	if t.SymlinkAncestor != "" {
		return nil, nil
	}
	j, err := ledger.OpenJournalWith(f.Ops, t.Root)
	if err != nil {
		return nil, err
	}
	defer j.Close()
	sel, ok := NeedsHeal(t, j, stale != "")
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
	if f.Clock == nil {
		f.Clock = func() time.Time { return time.Now().UTC() }
	}
	f.Repair, f.Jobs, f.CorrelationID, f.Total = true, 1, cid, len(sel.Sessions)
	f.Log.Warn().Str("tree", t.Root).Str("healCorrelationId", cid).Int("sessions", len(sel.Sessions)).
		Int("orphans", len(sel.Leftovers)).Msg("an interrupted run left staging/backup directories: repairing them as fsck --repair would")
	out, err := f.TreeLocked(ctx, sel, stale, nil, nil)
	rep := &HealReport{CorrelationID: cid, StaleLock: stale, Tree: out}
	return rep, err
}
