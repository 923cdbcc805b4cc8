package engine

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"pisess/fixtures"
	"pisess/fixtures/trees"
	"pisess/ledger"
	"pisess/readers/discover"
	"pisess/writers/wire"
)

// TestMigrateVectorsTree migrates a tree holding every reference vector
// session (accept, edge, realpi and reject; rollover has its own test) and
// proves the end-to-end claims: each session the reference
// migrates gets a sidecar whose segments, index and manifest are the
// reference's bytes, verified, with its whole migration in its own ledger
// and in the tree journal under the run's correlation id and a clean
// fingerprint of the source; each one the reference refuses is refused
// with its line and reason and gets nothing; no source changes; and a
// second run changes nothing but the journal.
func TestMigrateVectorsTree(t *testing.T) {
	dir, vs := migVectorsTree(t, trees.Without(trees.Vectors(t), "accept/rollover"))
	sources := trees.Digests(t, vs)

	rep := migRun(t, migOptions(dir))
	cid := rep.CorrelationID
	if !ledger.ValidCorrelationID(cid) || rep.DryRun {
		t.Fatalf("correlation id %q, dry run %v", cid, rep.DryRun)
	}
	if len(rep.Sessions) != len(vs) {
		t.Fatalf("%d sessions reported for %d vectors", len(rep.Sessions), len(vs))
	}
	recs := migJournal(t, dir, cid)
	migrated, refused := 0, 0
	for _, v := range vs {
		s := migResult(t, rep, v.Path)
		if v.HasReference() {
			migrated++
			if s.Outcome != OutcomeDone || s.Action != PlanMigrate || s.SourceFormat != "jsonl_v3" || s.Error != nil {
				t.Errorf("%s: %s/%s, error %+v", v.Name, s.Action, s.Outcome, s.Error)
				continue
			}
			migAllVerified(t, s)
			trees.SameStore(t, v.Sidecar(), v.Reference)
			uid, gid := migOwner(t, v.Path)
			migCheckInstalled(t, v.Path, cid, uid, gid)
			migCheckJournal(t, recs, v.Path, cid)
			continue
		}
		refused++
		migCheckRefused(t, v, s)
		for _, ph := range migEventPhases(recs, v.Path) {
			if ph == wire.PhaseCutoverCommit || ph == wire.PhaseCompleted {
				t.Errorf("%s: refused, yet the journal has %s", v.Name, ph)
			}
		}
	}
	if migrated == 0 || refused == 0 {
		t.Fatalf("the vectors hold %d migratable and %d refused sessions", migrated, refused)
	}
	if tt := rep.Totals; tt.Migrated != migrated || tt.Refused != refused || tt.Failed+tt.Busy+tt.NeedsRepair+tt.Skipped+tt.Refreshed != 0 {
		t.Errorf("totals %+v, want %d migrated and %d refused", tt, migrated, refused)
	}
	if got := rep.Tally(); got.Left() != 0 {
		t.Errorf("tally %+v, want no problem left (refusals are notices)", got)
	}
	strict := rep
	strict.Strict = true
	if got := strict.Tally(); got.Left() != refused {
		t.Errorf("strict tally %+v, want %d problems left (the refusals)", got, refused)
	}
	trees.SameDigests(t, sources, trees.Digests(t, vs))
	if l := migLeftovers(t, dir); len(l) > 0 {
		t.Errorf("leftovers %v", l)
	}

	// Re-running is a no-op: every sidecar is fresh, every refusal stays.
	before := fixtures.TreeDigest(t, dir)
	again := migRun(t, migOptions(dir))
	for _, v := range vs {
		s := migResult(t, again, v.Path)
		switch {
		case v.HasReference() && (s.Action != PlanSkip || s.Outcome != OutcomeSkipped):
			t.Errorf("%s: re-run %s/%s (%s), want skip", v.Name, s.Action, s.Outcome, s.Reason)
		case !v.HasReference() && s.Outcome != OutcomeRefused:
			t.Errorf("%s: re-run %s/%s, want refused", v.Name, s.Action, s.Outcome)
		}
	}
	if d := migDigestDiff(before, fixtures.TreeDigest(t, dir), migIsJournal); len(d) > 0 {
		t.Errorf("the re-run changed %v", d)
	}
	if tt := again.Totals; tt.Skipped != migrated || tt.Migrated+tt.Refreshed != 0 {
		t.Errorf("re-run totals %+v", tt)
	}
	for _, r := range migJournal(t, dir, again.CorrelationID) {
		if r.Event != nil && (r.Event.Phase == wire.PhaseCutoverCommit || r.Event.Phase == wire.PhaseCompleted) {
			t.Errorf("the re-run journaled %s for %s", r.Event.Phase, r.Event.SourcePath)
		}
	}
}

// migCheckRefused checks the result of a vector the reference refuses: a
// refusal with a class, the line (the REFUSED file's, when it names one)
// and, for the typed model's refusals ("error":"entry"), the reference's
// own words; and nothing written for it.
func migCheckRefused(tb testing.TB, v trees.Vector, s SessionResult) {
	tb.Helper()
	if s.Outcome != OutcomeRefused || s.Action != PlanRefuse || s.Error == nil || s.Error.Class == "" || s.Reason == "" {
		tb.Errorf("%s: %s/%s reason %q error %+v, want refused", v.Name, s.Action, s.Outcome, s.Reason, s.Error)
		return
	}
	if s.Error.Line <= 0 {
		tb.Errorf("%s: refused without a line: %+v", v.Name, s.Error)
	}
	if r := v.Refused; r != nil {
		if r.Line > 0 && s.Error.Line != r.Line {
			tb.Errorf("%s: refused at line %d, the reference at line %d", v.Name, s.Error.Line, r.Line)
		}
		if r.Error == "entry" && (!strings.Contains(s.Reason, r.Detail) || !strings.Contains(s.Error.Message, r.Detail)) {
			tb.Errorf("%s: reason %q / message %q lack the reference's %q", v.Name, s.Reason, s.Error.Message, r.Detail)
		}
	}
	if s.Verification != nil && s.Verification.EntryCountMatch {
		tb.Errorf("%s: refused, yet verified: %+v", v.Name, s.Verification)
	}
	if _, err := os.Lstat(v.Sidecar()); !errors.Is(err, fs.ErrNotExist) {
		tb.Errorf("%s: refused, yet %s exists (%v)", v.Name, v.Sidecar(), err)
	}
}

// TestMigrateRollover migrates accept/rollover alone with 4096-byte
// segments, as its reference store was written: 14 segments, each
// byte-identical, frameSeq restarting in each.
func TestMigrateRollover(t *testing.T) {
	dir, vs := migVectorsTree(t, trees.Only(trees.Vectors(t, trees.Accept), "accept/rollover"))
	v := vs[0]
	src := fixtures.SHA256File(t, v.Path)
	opt := migOptions(dir)
	opt.MaxSegmentBytes = v.MaxSegmentBytes
	rep := migRun(t, opt)
	s := migResult(t, rep, v.Path)
	if s.Outcome != OutcomeDone {
		t.Fatalf("%s/%s: %+v", s.Action, s.Outcome, s.Error)
	}
	migAllVerified(t, s)
	trees.SameStore(t, v.Sidecar(), v.Reference)
	segs, _ := filepath.Glob(filepath.Join(v.Sidecar(), "segments", "*.seg"))
	if len(segs) != 14 {
		t.Errorf("%d segments, want 14", len(segs))
	}
	uid, gid := migOwner(t, v.Path)
	migCheckInstalled(t, v.Path, rep.CorrelationID, uid, gid)
	if fixtures.SHA256File(t, v.Path) != src {
		t.Error("the source changed")
	}
}

// TestMigrateDryRun proves that a dry run writes nothing in the tree (not
// .pisess/, not a lock file, not a staging directory: the tree's digest is
// unchanged) while it builds and verifies each session elsewhere and
// reports what verification found, including the refresh of a stale
// sidecar, which it leaves exactly as it is.
func TestMigrateDryRun(t *testing.T) {
	all := trees.Vectors(t, trees.Accept, trees.RealPi, trees.Reject)
	dir, vs := migVectorsTree(t, trees.Only(all, "accept/tricky", "accept/header_only", "accept/idless_entries",
		"realpi/01a20023-7339-7074-bf10-5596b6f1179c", "realpi/my-custom-session-id", "reject/v2_hookmessage"))
	// One session with a stale sidecar: migrated, then appended to.
	stale, last := migSession(t, dir, "stale", 3)
	migRun(t, migOptions(stale))
	migAppend(t, stale, migEntryLine("f0000001", last, "later"))
	before := fixtures.TreeDigest(t, dir)

	opt := migOptions(dir)
	opt.DryRun = true
	rep := migRun(t, opt)
	if !rep.DryRun {
		t.Error("report not marked as a dry run")
	}
	if d := migDigestDiff(before, fixtures.TreeDigest(t, dir), nil); len(d) > 0 {
		t.Errorf("the dry run changed the tree: %v", d)
	}
	for _, v := range vs {
		s := migResult(t, rep, v.Path)
		if v.HasReference() {
			if s.Outcome != OutcomeChecked || s.Action != PlanMigrate {
				t.Errorf("%s: %s/%s %+v, want migrate/verified", v.Name, s.Action, s.Outcome, s.Error)
			}
			migAllVerified(t, s)
			if s.Entries == 0 && v.Name != "accept/header_only" {
				t.Errorf("%s: dry run reports no entries", v.Name)
			}
			continue
		}
		migCheckRefused(t, v, s)
	}
	s := migResult(t, rep, stale)
	if s.Action != PlanRefresh || s.Outcome != OutcomeChecked || s.Entries != 4 {
		t.Errorf("stale session: %s/%s, %d entries: %s", s.Action, s.Outcome, s.Entries, s.Reason)
	}
	migAllVerified(t, s)
	if rep.Totals.Verified != 4 || rep.Totals.Migrated+rep.Totals.Refreshed != 0 {
		t.Errorf("totals %+v", rep.Totals)
	}
}

// TestMigrateDryRunFreshTree: a dry run over a tree pisess never touched
// leaves no .pisess/ and no lock file behind, and removes the temporary
// directory it built in.
func TestMigrateDryRunFreshTree(t *testing.T) {
	dir := t.TempDir()
	scratch := t.TempDir()
	t.Setenv("TMPDIR", scratch)
	migSession(t, dir, "one", 2)
	migSession(t, dir, "two", 5)
	before := fixtures.TreeDigest(t, dir)
	opt := migOptions(dir)
	opt.DryRun = true
	rep := migRun(t, opt)
	if left, err := os.ReadDir(scratch); err != nil || len(left) > 0 {
		t.Errorf("the dry run left %v in its temporary directory (%v)", left, err)
	}
	if d := migDigestDiff(before, fixtures.TreeDigest(t, dir), nil); len(d) > 0 {
		t.Errorf("the dry run changed the tree: %v", d)
	}
	if _, err := os.Lstat(filepath.Join(dir, discover.PisessDir)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the dry run made %s (%v)", discover.PisessDir, err)
	}
	for rel := range fixtures.TreeDigest(t, dir) {
		if strings.HasSuffix(rel, ".lock") {
			t.Errorf("the dry run left a lock file %s", rel)
		}
	}
	if rep.Totals.Verified != 2 {
		t.Errorf("totals %+v", rep.Totals)
	}
	for _, s := range rep.Sessions {
		migAllVerified(t, s)
	}
}

// migAppend appends text to path, as pi's appendFileSync does.
func migAppend(tb testing.TB, path, text string) {
	tb.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := f.WriteString(text); err != nil {
		tb.Fatal(err)
	}
	if err := f.Close(); err != nil {
		tb.Fatal(err)
	}
}

// migOwner returns the owner of path.
func migOwner(tb testing.TB, path string) (int, int) {
	tb.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		tb.Fatal(err)
	}
	uid, gid, ok := migStatOwner(fi)
	if !ok {
		tb.Fatalf("%s: no owner", path)
	}
	return uid, gid
}
