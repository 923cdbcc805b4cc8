package rollback

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"pisess/fixtures"
	"pisess/ledger"
	"pisess/readers/jsonl"
	"pisess/verify"
	"pisess/writers"
	"pisess/writers/durable"
)

// checkInstalled asserts that the sidecar of session verifies against it
// and passes every acceptance rule pi applies.
func checkInstalled(tb testing.TB, session string) {
	tb.Helper()
	sidecar := SidecarPath(session)
	src, err := jsonl.Open(session, jsonl.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	defer src.Close()
	rep, err := verify.AgainstSource(context.Background(), src, sidecar, verify.Options{SourcePath: session})
	if err != nil {
		tb.Fatal(err)
	}
	if !rep.Verified() || len(rep.Findings) > 0 {
		tb.Fatalf("installed sidecar does not verify: %v", rep.Findings)
	}
	if f := verify.Acceptance(sidecar, session, verify.AcceptOptions{OwnerUID: -1, OwnerGID: -1}); len(f) > 0 {
		tb.Fatalf("installed sidecar breaks acceptance rules: %v", f)
	}
}

func TestCutoverFresh(t *testing.T) {
	f := newTreeFixture(t, 5)
	src := fixtures.SHA256File(t, f.session)
	m := migrateRun(t, f.tree, f.session, testRun)
	if m.result.Displaced != "" {
		t.Fatalf("displaced %q with no sidecar before", m.result.Displaced)
	}
	if _, err := os.Lstat(m.staging); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("staging still there: %v", err)
	}
	checkInstalled(t, f.session)
	if fixtures.SHA256File(t, f.session) != src {
		t.Fatal("the source changed")
	}
	j, _ := ledger.OpenJournal(f.tree)
	recs, err := j.Records(testRun)
	if err != nil {
		t.Fatal(err)
	}
	var phases []string
	for _, r := range recs {
		if r.Event != nil {
			phases = append(phases, string(r.Event.Phase))
		} else {
			phases = append(phases, string(r.Note.Kind))
		}
	}
	if strings.Join(phases, ",") != "cutover_commit,installed,completed" {
		t.Fatalf("journal records %v", phases)
	}
	if !strings.Contains(recs[1].Note.Detail, "ino=") {
		t.Errorf("installed note lacks the staging identity: %q", recs[1].Note.Detail)
	}
	if bad, err := j.Unfinished(); err != nil || len(bad) > 0 {
		t.Fatalf("unfinished after a cutover: %v %v", bad, err)
	}
}

func TestCutoverRefreshQuarantinesTheOldSidecar(t *testing.T) {
	f := newTreeFixture(t, 5)
	migrateRun(t, f.tree, f.session, "run-0001-first")
	old := fixtures.TreeDigest(t, f.sidecar)
	appendEntries(t, f.session, 6, 8) // pi wrote the session: the sidecar is stale
	m := migrateRun(t, f.tree, f.session, "run-0002-second")
	want := ledger.QuarantinePath(f.tree, "run-0002-second", f.rel, kindDisplaced)
	if m.result.Displaced != want {
		t.Fatalf("displaced at %q, want %q", m.result.Displaced, want)
	}
	if d := diffMaps(fixtures.TreeDigest(t, want), old); d != "" {
		t.Fatalf("the displaced sidecar is not byte-identical in the quarantine:\n%s", d)
	}
	if _, err := os.Lstat(BackupPath(f.sidecar, "run-0002-second")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("backup left beside the sidecar: %v", err)
	}
	checkInstalled(t, f.session)
	j2, _ := mustJournal(t, f.tree)
	recs, _ := j2.Records("run-0002-second")
	var displaced *ledger.Note
	for _, r := range recs {
		if r.Note != nil && r.Note.Kind == ledger.NoteDisplaced {
			displaced = r.Note
		}
	}
	if displaced == nil || displaced.QuarantinePath != want || displaced.Path != f.sidecar {
		t.Fatalf("displaced note: %+v", displaced)
	}
}

func mustJournal(tb testing.TB, tree string) (*ledger.Journal, error) {
	tb.Helper()
	j, err := ledger.OpenJournal(tree)
	if err != nil {
		tb.Fatal(err)
	}
	return j, nil
}

// stageOnly stages and verifies a store without cutting it over.
func stageOnly(tb testing.TB, f treeFixture) (verify.Passed, string) {
	tb.Helper()
	ctx := context.Background()
	staging := f.sidecar + ".staging.0123456789abcdef0123456789abcdef"
	fp, err := verify.Fingerprint(f.session)
	if err != nil {
		tb.Fatal(err)
	}
	src, err := jsonl.Open(f.session, jsonl.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := writers.Stage(ctx, src, staging, writers.StageOptions{Clock: fixedClock}); err != nil {
		tb.Fatal(err)
	}
	src.Close()
	src, _ = jsonl.Open(f.session, jsonl.Options{})
	defer src.Close()
	p, rep, err := verify.Verified(ctx, src, staging, f.session, verify.Options{Fingerprint: &fp})
	if err != nil {
		tb.Fatalf("verify: %v %v", err, rep.Findings)
	}
	return p, staging
}

func TestCutoverRefusesWithoutProof(t *testing.T) {
	f := newTreeFixture(t, 3)
	p, staging := stageOnly(t, f)
	j, _ := mustJournal(t, f.tree)
	spec := CutoverSpec{SessionPath: f.session, StagingDir: staging, SidecarDir: f.sidecar, Tree: f.tree,
		CorrelationID: testRun, RelPath: f.rel, Journal: j}
	before := fixtures.TreeDigest(t, f.tree)

	other := spec
	other.StagingDir = f.sidecar + ".staging.ffffffffffffffffffffffffffffffff"
	for name, tc := range map[string]struct {
		p    verify.Passed
		spec CutoverSpec
	}{
		"zero proof":              {verify.Passed{}, spec},
		"proof of another store":  {p, other},
		"malformed correlation":   {p, func() CutoverSpec { s := spec; s.CorrelationID = "bad id"; return s }()},
		"staging not a sibling":   {p, func() CutoverSpec { s := spec; s.SidecarDir = filepath.Join(f.tree, "x.v2"); return s }()},
		"no journal to record in": {p, func() CutoverSpec { s := spec; s.Journal = nil; return s }()},
	} {
		if _, err := Cutover(context.Background(), tc.p, tc.spec); err == nil {
			t.Errorf("%s: cutover accepted", name)
		}
	}
	if d := diffMaps(fixtures.TreeDigest(t, f.tree), before); d != "" {
		t.Fatalf("refused cutovers changed the tree:\n%s", d)
	}
}

// A failed install rename puts the displaced sidecar back, as the
// reference does, and the staging store stays for a re-run.
func TestCutoverFailedInstallRestoresTheOldSidecar(t *testing.T) {
	f := newTreeFixture(t, 3)
	migrateRun(t, f.tree, f.session, "run-0001-first")
	old := fixtures.TreeDigest(t, f.sidecar)
	p, staging := stageOnly(t, f)
	j, _ := mustJournal(t, f.tree)
	_, err := Cutover(context.Background(), p, CutoverSpec{SessionPath: f.session, StagingDir: staging, SidecarDir: f.sidecar,
		Tree: f.tree, CorrelationID: testRun, RelPath: f.rel, Journal: j,
		Ops: durable.FaultyOps(durable.FaultRule{Op: durable.FaultRename, Pattern: filepath.Base(staging), Err: syscall.EIO})})
	if !errors.Is(err, syscall.EIO) {
		t.Fatalf("error %v, want EIO", err)
	}
	if d := diffMaps(fixtures.TreeDigest(t, f.sidecar), old); d != "" {
		t.Fatalf("the old sidecar is not back as it was:\n%s", d)
	}
	if _, err := os.Lstat(staging); err != nil {
		t.Fatalf("staging gone: %v", err)
	}
	if _, err := os.Lstat(BackupPath(f.sidecar, testRun)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("backup left: %v", err)
	}
	// A rollback of that run finds nothing of it installed.
	rep, err := ByCorrelation(context.Background(), f.tree, testRun, Options{})
	if err != nil || len(rep.Sessions) != 1 || rep.Sessions[0].Action != ActionNothingInstalled {
		t.Fatalf("rollback of a failed cutover: %+v %v", rep, err)
	}
	if d := diffMaps(fixtures.TreeDigest(t, f.sidecar), old); d != "" {
		t.Fatalf("the rollback touched the old sidecar:\n%s", d)
	}
}

// Run as root over a tree that belongs to someone else, everything a
// cutover creates or installs belongs to the session's owner, with
// private modes.
func TestCutoverOwnership(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	const uid, gid = 4242, 4343
	f := newTreeFixture(t, 4)
	chownAll(t, f.tree, uid, gid)
	migrateRun(t, f.tree, f.session, "run-0001-first")
	appendEntries(t, f.session, 5, 6)
	m := migrateRun(t, f.tree, f.session, "run-0002-second")
	for _, root := range []string{f.sidecar, m.result.Displaced, filepath.Join(f.tree, ledger.PisessDir)} {
		err := filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
			if err != nil {
				return err
			}
			st := fi.Sys().(*syscall.Stat_t)
			if int(st.Uid) != uid || int(st.Gid) != gid {
				t.Errorf("%s owned by %d:%d", p, st.Uid, st.Gid)
			}
			if fi.Mode().Perm()&0o077 != 0 {
				t.Errorf("%s has mode %v", p, fi.Mode().Perm())
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	// A rollback as root keeps it so, and so is the lock file it takes.
	if _, err := ByCorrelation(context.Background(), f.tree, "run-0002-second", Options{}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{f.sidecar, f.session + ".lock", ledger.QuarantinePath(f.tree, "run-0002-second", f.rel, kindRolledBackStore)} {
		fi, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		if st := fi.Sys().(*syscall.Stat_t); int(st.Uid) != uid {
			t.Errorf("%s owned by %d after the rollback", p, st.Uid)
		}
	}
}

func chownAll(tb testing.TB, root string, uid, gid int) {
	tb.Helper()
	err := filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, gid)
	})
	if err != nil {
		tb.Fatal(err)
	}
}

func TestSidecarAndBackupPaths(t *testing.T) {
	if got := SidecarPath("/t/--a--/2026_x.jsonl"); got != "/t/--a--/2026_x.v2" {
		t.Errorf("SidecarPath: %s", got)
	}
	if got := SidecarPath("/t/x.y.sqlite"); got != "/t/x.y.v2" {
		t.Errorf("SidecarPath: %s", got)
	}
	b := BackupPath("/t/x.v2", testRun)
	if !strings.HasPrefix(b, "/t/x.v2.backup.") || len(b)-len("/t/x.v2.backup.") != 32 || b != BackupPath("/t/x.v2/", testRun) || b == BackupPath("/t/x.v2", "run-0002-other") {
		t.Errorf("BackupPath: %s", b)
	}
	if _, ok := sourceOfSidecar("/nonexistent/x.v2"); ok {
		t.Error("a sidecar without a source")
	}
}

// TestCutoverDisplacesWhatIsNoStore: a regular file, a FIFO or a symlink
// at the sidecar's path (pi refuses each) is displaced as a store is — the
// entry itself renamed into the quarantine, its target untouched, a
// displaced note saying what it was — and the new sidecar installed (issue
// 32 §3: Cutover refused, so no rebuild could ever replace it).
func TestCutoverDisplacesWhatIsNoStore(t *testing.T) {
	for _, tc := range []struct {
		name, says string
		make       func(t *testing.T, path, outside string)
	}{
		{"a regular file", "a regular file", func(t *testing.T, p, _ string) {
			if err := os.WriteFile(p, []byte("not a store\n"), 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		{"a FIFO", "special file", func(t *testing.T, p, _ string) {
			if err := syscall.Mkfifo(p, 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		{"a symlink", "a symlink to", func(t *testing.T, p, outside string) {
			if err := os.Symlink(outside, p); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newTreeFixture(t, 3)
			outside := filepath.Join(t.TempDir(), "target")
			if err := os.Mkdir(outside, 0o700); err != nil {
				t.Fatal(err)
			}
			tc.make(t, f.sidecar, outside)
			m := migrateRun(t, f.tree, f.session, testRun)
			want := ledger.QuarantinePath(f.tree, testRun, f.rel, kindDisplaced)
			if m.result.Displaced != want {
				t.Fatalf("displaced at %q, want %q", m.result.Displaced, want)
			}
			if fi, err := os.Lstat(want); err != nil || fi.IsDir() {
				t.Fatalf("the displaced entry at %s: %v", want, err)
			}
			checkInstalled(t, f.session)
			if entries, err := os.ReadDir(outside); err != nil || len(entries) != 0 {
				t.Errorf("the link's target changed: %v %v", entries, err)
			}
			j, _ := mustJournal(t, f.tree)
			recs, _ := j.Records(testRun)
			var note *ledger.Note
			for _, r := range recs {
				if r.Note != nil && r.Note.Kind == ledger.NoteDisplaced {
					note = r.Note
				}
			}
			if note == nil || note.QuarantinePath != want || !strings.Contains(note.Detail, tc.says) {
				t.Fatalf("displaced note %+v, want one naming %s and saying %q", note, want, tc.says)
			}
		})
	}
}

// TestCutoverFailsWhenTheDisplacedNoteIsLost: the displaced note is what
// lets a rollback of the run put the old sidecar back; a cutover that
// cannot write it is an error saying where the old sidecar is, never a
// success with a warning (issue 32 §4).
func TestCutoverFailsWhenTheDisplacedNoteIsLost(t *testing.T) {
	f := newTreeFixture(t, 3)
	migrateRun(t, f.tree, f.session, "run-0001-first")
	appendEntries(t, f.session, 4, 5)
	p, staging := stageOnly(t, f)
	// The cutover's first two records (its intent and the installed note)
	// are written; the third, the displaced note, is not.
	j, err := ledger.OpenJournalWith(durable.FaultyOps(durable.FaultRule{Op: durable.FaultWrite, Pattern: ledger.JournalName, Err: syscall.EIO, Skip: 2}), f.tree)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Cutover(context.Background(), p, CutoverSpec{SessionPath: f.session, StagingDir: staging, SidecarDir: f.sidecar,
		Tree: f.tree, CorrelationID: testRun, RelPath: f.rel, Journal: j})
	want := ledger.QuarantinePath(f.tree, testRun, f.rel, kindDisplaced)
	if !errors.Is(err, syscall.EIO) || !strings.Contains(err.Error(), want) || res.Displaced != want {
		t.Fatalf("Cutover: %+v, %v; want an EIO error naming %s", res, err, want)
	}
	if _, err := os.Lstat(want); err != nil {
		t.Errorf("the old sidecar is not where the error says: %v", err)
	}
}
