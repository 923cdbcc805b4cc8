package rollback

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"pisess/fixtures"
	"pisess/ledger"
	"pisess/writers/durable"
	"pisess/writers/wire"
)

func rollbackOnce(tb testing.TB, tree, cid string, opt Options) Report {
	tb.Helper()
	rep, err := ByCorrelation(context.Background(), tree, cid, opt)
	if err != nil {
		tb.Fatalf("rollback %s: %v", cid, err)
	}
	if len(rep.Sessions) != 1 {
		tb.Fatalf("rollback %s: %d sessions, want 1: %+v", cid, len(rep.Sessions), rep)
	}
	return rep
}

// checkConverged runs the rollback twice more: the journal and the tree
// must not change, and the session must read as already rolled back.
func checkConverged(tb testing.TB, tree, cid string) {
	tb.Helper()
	for i := 0; i < 2; i++ {
		j, d := journalLines(tb, tree), fixtures.TreeDigest(tb, tree)
		rep := rollbackOnce(tb, tree, cid, Options{})
		s := rep.Sessions[0]
		if (s.Action != ActionAlreadyRolledBack && s.Action != ActionNothingInstalled) || s.Changed || s.Error != nil {
			tb.Fatalf("re-run %d: %+v", i+1, s)
		}
		if journalLines(tb, tree) != j {
			tb.Fatalf("re-run %d appended to the journal", i+1)
		}
		if diff := diffMaps(fixtures.TreeDigest(tb, tree), d); diff != "" {
			tb.Fatalf("re-run %d changed the tree:\n%s", i+1, diff)
		}
	}
	jr, _ := mustJournal(tb, tree)
	if u, err := jr.Unfinished(); err != nil || len(u) > 0 {
		tb.Fatalf("unfinished intents after the rollback: %v %v", u, err)
	}
}

func TestByCorrelationIDs(t *testing.T) {
	f := newTreeFixture(t, 3)
	migrateRun(t, f.tree, f.session, testRun)
	if _, err := ByCorrelation(context.Background(), f.tree, "bad id!", Options{}); !errors.Is(err, ErrBadCorrelationID) {
		t.Errorf("malformed id: %v", err)
	}
	if _, err := ByCorrelation(context.Background(), f.tree, "short", Options{}); !errors.Is(err, ErrBadCorrelationID) {
		t.Errorf("short id: %v", err)
	}
	if _, err := ByCorrelation(context.Background(), f.tree, "run-9999-never-ran", Options{}); !errors.Is(err, ErrUnknownCorrelation) {
		t.Errorf("unknown id: %v", err)
	}
	empty := t.TempDir()
	if _, err := ByCorrelation(context.Background(), empty, testRun, Options{}); !errors.Is(err, ErrUnknownCorrelation) {
		t.Errorf("tree without a journal: %v", err)
	}
}

func TestByCorrelationFreshMigration(t *testing.T) {
	f := newTreeFixture(t, 5)
	pre := userTree(t, f.tree)
	migrateRun(t, f.tree, f.session, testRun)
	installed := fixtures.TreeDigest(t, f.sidecar)
	rep := rollbackOnce(t, f.tree, testRun, Options{Clock: fixedClock})
	s := rep.Sessions[0]
	if s.Action != ActionRolledBack || !s.Changed || s.Error != nil || s.Stale {
		t.Fatalf("result: %+v", s)
	}
	if d := diffMaps(userTree(t, f.tree), pre); d != "" {
		t.Fatalf("the tree is not as before the migration:\n%s", d)
	}
	q := ledger.QuarantinePath(f.tree, testRun, f.rel, kindRolledBackStore)
	if d := diffMaps(fixtures.TreeDigest(t, q), installed); d != "" {
		t.Fatalf("the rolled-back sidecar is not kept whole in %s:\n%s", q, d)
	}
	jr, _ := mustJournal(t, f.tree)
	recs, _ := jr.Records(testRun)
	var rollbacks int
	for _, r := range recs {
		if ev := r.Event; ev != nil && ev.Phase == wire.PhaseRollback {
			rollbacks++
			if ev.SourcePath != f.session || ev.TargetPath != q || ev.Outcome != wire.OutcomeOK || ev.CorrelationID != testRun {
				t.Errorf("rollback event: %+v", ev)
			}
		}
	}
	if rollbacks != 1 {
		t.Fatalf("%d rollback events, want 1", rollbacks)
	}
	checkConverged(t, f.tree, testRun)
}

func TestByCorrelationRefreshPutsTheDisplacedSidecarBack(t *testing.T) {
	f := newTreeFixture(t, 5)
	migrateRun(t, f.tree, f.session, "run-0001-first")
	appendEntries(t, f.session, 6, 9)
	pre := userTree(t, f.tree)
	first := fixtures.TreeDigest(t, f.sidecar)
	migrateRun(t, f.tree, f.session, "run-0002-second")
	rep := rollbackOnce(t, f.tree, "run-0002-second", Options{})
	if s := rep.Sessions[0]; s.Action != ActionRolledBack || s.Error != nil {
		t.Fatalf("result: %+v", s)
	} else {
		t.Logf("detail: %s", s.Detail)
	}
	if d := diffMaps(fixtures.TreeDigest(t, f.sidecar), first); d != "" {
		t.Fatalf("the displaced sidecar is not back byte for byte:\n%s", d)
	}
	if d := diffMaps(userTree(t, f.tree), pre); d != "" {
		t.Fatalf("the tree is not as before the refresh:\n%s", d)
	}
	if _, err := os.Lstat(ledger.QuarantinePath(f.tree, "run-0002-second", f.rel, kindDisplaced)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the displaced sidecar is still in the quarantine: %v", err)
	}
	checkConverged(t, f.tree, "run-0002-second")
}

func TestByCorrelationStaleSidecarIsRolledBack(t *testing.T) {
	f := newTreeFixture(t, 5)
	migrateRun(t, f.tree, f.session, testRun)
	appendEntries(t, f.session, 6, 7) // pi wrote the session after the run
	src := fixtures.SHA256File(t, f.session)
	rep := rollbackOnce(t, f.tree, testRun, Options{})
	s := rep.Sessions[0]
	if s.Action != ActionRolledBack || !s.Stale || s.Error != nil || !strings.Contains(s.Detail, "stale") {
		t.Fatalf("result: %+v", s)
	}
	if fixtures.SHA256File(t, f.session) != src {
		t.Fatal("the source changed")
	}
	if _, err := os.Lstat(f.sidecar); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("sidecar still installed: %v", err)
	}
	checkConverged(t, f.tree, testRun)
}

// upgradeRun does what the migration does to a version-2 source: the
// original is kept in the quarantine, the version-3 rewrite takes its
// place, and an upgraded note records both digests.
func upgradeRun(tb testing.TB, f treeFixture, cid string) (orig, rewritten []byte) {
	tb.Helper()
	orig, err := os.ReadFile(f.session)
	if err != nil {
		tb.Fatal(err)
	}
	rewritten = bytes.Replace(orig, []byte(`"version":2`), []byte(`"version":3`), 1)
	// As writers/upgrade does it: the original is copied into the
	// quarantine (0600), the rewrite (with the original's mode) renamed
	// over it.
	q := ledger.QuarantinePath(f.tree, cid, f.rel, "original")
	if err := os.MkdirAll(filepath.Dir(q), 0o700); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(q, orig, 0o600); err != nil {
		tb.Fatal(err)
	}
	fi, _ := os.Stat(f.session)
	tmp := f.session + ".upgrade.tmp"
	if err := os.WriteFile(tmp, rewritten, 0o600); err != nil {
		tb.Fatal(err)
	}
	os.Chmod(tmp, fi.Mode().Perm())
	if err := os.Rename(tmp, f.session); err != nil {
		tb.Fatal(err)
	}
	j, _ := mustJournal(tb, f.tree)
	if err := j.Append(ledger.NoteRecord(ledger.Note{CorrelationID: cid, At: wire.FormatTimestamp(fixedClock()), Session: f.session,
		Kind: ledger.NoteUpgraded, Path: f.session, QuarantinePath: q, SHA256: sha256Hex(orig), NewSHA256: sha256Hex(rewritten)})); err != nil {
		tb.Fatal(err)
	}
	return orig, rewritten
}

func newV2Fixture(tb testing.TB, n int) treeFixture {
	tb.Helper()
	f := newTreeFixture(tb, n)
	b, _ := os.ReadFile(f.session)
	b = bytes.Replace(b, []byte(`"version":3`), []byte(`"version":2`), 1)
	if err := os.WriteFile(f.session, b, 0o644); err != nil {
		tb.Fatal(err)
	}
	return f
}

func TestByCorrelationUpgradeRestoresTheOriginal(t *testing.T) {
	f := newV2Fixture(t, 5)
	pre := userTree(t, f.tree)
	orig, rewritten := upgradeRun(t, f, testRun)
	migrateRun(t, f.tree, f.session, testRun)
	rep := rollbackOnce(t, f.tree, testRun, Options{})
	if s := rep.Sessions[0]; s.Action != ActionRolledBack || s.Error != nil {
		t.Fatalf("result: %+v", s)
	}
	if got, _ := os.ReadFile(f.session); !bytes.Equal(got, orig) {
		t.Fatal("the original source is not back byte for byte")
	}
	if d := diffMaps(userTree(t, f.tree), pre); d != "" {
		t.Fatalf("the tree is not as before the run (mode included):\n%s", d)
	}
	kept, err := os.ReadFile(ledger.QuarantinePath(f.tree, testRun, f.rel, kindRolledBackSource))
	if err != nil || !bytes.Equal(kept, rewritten) {
		t.Fatalf("the upgraded file is not kept in the quarantine: %v", err)
	}
	checkConverged(t, f.tree, testRun)
}

// pi appended entries to the upgraded file after the run: restoring the
// original would lose them, so the session is refused and left as it is,
// and a copy of the current file is kept.
func TestByCorrelationUpgradeGrownIsRefusedAndKept(t *testing.T) {
	f := newV2Fixture(t, 5)
	_, rewritten := upgradeRun(t, f, testRun)
	migrateRun(t, f.tree, f.session, testRun)
	appendEntries(t, f.session, 6, 8)
	current, _ := os.ReadFile(f.session)
	before := withoutLocks(fixtures.TreeDigest(t, f.tree))
	rep, err := ByCorrelation(context.Background(), f.tree, testRun, Options{})
	if err != nil {
		t.Fatal(err)
	}
	s := rep.Sessions[0]
	if s.Action != ActionRefused || !errors.Is(s.Error, ErrSourceChanged) || rep.Problems() != 1 {
		t.Fatalf("result: %+v", s)
	}
	t.Logf("detail: %s\nerror: %v", s.Detail, s.Error)
	for _, want := range []string{"appended", "bytes", "lacks them", "left as it is"} {
		if !strings.Contains(s.Detail, want) {
			t.Errorf("detail does not say %q: %s", want, s.Detail)
		}
	}
	if got, _ := os.ReadFile(f.session); !bytes.Equal(got, current) {
		t.Fatal("the grown source changed")
	}
	if !strings.Contains(s.Error.Error(), "from offset "+itoa(len(rewritten))+" to the end ("+itoa(len(current))+")") {
		t.Errorf("the error does not locate the appended bytes: %v", s.Error)
	}
	after := withoutLocks(fixtures.TreeDigest(t, f.tree))
	for k, v := range before {
		if strings.HasPrefix(k, ledger.PisessDir) {
			continue
		}
		if after[k] != v {
			t.Errorf("%s changed", k)
		}
	}
	copyPath := ledger.QuarantinePath(f.tree, testRun, f.rel, kindChangedSource+"-"+sha256Hex(current)[:16])
	if got, err := os.ReadFile(copyPath); err != nil || !bytes.Equal(got, current) {
		t.Fatalf("no copy of the current file at %s: %v", copyPath, err)
	}
	// Running again changes nothing and says the same.
	j := journalLines(t, f.tree)
	rep2, _ := ByCorrelation(context.Background(), f.tree, testRun, Options{})
	if s2 := rep2.Sessions[0]; s2.Action != ActionRefused || s2.Changed {
		t.Fatalf("re-run: %+v", s2)
	}
	if journalLines(t, f.tree) != j {
		t.Fatal("a re-run appended to the journal")
	}
}

func itoa(n int) string { return string(wire.AppendCompact(nil, wire.U64(uint64(n)))) }

func TestByCorrelationSupersededThenInOrder(t *testing.T) {
	f := newTreeFixture(t, 5)
	pre := userTree(t, f.tree)
	migrateRun(t, f.tree, f.session, "run-0001-first")
	appendEntries(t, f.session, 6, 7)
	preSecond := userTree(t, f.tree)
	migrateRun(t, f.tree, f.session, "run-0002-second")
	snap := withoutLocks(fixtures.TreeDigest(t, f.tree))
	rep := rollbackOnce(t, f.tree, "run-0001-first", Options{})
	s := rep.Sessions[0]
	if s.Action != ActionRefused || !errors.Is(s.Error, ErrSuperseded) || !strings.Contains(s.Error.Error(), "run-0002-second") {
		t.Fatalf("rollback of the older run: %+v", s)
	}
	if d := diffMaps(withoutLocks(fixtures.TreeDigest(t, f.tree)), snap); d != "" {
		t.Fatalf("a refused rollback changed the tree:\n%s", d)
	}
	rollbackOnce(t, f.tree, "run-0002-second", Options{})
	if d := diffMaps(userTree(t, f.tree), preSecond); d != "" {
		t.Fatalf("after rolling back the second run:\n%s", d)
	}
	rep = rollbackOnce(t, f.tree, "run-0001-first", Options{})
	if s := rep.Sessions[0]; s.Action != ActionRolledBack || s.Error != nil || !s.Stale {
		t.Fatalf("rollback of the first run after the second: %+v", s)
	}
	// The entries pi appended stay in the source; the sidecar is gone.
	want := pre
	want[filepath.ToSlash(f.rel)] = preSecond[filepath.ToSlash(f.rel)]
	if d := diffMaps(userTree(t, f.tree), want); d != "" {
		t.Fatalf("after rolling back both runs:\n%s", d)
	}
}

func TestByCorrelationDryRun(t *testing.T) {
	f := newTreeFixture(t, 5)
	migrateRun(t, f.tree, f.session, "run-0001-first")
	appendEntries(t, f.session, 6, 7)
	migrateRun(t, f.tree, f.session, "run-0002-second")
	before := fixtures.TreeDigest(t, f.tree)
	rep := rollbackOnce(t, f.tree, "run-0002-second", Options{DryRun: true})
	s := rep.Sessions[0]
	if !rep.DryRun || s.Action != ActionWouldRollBack || s.Changed || s.Error != nil ||
		!strings.Contains(s.Detail, "would move") || !strings.Contains(s.Detail, "would put") {
		t.Fatalf("dry run: %+v", s)
	}
	if d := diffMaps(fixtures.TreeDigest(t, f.tree), before); d != "" {
		t.Fatalf("a dry run changed the tree:\n%s", d)
	}
}

func TestByCorrelationBusy(t *testing.T) {
	f := newTreeFixture(t, 3)
	migrateRun(t, f.tree, f.session, testRun)
	l, err := durable.OS.LockFile(context.Background(), f.session+".lock", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock()
	rep := rollbackOnce(t, f.tree, testRun, Options{LockTimeout: 50 * time.Millisecond})
	if s := rep.Sessions[0]; s.Action != ActionBusy || !errors.Is(s.Error, durable.ErrLockTimeout) || s.Changed {
		t.Fatalf("busy session: %+v", s)
	}
	if _, err := os.Lstat(f.sidecar); err != nil {
		t.Fatalf("a busy session was changed: %v", err)
	}
}

// TestByCorrelationWaitsForLockedLast: a session pi holds locked is waited
// for after the run's other sessions, which it used to hold up for up to
// the lock timeout; the report keeps their order.
func TestByCorrelationWaitsForLockedLast(t *testing.T) {
	f := newTreeFixture(t, 3)
	other := writeSession(t, f.tree, filepath.Join("--home-u-proj--", "2026-01-06T10-00-00-000Z_"+testSessionID+".jsonl"), 3)
	migrateRun(t, f.tree, f.session, testRun)
	migrateRun(t, f.tree, other, testRun)
	gone := func(p string) bool {
		_, err := os.Lstat(SidecarPath(p))
		return errors.Is(err, fs.ErrNotExist)
	}
	type result struct {
		rep Report
		err error
	}
	r := fixtures.WhileLockHeld(t, f.session+".lock", func() result {
		rep, err := ByCorrelation(context.Background(), f.tree, testRun, Options{LockTimeout: 30 * time.Second})
		return result{rep, err}
	}, func() bool { return gone(other) }, func() bool { return !gone(f.session) })
	if r.err != nil {
		t.Fatal(r.err)
	}
	if len(r.rep.Sessions) != 2 || r.rep.Sessions[0].Session != f.session || !gone(f.session) {
		t.Fatalf("%+v", r.rep.Sessions)
	}
	for _, s := range r.rep.Sessions {
		if s.Action != ActionRolledBack || s.Error != nil {
			t.Errorf("%s: %s %v", s.Session, s.Action, s.Error)
		}
	}
}

// A step that fails is reported and recorded once; a re-run finishes.
func TestByCorrelationFailureThenRerun(t *testing.T) {
	f := newTreeFixture(t, 4)
	migrateRun(t, f.tree, f.session, "run-0001-first")
	appendEntries(t, f.session, 5, 6)
	pre := userTree(t, f.tree)
	migrateRun(t, f.tree, f.session, testRun)
	faulty := durable.FaultyOps(durable.FaultRule{Op: durable.FaultRename, Pattern: "*.displaced", Err: syscall.EIO})
	rep := rollbackOnce(t, f.tree, testRun, Options{Ops: faulty})
	s := rep.Sessions[0]
	if s.Action != ActionFailed || !errors.Is(s.Error, syscall.EIO) || !s.Changed {
		t.Fatalf("failed step: %+v", s)
	}
	jr, _ := mustJournal(t, f.tree)
	recs, _ := jr.Records(testRun)
	fatal := 0
	for _, r := range recs {
		if r.Event != nil && r.Event.Outcome == wire.OutcomeFatalError && r.Event.ErrorClass == wire.ErrorClassIOFailure {
			fatal++
		}
	}
	if fatal != 1 {
		t.Fatalf("%d fatal rollback events, want 1", fatal)
	}
	rep = rollbackOnce(t, f.tree, testRun, Options{})
	if s := rep.Sessions[0]; s.Action != ActionRolledBack || s.Error != nil {
		t.Fatalf("re-run: %+v", s)
	}
	if d := diffMaps(userTree(t, f.tree), pre); d != "" {
		t.Fatalf("after the re-run:\n%s", d)
	}
	checkConverged(t, f.tree, testRun)
}
