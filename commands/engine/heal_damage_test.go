package engine

import (
	"os"
	"path/filepath"
	"testing"

	"pisess/fixtures"
	"pisess/ledger"
	"pisess/readers/discover"
	"pisess/verify"
	"pisess/writers/store"
)

// flipMiddleFrame flips a payload byte in the middle of the sidecar's
// first segment.
func flipMiddleFrame(tb testing.TB, sidecar string) {
	tb.Helper()
	seg := store.SegmentPath(sidecar, 1)
	fi, err := os.Stat(seg)
	if err != nil {
		tb.Fatal(err)
	}
	b, err := os.ReadFile(seg)
	if err != nil {
		tb.Fatal(err)
	}
	for i := fi.Size() / 2; i < fi.Size(); i++ {
		if c := b[i]; c >= 'a' && c <= 'z' {
			fixtures.FlipByte(tb, seg, i)
			return
		}
	}
	tb.Fatal("no letter to flip")
}

// healNoted reports whether the run journaled a repair of session.
func healNoted(tb testing.TB, tree, cid, session string) bool {
	tb.Helper()
	for _, r := range migJournal(tb, tree, cid) {
		if n := r.Note; n != nil && n.Kind == ledger.NoteRepair && (n.Session == session || filepath.Join(tree, n.Session) == session) {
			return true
		}
	}
	return false
}

// TestMigrateHealsADamagedSidecar is issue 34 §2 at the engine: a frame
// damaged in a migrated sidecar is found by the plan's status (as deep as
// pi's open: verify.StatusOpen) with no fresh cache to vouch for it, and
// the run rebuilds the sidecar from the source — a repair, journaled,
// counted healed, the damaged sidecar kept in the quarantine — not a
// problem left (the run's tally is clean). A sidecar whose damage only
// fsck may mend (a loosened mode) is left needing repair.
func TestMigrateHealsADamagedSidecar(t *testing.T) {
	tree := t.TempDir()
	damaged, _ := migSession(t, tree, "damaged", 30)
	loose, _ := migSession(t, tree, "loose", 3)
	migRun(t, migOptions(tree))
	flipMiddleFrame(t, discover.SidecarPath(damaged))
	if err := os.Chmod(store.SegmentPath(discover.SidecarPath(loose), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(tree, discover.PisessDir, ledger.FreshCacheName))
	rep := migRun(t, migOptions(tree))
	s := migResult(t, rep, damaged)
	if s.Outcome != OutcomeDone || !s.Healed || s.Class != verify.ClassCorrupt || rep.Totals.Healed != 1 {
		t.Fatalf("the damaged sidecar: %s %s healed %v (%s); totals %+v", s.Action, s.Outcome, s.Healed, s.Reason, rep.Totals)
	}
	if _, err := os.Stat(filepath.Join(s.Displaced, "manifest.json")); err != nil {
		t.Fatalf("the damaged sidecar is not kept in the quarantine: %v", err)
	}
	if !healNoted(t, tree, rep.CorrelationID, damaged) {
		t.Error("no repair note in the journal")
	}
	if st, err := verify.Status(damaged); err != nil || st.Class != verify.ClassMigrated {
		t.Errorf("after the heal: %+v %v", st, err)
	}
	if l := migResult(t, rep, loose); l.Outcome != OutcomeLeft {
		t.Errorf("a loosened mode: %s (%s), want left for fsck", l.Outcome, l.Reason)
	}
	if rep.Tally().Problems != 1 {
		t.Errorf("problems %d, want the loose one only", rep.Tally().Problems)
	}
}

// TestRefreshFindsADamagedBase: a stale sidecar whose frame is damaged,
// taken for sound by the plan (here a shallow status stands in for a
// judgment that could not see it), is found damaged by the refresh in
// place that checks every frame it continues: the full rebuild that
// follows is a heal, and the damaged sidecar is kept in the quarantine,
// not discarded as reproducible.
func TestRefreshFindsADamagedBase(t *testing.T) {
	tree := t.TempDir()
	path, _ := migSession(t, tree, "busy", 30)
	migRun(t, migOptions(tree))
	incAppend(t, path, 2, "r1")
	sidecar := discover.SidecarPath(path)
	fixtures.MarkDirty(t, sidecar)
	flipMiddleFrame(t, sidecar)
	sm := &seams{}
	sm.judges.StatusOpen = verify.StatusFast
	rep := migRun(t, seamed(tree, sm))
	s := migResult(t, rep, path)
	if s.Outcome != OutcomeDone || s.Incremental || !s.Healed {
		t.Fatalf("%s %s incremental %v healed %v: %s %v", s.Action, s.Outcome, s.Incremental, s.Healed, s.Reason, s.Notes)
	}
	if s.Displaced == "" {
		t.Fatalf("the damaged sidecar was not kept: %v", s.Notes)
	}
	if _, err := os.Stat(filepath.Join(s.Displaced, "manifest.json")); err != nil {
		t.Fatalf("the damaged sidecar is not in the quarantine: %v", err)
	}
	if st, err := verify.Status(path); err != nil || st.Class != verify.ClassMigrated {
		t.Errorf("after the heal: %+v %v", st, err)
	}
}
