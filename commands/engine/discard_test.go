package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"pisess/fixtures"
	"pisess/fixtures/trees"
	"pisess/ledger"
	"pisess/readers/discover"
	"pisess/verify"
	"pisess/writers/durable"
)

// quarantineFiles counts the regular files under the tree's quarantine.
func quarantineFiles(tb testing.TB, tree string) int {
	tb.Helper()
	n := 0
	err := filepath.WalkDir(filepath.Join(tree, ledger.PisessDir, ledger.QuarantineDir), func(p string, d fs.DirEntry, err error) error {
		if os.IsNotExist(err) {
			return filepath.SkipDir
		}
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			n++
		}
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	return n
}

// TestRefreshBoundedDisk (issue 12, item 7): cron refreshes of a session pi
// keeps appending to do not pile copies of the old sidecar up in the
// quarantine; each is journaled as discarded; a rollback of such a refresh
// leaves no sidecar, and pi reads the session file (unmigrated), as it did
// with the stale one. Both pis: the TypeScript pi leaves the old
// fingerprint, the Rust pi marks the sidecar dirty before each append and
// so drops it (FORMAT.md §8, §12): the refresh record says then what the
// displaced sidecar was built from.
func TestRefreshBoundedDisk(t *testing.T) {
	for _, dirty := range []bool{false, true} {
		name := "fingerprint left (TypeScript pi)"
		if dirty {
			name = "marked dirty (Rust pi)"
		}
		t.Run(name, func(t *testing.T) { testRefreshBoundedDisk(t, dirty) })
	}
}

func testRefreshBoundedDisk(t *testing.T, dirty bool) {
	root := t.TempDir()
	path, last := migSession(t, root, "busy", 5)
	migRun(t, rebuildOptions(root))
	var rep MigrateReport
	for i := 1; i <= 5; i++ {
		id := migEntryID(100 + i)
		if dirty {
			fixtures.MarkDirty(t, discoverSidecar(path))
		}
		migAppend(t, path, migEntryLine(id, last, "more"))
		last = id
		rep = migRun(t, rebuildOptions(root))
		s := migResult(t, rep, path)
		if s.Outcome != OutcomeDone || s.Action != PlanRefresh || s.Incremental || s.Displaced != "" || !strings.Contains(strings.Join(s.Notes, " "), "not kept") {
			t.Fatalf("refresh %d: %+v", i, s)
		}
		if n := quarantineFiles(t, root); n != 0 {
			t.Fatalf("refresh %d: %d files in the quarantine", i, n)
		}
		if _, err := os.Lstat(ledger.Quarantine(root, rep.CorrelationID)); !os.IsNotExist(err) {
			t.Fatalf("refresh %d: the run's emptied quarantine directory is still there (%v)", i, err)
		}
	}
	recs := migJournal(t, root, rep.CorrelationID)
	discarded := 0
	for _, r := range recs {
		if r.Note != nil && r.Note.Kind == ledger.NoteDiscarded {
			discarded++
		}
	}
	if discarded != 1 {
		t.Fatalf("%d discarded notes for the last run, want 1", discarded)
	}
	rb, err := rollbackTree(context.Background(), root, rep.CorrelationID, migClock)
	if err != nil || rollbackProblems(rb) != 0 {
		t.Fatalf("rollback of a refresh whose displaced sidecar was not kept: %+v %v", rb, err)
	}
	if _, err := os.Lstat(discover.SidecarPath(path)); !os.IsNotExist(err) {
		t.Fatalf("a sidecar is still installed after the rollback (%v)", err)
	}
	if st, err := verify.StatusFast(path); err != nil || st.Class != verify.ClassUnmigrated {
		t.Fatalf("after the rollback pi should read the session file: %+v %v", st, err)
	}
	// The next run migrates it again.
	if s := migResult(t, migRun(t, rebuildOptions(root)), path); s.Outcome != OutcomeDone {
		t.Fatalf("after the rollback: %+v", s)
	}
}

// TestRefreshKeepsWhatIsNotReproducible: the displaced sidecar stays in the
// quarantine when the source no longer holds the bytes it was built from,
// when neither the tree's journal nor its refresh record names the run
// that built it, and with
// --keep-displaced; and, for a sidecar pi marked dirty (no fingerprint),
// when the source was rewritten or no refresh record describes it.
func TestRefreshKeepsWhatIsNotReproducible(t *testing.T) {
	for _, c := range []struct {
		name   string
		before func(t *testing.T, root, path string) MigrateOptions
	}{
		{"source rewritten", func(t *testing.T, root, path string) MigrateOptions {
			rewriteFirstMessage(t, path)
			return rebuildOptions(root)
		}},
		{"marked dirty, source rewritten", func(t *testing.T, root, path string) MigrateOptions {
			fixtures.MarkDirty(t, discoverSidecar(path))
			rewriteFirstMessage(t, path)
			return rebuildOptions(root)
		}},
		{"marked dirty, no refresh record", func(t *testing.T, root, path string) MigrateOptions {
			fixtures.MarkDirty(t, discoverSidecar(path))
			migAppend(t, path, migEntryLine("e0000100", migEntryID(3), "more"))
			if err := os.Remove(ledger.RefreshRecordPath(root)); err != nil {
				t.Fatal(err)
			}
			return rebuildOptions(root)
		}},
		{"built by a run neither the journal nor the refresh record names", func(t *testing.T, root, path string) MigrateOptions {
			migAppend(t, path, migEntryLine("e0000100", migEntryID(3), "more"))
			if err := os.Truncate(ledger.JournalPath(root), 0); err != nil {
				t.Fatal(err)
			}
			forgetRecordedRuns(t, root)
			return rebuildOptions(root)
		}},
		{"--keep-displaced", func(t *testing.T, root, path string) MigrateOptions {
			migAppend(t, path, migEntryLine("e0000100", migEntryID(3), "more"))
			o := rebuildOptions(root)
			o.KeepDisplaced = true
			return o
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			path, _ := migSession(t, root, "s", 3)
			migRun(t, rebuildOptions(root))
			rep := migRun(t, c.before(t, root, path))
			s := migResult(t, rep, path)
			if s.Outcome != OutcomeDone || s.Displaced == "" {
				t.Fatalf("%+v", s)
			}
			if _, err := os.Stat(filepath.Join(s.Displaced, "manifest.json")); err != nil {
				t.Fatalf("the displaced sidecar was not kept: %v", err)
			}
		})
	}
}

// forgetRecordedRuns removes the correlation ids from the tree's refresh
// record, as an older pisess wrote it.
func forgetRecordedRuns(tb testing.TB, root string) {
	tb.Helper()
	var doc ledger.StateFile[map[string]any]
	b, err := os.ReadFile(ledger.RefreshRecordPath(root))
	if err != nil || json.Unmarshal(b, &doc) != nil || len(doc.Sessions) == 0 {
		tb.Fatalf("refresh record: %v %s", err, b)
	}
	for _, e := range doc.Sessions {
		if e["correlationId"] == nil {
			tb.Fatalf("the refresh record names no run: %v", e)
		}
		delete(e, "correlationId")
	}
	if b, err = json.Marshal(doc); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(ledger.RefreshRecordPath(root), b, 0o600); err != nil {
		tb.Fatal(err)
	}
}

// TestRefreshDiscardsWhatARecordVouchesFor: the refresh record names the
// run that installed a sidecar, so the displaced sidecar is discarded even
// when the journal no longer knows that run (pisess prune dropped it), and
// with a record of an older pisess (no run named) the journal still
// answers.
func TestRefreshDiscardsWhatARecordVouchesFor(t *testing.T) {
	for _, c := range []struct {
		name   string
		before func(t *testing.T, root string)
	}{
		{"the run that built it pruned from the journal", func(t *testing.T, root string) {
			trees, err := pruneTrees(root, time.Hour, false, time.Now().Add(2*time.Hour))
			if err != nil || len(trees) != 1 || len(trees[0].Runs) != 1 {
				t.Fatalf("prune: %+v %v", trees, err)
			}
			j, err := ledger.OpenJournal(root)
			if err != nil {
				t.Fatal(err)
			}
			if ids, err := j.CorrelationIDs(); err != nil || len(ids) != 0 {
				t.Fatalf("the journal still knows %v (%v)", ids, err)
			}
		}},
		{"a record that names no run, the journal knows it", func(t *testing.T, root string) {
			forgetRecordedRuns(t, root)
		}},
	} {
		for _, dirty := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s, dirty %v", c.name, dirty), func(t *testing.T) {
				root := t.TempDir()
				path, last := migSession(t, root, "s", 3)
				migRun(t, rebuildOptions(root))
				c.before(t, root)
				if dirty {
					fixtures.MarkDirty(t, discoverSidecar(path))
				}
				migAppend(t, path, migEntryLine("e0000100", last, "more"))
				s := migResult(t, migRun(t, rebuildOptions(root)), path)
				if s.Outcome != OutcomeDone || s.Incremental || s.Displaced != "" || !strings.Contains(strings.Join(s.Notes, " "), "not kept") {
					t.Fatalf("%+v", s)
				}
				if n := quarantineFiles(t, root); n != 0 {
					t.Fatalf("%d files in the quarantine", n)
				}
			})
		}
	}
}

// rewriteFirstMessage changes the text of the first message of a session
// migSession wrote: a rewrite, not an append.
func rewriteFirstMessage(tb testing.TB, path string) {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	b = []byte(strings.Replace(string(b), "message e0000001", "message E0000001", 1))
	if err := os.WriteFile(path, b, 0o600); err != nil {
		tb.Fatal(err)
	}
}

// TestRefreshDiscardBesideKept: in one run, the displaced sidecar of an
// appended session is discarded and that of a rewritten one in the same
// project is kept; the emptied directories go, the kept copy stays whole.
func TestRefreshDiscardBesideKept(t *testing.T) {
	root := t.TempDir()
	appended, last := migSession(t, root, "appended", 3)
	rewritten, _ := migSession(t, root, "rewritten", 3)
	migRun(t, rebuildOptions(root))
	migAppend(t, appended, migEntryLine("e0000100", last, "more"))
	rewriteFirstMessage(t, rewritten)
	rep := migRun(t, rebuildOptions(root))
	if s := migResult(t, rep, appended); s.Outcome != OutcomeDone || s.Displaced != "" {
		t.Fatalf("appended: %+v", s)
	}
	kept := migResult(t, rep, rewritten)
	if kept.Outcome != OutcomeDone || kept.Displaced == "" {
		t.Fatalf("rewritten: %+v", kept)
	}
	// The kept store is whole: its empty directories too.
	for _, d := range []string{"segments", "index", "checkpoints", "migrations", "tmp"} {
		if fi, err := os.Lstat(filepath.Join(kept.Displaced, d)); err != nil || !fi.IsDir() {
			t.Fatalf("the kept displaced sidecar lost %s: %v", d, err)
		}
	}
	if st, err := verify.StatusFast(rewritten); err != nil || st.Class != verify.ClassMigrated {
		t.Fatalf("rewritten after the refresh: %+v %v", st, err)
	}
	if n := quarantineFiles(t, root); n == 0 {
		t.Fatal("the kept copy is not in the quarantine")
	}
	if _, err := os.Lstat(ledger.QuarantinePath(root, rep.CorrelationID, mustRel(t, root, appended), "displaced")); !os.IsNotExist(err) {
		t.Fatalf("the reproducible copy was kept (%v)", err)
	}
}

// TestRefreshQuarantineSyncs: the move of a displaced sidecar into the
// quarantine is made durable only when the copy is kept, and then each
// directory it changed is synced once, however many sessions share it.
func TestRefreshQuarantineSyncs(t *testing.T) {
	root := t.TempDir()
	appended, last := migSession(t, root, "appended", 3)
	kept1, _ := migSession(t, root, "kept1", 3)
	kept2, _ := migSession(t, root, "kept2", 3)
	migRun(t, rebuildOptions(root))
	var mu sync.Mutex
	var synced map[string]int
	opt := rebuildOptions(root)
	opt.Ops = durable.OS
	opt.Ops.Sync = func(f *os.File) error {
		mu.Lock()
		synced[filepath.Clean(f.Name())]++
		mu.Unlock()
		return durable.OS.Sync(f)
	}
	underQuarantine := func(cid string) map[string]int {
		out := map[string]int{}
		for p, n := range synced {
			if strings.HasPrefix(p, ledger.Quarantine(root, cid)) {
				out[p] = n
			}
		}
		return out
	}

	synced = map[string]int{}
	migAppend(t, appended, migEntryLine("e0000100", last, "more"))
	rewriteFirstMessage(t, kept1)
	rewriteFirstMessage(t, kept2)
	rep := migRun(t, opt)
	for _, p := range []string{kept1, kept2} {
		if s := migResult(t, rep, p); s.Outcome != OutcomeDone || s.Displaced == "" {
			t.Fatalf("%s: %+v", p, s)
		}
	}
	if s := migResult(t, rep, appended); s.Outcome != OutcomeDone || s.Displaced != "" {
		t.Fatalf("appended: %+v", s)
	}
	proj := filepath.Dir(ledger.QuarantinePath(root, rep.CorrelationID, mustRel(t, root, kept1), "displaced"))
	want := map[string]int{ledger.Quarantine(root, rep.CorrelationID): 1, proj: 1}
	if got := underQuarantine(rep.CorrelationID); !maps.Equal(got, want) {
		t.Fatalf("directories synced under the run's quarantine: %v, want %v", got, want)
	}

	synced = map[string]int{}
	migAppend(t, appended, migEntryLine("e0000101", "e0000100", "more"))
	rep = migRun(t, opt)
	if s := migResult(t, rep, appended); s.Outcome != OutcomeDone || s.Displaced != "" {
		t.Fatalf("appended again: %+v", s)
	}
	if got := underQuarantine(rep.CorrelationID); len(got) != 0 {
		t.Fatalf("a run that kept nothing synced %v", got)
	}
}

// TestRefreshQuarantineSyncFails: when the sync that makes a kept copy's
// move durable fails, the refresh stands (it was installed with its own
// syncs), the copy is in the quarantine, and the log says the move may
// not survive a crash.
func TestRefreshQuarantineSyncFails(t *testing.T) {
	root := t.TempDir()
	path, _ := migSession(t, root, "kept", 3)
	migRun(t, rebuildOptions(root))
	rewriteFirstMessage(t, path)
	opt := rebuildOptions(root)
	opt.Ops = durable.FaultyOps(durable.FaultRule{Op: durable.FaultSync,
		Pattern: filepath.Join(root, ledger.PisessDir, ledger.QuarantineDir, "*", trees.CwdDir), Err: syscall.EIO})
	var logs bytes.Buffer
	ctx := zerolog.New(&logs).WithContext(context.Background())
	rep, err := Migrate(ctx, opt)
	if err != nil {
		t.Fatal(err)
	}
	s := migResult(t, rep, path)
	if s.Outcome != OutcomeDone || s.Displaced == "" {
		t.Fatalf("%+v", s)
	}
	if _, err := os.Stat(filepath.Join(s.Displaced, "manifest.json")); err != nil {
		t.Fatalf("the kept copy is not in the quarantine: %v", err)
	}
	if !strings.Contains(logs.String(), "may not survive a crash") || !strings.Contains(logs.String(), "input/output error") {
		t.Fatalf("log: %s", logs.String())
	}
}

// TestRefreshDiscardsDuringTheRun: the displaced sidecar of a session
// refreshed early in a run is removed while later sessions are still being
// refreshed (its discarded note durable first), not after the last one:
// while the third session is staged, the first one's copy is gone and its
// note is in the journal.
func TestRefreshDiscardsDuringTheRun(t *testing.T) {
	root := t.TempDir()
	var paths, lasts []string
	for _, name := range []string{"a-first", "b-second", "c-third"} {
		p, last := migSession(t, root, name, 4)
		paths, lasts = append(paths, p), append(lasts, last)
	}
	first := migRun(t, rebuildOptions(root))
	for i, p := range paths {
		if s := migResult(t, first, p); s.Outcome != OutcomeDone {
			t.Fatalf("migrate %s: %+v", p, s)
		}
		fixtures.MarkDirty(t, discoverSidecar(p))
		migAppend(t, p, migEntryLine(migEntryID(200+i), lasts[i], "more"))
	}
	journal := filepath.Join(root, ledger.PisessDir, ledger.JournalName)
	var firstGone bool
	var once sync.Once
	opt := rebuildOptions(root)
	opt.Jobs = 1
	opt.CorrelationID = "0c5e8a52-3f0e-4b8a-9d55-6e3c1f0b2a11"
	rel, _ := filepath.Rel(root, paths[0])
	displaced := ledger.QuarantinePath(root, opt.CorrelationID, rel, "displaced")
	sawDisplaced := false
	opt.Ops = durable.OS
	opt.Ops.RenameAt = func(oldpath, newpath string, noReplace bool) error {
		if newpath == displaced {
			sawDisplaced = true // the cutover moved the old sidecar there
		}
		return durable.OS.RenameAt(oldpath, newpath, noReplace)
	}
	opt.Ops.OpenFile = func(path string, flag int, perm os.FileMode) (*os.File, error) {
		if strings.Contains(path, "c-third.v2.staging.") {
			once.Do(func() {
				for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
					b, _ := os.ReadFile(journal)
					_, err := os.Lstat(displaced)
					if bytes.Contains(b, []byte(`"discarded"`)) && bytes.Contains(b, []byte("a-first.jsonl")) && os.IsNotExist(err) {
						firstGone = true
						return
					}
				}
			})
		}
		return durable.OS.OpenFile(path, flag, perm)
	}
	rep := migRun(t, opt)
	for _, p := range paths {
		if s := migResult(t, rep, p); s.Outcome != OutcomeDone || s.Incremental || s.Displaced != "" {
			t.Fatalf("refresh %s: %+v", p, s)
		}
	}
	if !sawDisplaced {
		t.Fatalf("nothing was moved to %s: not where the displaced sidecar goes", displaced)
	}
	if !firstGone {
		t.Fatal("the first session's displaced sidecar was not discarded while the third was staged")
	}
	if n := quarantineFiles(t, root); n != 0 {
		t.Fatalf("%d files left in the quarantine", n)
	}
	discarded := 0
	for _, r := range migJournal(t, root, rep.CorrelationID) {
		if r.Note != nil && r.Note.Kind == ledger.NoteDiscarded {
			discarded++
		}
	}
	if discarded != 3 {
		t.Fatalf("%d discarded notes, want 3", discarded)
	}
}

// rebuildOptions are migOptions with refreshes by full rebuilds (the path
// whose displaced sidecars these tests follow), not in place.
func rebuildOptions(paths ...string) MigrateOptions {
	o := migOptions(paths...)
	o.seams = &seams{fullRefresh: true}
	return o
}
