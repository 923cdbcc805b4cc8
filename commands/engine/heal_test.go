package engine

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"pisess/ledger"
	"pisess/readers"
	"pisess/readers/discover"
	"pisess/rollback"
	"pisess/verify"
	"pisess/writers/wire"
)

// deadRunTree migrates sessions a and b, then leaves what a pisess run
// killed mid-refresh leaves: pi appended to b, the dead run renamed b's
// sidecar to its backup name and died; a staging directory beside a. With
// staleLock, the dead run's holder text is left in the tree lock.
func deadRunTree(t *testing.T, staleLock bool) (root, a, b, staging, backup string) {
	t.Helper()
	root = t.TempDir()
	a, _ = migSession(t, root, "a", 3)
	b, lastB := migSession(t, root, "b", 3)
	migRun(t, migOptions(root))
	migAppend(t, b, migEntryLine("e0000100", lastB, "more"))
	backup = rollback.BackupPath(discover.SidecarPath(b), "dead-run-0001")
	if err := os.Rename(discover.SidecarPath(b), backup); err != nil {
		t.Fatal(err)
	}
	staging = discover.SidecarPath(a) + ".staging.0123456789abcdef0123456789abcdef"
	if err := os.MkdirAll(filepath.Join(staging, "segments"), 0o700); err != nil {
		t.Fatal(err)
	}
	// The dead run's journal lines: the backup is named after it.
	j, err := ledger.OpenJournal(root)
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Append(ledger.NoteRecord(ledger.Note{CorrelationID: "dead-run-0001", At: "2026-01-01T00:00:00.000Z",
		Session: b, Kind: ledger.NoteRepair, Detail: "the dead run's last record"})); err != nil {
		t.Fatal(err)
	}
	if staleLock {
		if err := os.WriteFile(ledger.TreeLockPath(root), []byte("pid=2147483000 host=gone started=2026-01-01T00:00:00Z\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return root, a, b, staging, backup
}

// TestMigrateHealsAfterDeadRun (issue 12, item 9): a run that takes over a
// dead run's tree lock repairs its leftovers as fsck --repair would (the
// staging quarantined, the backup put back and then refreshed), journals
// it under a run id of its own, and goes on: exit 0, nothing left over.
func TestMigrateHealsAfterDeadRun(t *testing.T) {
	root, a, b, staging, backup := deadRunTree(t, true)
	rep := migRun(t, migOptions(root))
	if len(rep.Healed) != 1 || rep.Healed[0].StaleLock == "" {
		t.Fatalf("healed: %+v", rep.Healed)
	}
	if tally := rep.Tally(); tally.Problems != 0 {
		t.Fatalf("problems left after the heal: %+v", rep.Sessions)
	}
	// The heal put b's backup back and, as fsck --repair does, refreshed
	// the stale store from the source: b is fresh when planned.
	if s := migResult(t, rep, b); s.Outcome != OutcomeSkipped {
		t.Fatalf("b: %+v", s)
	}
	if s := migResult(t, rep, a); s.Outcome != OutcomeSkipped {
		t.Fatalf("a: %+v", s)
	}
	for _, p := range []string{staging, backup} {
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Errorf("%s left (%v)", p, err)
		}
	}
	for _, l := range migLeftovers(t, root) {
		if !strings.HasPrefix(l, ledger.PisessDir+"/") {
			t.Errorf("leftover outside the quarantine: %v", l)
		}
	}
	q := ledger.Quarantine(root, rep.Healed[0].CorrelationID)
	if _, err := os.Stat(q); err != nil {
		t.Errorf("the staging directory is not in the heal's quarantine: %v", err)
	}
	recs := migJournal(t, root, rep.Healed[0].CorrelationID)
	kinds := map[ledger.NoteKind]int{}
	for _, r := range recs {
		if r.Note != nil {
			kinds[r.Note.Kind]++
		}
	}
	if kinds[ledger.NoteRestored] != 1 || kinds[ledger.NoteQuarantined] != 1 || kinds[ledger.NoteRepair] < 1 {
		t.Errorf("the heal's journal notes: %v", kinds)
	}
	for _, p := range []string{a, b} {
		if st, err := verify.Status(p); err != nil || st.Class != verify.ClassMigrated {
			t.Errorf("%s: %+v %v", p, st, err)
		}
	}
	// runs lists the heal as a repair run of its own.
	rr, err := ledger.Runs(context.Background(), []string{root})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, r := range rr[0].Runs {
		if r.CorrelationID == rep.Healed[0].CorrelationID {
			found = r.Command == "fsck --repair" && r.Repairs > 0
		}
	}
	if !found {
		t.Errorf("runs does not list the heal as an fsck --repair run: %+v", rr[0].Runs)
	}
	// The next run has nothing to do.
	again := migRun(t, migOptions(root))
	if len(again.Healed) != 0 || again.Tally().Problems != 0 || again.Totals.Skipped != 2 {
		t.Fatalf("the run after the heal: %+v", again.Totals)
	}
}

// TestMigrateHealsOnlyWhatIsPisesss: without a taken-over lock, a backup
// named after a run the journal knows is healed, but a staging directory
// nothing marks as pisess's (the reference uses the same names) is left
// for fsck --repair, as before.
func TestMigrateHealsOnlyWhatIsPisesss(t *testing.T) {
	root, a, b, staging, backup := deadRunTree(t, false)
	rep := migRun(t, migOptions(root))
	if len(rep.Healed) != 1 {
		t.Fatalf("healed: %+v", rep.Healed)
	}
	if _, err := os.Lstat(backup); !os.IsNotExist(err) {
		t.Errorf("the pisess backup was not healed (%v)", err)
	}
	if st, err := verify.Status(b); err != nil || st.Class != verify.ClassMigrated {
		t.Errorf("b: %+v %v", st, err)
	}
	if _, err := os.Lstat(staging); err != nil {
		t.Errorf("a staging directory not recognisably pisess's was touched: %v", err)
	}
	if s := migResult(t, rep, a); s.Action != PlanNeedsRepair || !strings.Contains(s.Reason, "fsck --repair") {
		t.Errorf("a: %+v", s)
	}
}

// TestMigrateHealsStagingNamedAfterItsPlan: a staging directory a run
// could not remove (EMFILE, EIO) holds no ledger to say whose it is; its
// name, rollback.StagingPath of a migration the journal planned, does: the
// next run heals it (quarantined) and migrates the session, where before
// it was left, needs repair, on every run (issue 32 §2).
func TestMigrateHealsStagingNamedAfterItsPlan(t *testing.T) {
	root := t.TempDir()
	a, _ := migSession(t, root, "a", 3)
	const mid = "6f1c2a7e-5b3d-4c8e-9a1f-0d2e3c4b5a69"
	sidecar := discover.SidecarPath(a)
	staging := rollback.StagingPath(sidecar, mid)
	if err := os.MkdirAll(filepath.Join(staging, "segments"), 0o700); err != nil {
		t.Fatal(err)
	}
	j, err := ledger.OpenJournal(root)
	if err != nil {
		t.Fatal(err)
	}
	if err := j.AppendEvents(true, wire.MigrationEvent{MigrationID: mid, Phase: wire.PhasePlanned, At: "2026-01-01T00:00:00.000Z",
		SourcePath: a, TargetPath: sidecar, SourceFormat: wire.SourceFormat(readers.FormatJSONLv3), TargetFormat: wire.FormatNativeV2,
		Outcome: wire.OutcomeOK, CorrelationID: "emfile-run-0001"}); err != nil {
		t.Fatal(err)
	}
	j.Close()
	rep := migRun(t, migOptions(root))
	if len(rep.Healed) != 1 {
		t.Fatalf("healed: %+v", rep.Healed)
	}
	if _, err := os.Lstat(staging); !os.IsNotExist(err) {
		t.Errorf("the staging directory of a planned migration was not healed (%v)", err)
	}
	if s := migResult(t, rep, a); s.Outcome != OutcomeDone {
		t.Errorf("a: %+v", s)
	}
}
