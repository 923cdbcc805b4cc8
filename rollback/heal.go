package rollback

import (
	"path/filepath"

	"pisess/ledger"
	"pisess/readers/discover"
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
