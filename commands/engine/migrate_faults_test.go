package engine

import (
	"errors"
	"io/fs"
	"os"
	"strings"
	"syscall"
	"testing"

	"pisess/fixtures"
	"pisess/ledger"
	"pisess/readers/discover"
	"pisess/verify"
	"pisess/writers/durable"
	"pisess/writers/wire"
)

// TestMigrateInjectedFaults injects one fault at a time into the file
// operations of a migration (durable.FaultyOps): a full disk on a write, a
// failed fsync, a refused rename. Each must end the session in a clean,
// classified error with nothing half-made visible — no <stem>.v2 where
// there was none, the old sidecar intact where there was one, no staging or
// backup directory left — a failed event in the tree journal, the source
// untouched; and a later normal run migrates it. A fault after the install
// rename (the directory fsync) leaves the new sidecar visible: it must be
// the whole verified store, which the next run keeps.
func TestMigrateInjectedFaults(t *testing.T) {
	tests := []struct {
		name string
		rule durable.FaultRule
		// refresh: the session already has a (stale) sidecar, which the
		// failed run must leave exactly as it was.
		refresh bool
		// installed: the fault strikes after the install rename (the
		// parent directory's fsync): the new sidecar is visible, and must
		// then be the whole verified store.
		installed bool
		// inPlace: the refresh continues the sidecar in place (the other
		// refreshes are full rebuilds). A fault after the sidecar was
		// marked dirty leaves it so: not what pi reads.
		inPlace bool
	}{
		{"ENOSPC on a segment write", durable.FaultRule{Op: durable.FaultWrite, Pattern: "*.seg", Err: syscall.ENOSPC}, false, false, false},
		{"ENOSPC on the index write", durable.FaultRule{Op: durable.FaultWrite, Pattern: "offsets.jsonl", Err: syscall.ENOSPC}, false, false, false},
		// The store ledger's events are written with one write.
		{"ENOSPC on the store ledger", durable.FaultRule{Op: durable.FaultWrite, Pattern: "ledger.jsonl", Err: syscall.ENOSPC}, false, false, false},
		{"ENOSPC on source-state.json", durable.FaultRule{Op: durable.FaultWrite, Pattern: "source-state.json", Err: syscall.ENOSPC}, false, false, false},
		// The staging store is written without fsyncs and sealed by one
		// syncfs on its directory, which reports the writeback error of
		// any of its files.
		{"EIO on the staging seal", durable.FaultRule{Op: durable.FaultSync, Pattern: "*.v2.staging.*", Err: syscall.EIO}, false, false, false},
		// A segment whose writeback fails before the seal (the kernel
		// wrote it back early, and something else saw the error first):
		// only a seal opened before the write hears of it (issue 32 §4).
		{"EIO on a segment's write-back", durable.FaultRule{Op: durable.FaultWriteback, Pattern: "*.seg", Err: syscall.EIO}, false, false, false},
		{"EACCES on the manifest temp rename", durable.FaultRule{Op: durable.FaultRename, Pattern: "manifest.json.tmp", Err: syscall.EACCES}, false, false, false},
		{"EACCES on the staging to sidecar rename", durable.FaultRule{Op: durable.FaultRename, Pattern: "*.v2.staging.*", Err: syscall.EACCES}, false, false, false},
		{"EACCES on the staging to sidecar rename, refresh", durable.FaultRule{Op: durable.FaultRename, Pattern: "*.v2.staging.*", Err: syscall.EACCES}, true, false, false},
		{"EACCES on displacing the old sidecar", durable.FaultRule{Op: durable.FaultRename, Pattern: "*.v2.backup.*", Err: syscall.EACCES}, true, false, false},
		{"EIO on the staging seal, refresh", durable.FaultRule{Op: durable.FaultSync, Pattern: "*.v2.staging.*", Err: syscall.EIO}, true, false, false},
		// The session directory is fsynced once: after the install rename
		// (the staging directory's creation is sealed with the store).
		{"EIO on the directory fsync after the install", durable.FaultRule{Op: durable.FaultSync, Pattern: "--home-u-proj--", Err: syscall.EIO}, false, true, false},
		{"ENOSPC on a segment write, in place", durable.FaultRule{Op: durable.FaultWrite, Pattern: "*.seg", Err: syscall.ENOSPC}, true, false, true},
		{"ENOSPC on the index write, in place", durable.FaultRule{Op: durable.FaultWrite, Pattern: "offsets.jsonl", Err: syscall.ENOSPC}, true, false, true},
		// Marking the sidecar dirty is not synced on its own: the seal is
		// the one sync of the sidecar directory.
		{"EIO on the sidecar seal, in place", durable.FaultRule{Op: durable.FaultSync, Pattern: "victim.v2", Err: syscall.EIO}, true, false, true},
		{"ENOSPC on source-state.json, in place", durable.FaultRule{Op: durable.FaultWrite, Pattern: "source-state.json", Err: syscall.ENOSPC}, true, false, true},
		{"EIO on a segment's write-back, in place", durable.FaultRule{Op: durable.FaultWriteback, Pattern: "*.seg", Err: syscall.EIO}, true, false, true},
		{"EACCES on the manifest temp rename, in place", durable.FaultRule{Op: durable.FaultRename, Pattern: "manifest.json.tmp", Err: syscall.EACCES}, true, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			session, last := migSession(t, dir, "victim", 6)
			other, _ := migSession(t, dir, "bystander", 2)
			sidecar := discover.SidecarPath(session)
			var oldStore map[string]string
			if tt.refresh {
				migRun(t, migOptions(session))
				migAppend(t, session, migEntryLine("f0000001", last, "later"))
				oldStore = fixtures.TreeDigest(t, sidecar)
			}
			src := fixtures.SHA256File(t, session)

			opt := migOptions(session)
			opt.Ops = durable.FaultyOps(tt.rule)
			if !tt.inPlace {
				opt.seams = &seams{fullRefresh: true}
			}
			rep := migRun(t, opt)
			s := migResult(t, rep, session)
			if s.Outcome != OutcomeFailed || s.Error == nil ||
				(s.Error.Class != string(wire.ErrorClassIOFailure) && s.Error.Class != string(wire.ErrorClassAtomicityViolation)) {
				t.Fatalf("%s/%s error %+v, want a failure classed io_failure or atomicity_violation", s.Action, s.Outcome, s.Error)
			}
			if !strings.Contains(s.Error.Message, tt.rule.Err.Error()) {
				t.Errorf("the error does not say what failed (%v): %s", tt.rule.Err, s.Error.Message)
			}
			if rep.Tally().Left() != 1 {
				t.Errorf("tally %+v", rep.Tally())
			}
			if tt.inPlace {
				// The refresh went in place (its records say so, written
				// before the sidecar's first byte changed), and left a
				// sidecar pi does not read as fresh: marked dirty, or (the
				// mark itself failed) as it was, stale.
				inPlace := false
				for _, r := range migJournal(t, dir, rep.CorrelationID) {
					if n := r.Note; n != nil && n.Session == session && n.Kind == ledger.NoteInstalled && strings.HasPrefix(n.Detail, "continued in place") {
						inPlace = true
					}
				}
				if !inPlace {
					t.Error("the journal does not say the refresh tried to continue the sidecar in place")
				}
				d := migDigestDiff(oldStore, fixtures.TreeDigest(t, sidecar), nil)
				if st, err := verify.StatusFast(session); err != nil || st.Class == verify.ClassMigrated {
					t.Errorf("the sidecar changed %v and is %s (%v)", d, st.Class, err)
				}
			} else if tt.refresh {
				if d := migDigestDiff(oldStore, fixtures.TreeDigest(t, sidecar), nil); len(d) > 0 {
					t.Errorf("the old sidecar changed: %v", d)
				}
			} else if tt.installed {
				uid, gid := migOwner(t, session)
				migCheckInstalled(t, session, rep.CorrelationID, uid, gid)
			} else if _, err := os.Lstat(sidecar); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("%s exists after the failure (%v)", sidecar, err)
			}
			if l := migLeftovers(t, dir); len(l) > 0 {
				t.Errorf("leftovers %v", l)
			}
			if fixtures.SHA256File(t, session) != src {
				t.Error("the source changed")
			}
			failed := false
			for _, r := range migJournal(t, dir, rep.CorrelationID) {
				if ev := r.Event; ev != nil && ev.SourcePath == session {
					if ev.Phase == wire.PhaseCompleted {
						t.Errorf("journal: completed after a failure")
					}
					if ev.Phase == wire.PhaseFailed && (ev.ErrorClass == wire.ErrorClassIOFailure || ev.ErrorClass == wire.ErrorClassAtomicityViolation) &&
						ev.Outcome != wire.OutcomeOK {
						failed = true
					}
				}
			}
			if !failed {
				t.Errorf("no failed event with its error class in the journal: %v", migEventPhases(migJournal(t, dir, rep.CorrelationID), session))
			}

			// The fault is gone: the next run migrates it (the bystander,
			// never faulted by a rule on the victim's path, is fresh).
			next := migRun(t, migOptions(dir))
			s = migResult(t, next, session)
			if tt.installed {
				if s.Outcome != OutcomeSkipped {
					t.Fatalf("the run after the fault: %s/%s %+v, want the installed sidecar kept", s.Action, s.Outcome, s.Error)
				}
			} else {
				if s.Outcome != OutcomeDone {
					t.Fatalf("the run after the fault: %s/%s %+v", s.Action, s.Outcome, s.Error)
				}
				migAllVerified(t, s)
				uid, gid := migOwner(t, session)
				migCheckInstalled(t, session, next.CorrelationID, uid, gid)
			}
			if o := migResult(t, next, other); o.Outcome != OutcomeDone {
				t.Errorf("bystander: %s/%s", o.Action, o.Outcome)
			}
			if l := migLeftovers(t, dir); len(l) > 0 {
				t.Errorf("leftovers after the recovery %v", l)
			}
		})
	}
}
