package engine

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"pisess/fixtures"
	"pisess/ledger"
	"pisess/readers/discover"
)

func at(t time.Time) func() time.Time { return func() time.Time { return t } }

// pruneTrees prunes the tree of root as pisess prune --keep-within keep
// does at now (discover.TreeRoots, ledger.PruneTrees).
func pruneTrees(root string, keep time.Duration, dryRun bool, now time.Time) ([]ledger.PruneTree, error) {
	roots, err := discover.TreeRoots([]string{root})
	if err != nil {
		return nil, err
	}
	return ledger.PruneTrees(context.Background(), zerolog.Nop(), ledger.PruneOptions{DryRun: dryRun}, roots, now.Add(-keep))
}

// treeRuns lists the runs of the trees of paths as pisess runs does
// (discover.TreeRoots, ledger.Runs).
func treeRuns(ctx context.Context, paths ...string) ([]ledger.TreeRuns, error) {
	roots, err := discover.TreeRoots(paths)
	if err != nil {
		return nil, err
	}
	return ledger.Runs(ctx, roots)
}

// pruneTree makes a tree with three runs: A migrates (day 0), B refreshes
// keeping the displaced sidecar (day 0 + 1h), C refreshes keeping it (day
// 10). It returns the root, the session and the three run ids.
func pruneFixture(t *testing.T) (root, path string, ids [3]string) {
	t.Helper()
	root = t.TempDir()
	path, last := migSession(t, root, "s", 3)
	day0 := migClock()
	for i, when := range []time.Time{day0, day0.Add(time.Hour), day0.Add(10 * 24 * time.Hour)} {
		if i > 0 {
			id := migEntryID(200 + i)
			migAppend(t, path, migEntryLine(id, last, "more"))
			last = id
		}
		opt := migOptions(root)
		opt.Clock, opt.KeepDisplaced = at(when), true
		opt.CorrelationID = []string{"run-a-0000", "run-b-0000", "run-c-0000"}[i]
		rep := migRun(t, opt)
		if s := migResult(t, rep, path); s.Outcome != OutcomeDone {
			t.Fatalf("run %d: %+v", i, s)
		}
		ids[i] = opt.CorrelationID
	}
	return root, path, ids
}

// TestRunsAndPrune (issue 12, item 7): runs lists the journal's runs;
// prune --keep-within removes the runs that ended before the window, their
// quarantine and old orphan quarantine entries, never a run inside the
// window, and leaves the journal valid for every rollback it still allows.
func TestRunsAndPrune(t *testing.T) {
	root, path, ids := pruneFixture(t)
	ctx := context.Background()
	rr, err := treeRuns(ctx, filepath.Join(root, "--home-u-proj--"))
	if err != nil || len(rr) != 1 || rr[0].Root != root {
		t.Fatalf("runs: %+v %v", rr, err)
	}
	runs := rr[0].Runs
	if len(runs) != 3 {
		t.Fatalf("runs: %+v", runs)
	}
	for i, r := range runs {
		if r.CorrelationID != ids[i] || r.Command != "migrate" || r.Completed != 1 || r.Sessions != 1 || r.RolledBack {
			t.Errorf("run %d: %+v", i, r)
		}
	}
	if runs[0].QuarantineBytes != 0 || runs[1].QuarantineBytes == 0 || runs[2].QuarantineBytes == 0 {
		t.Errorf("quarantine bytes: %d %d %d", runs[0].QuarantineBytes, runs[1].QuarantineBytes, runs[2].QuarantineBytes)
	}
	if runs[2].Start != "2026-01-11T00:00:00.000Z" {
		t.Errorf("start of run C: %s", runs[2].Start)
	}

	q := filepath.Join(root, ledger.PisessDir, ledger.QuarantineDir)
	oldOrphan, newOrphan := filepath.Join(q, "orphan-old"), filepath.Join(q, "orphan-new")
	for _, d := range []string{oldOrphan, newOrphan} {
		if err := os.MkdirAll(filepath.Join(d, "x"), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	old := migClock().Add(-time.Hour)
	if err := os.Chtimes(oldOrphan, old, old); err != nil {
		t.Fatal(err)
	}
	now := migClock().Add(10*24*time.Hour + time.Hour)
	journalBefore, _ := os.ReadFile(ledger.JournalPath(root))

	// A dry run changes nothing.
	before := fixtures.TreeDigest(t, root)
	dry, err := pruneTrees(root, 24*time.Hour, true, now)
	if err != nil || len(dry) != 1 || strings.Join(dry[0].Runs, ",") != ids[0]+","+ids[1] {
		t.Fatalf("dry run: %+v %v", dry, err)
	}
	if d := migDigestDiff(before, fixtures.TreeDigest(t, root), nil); len(d) != 0 {
		t.Fatalf("the dry run changed %v", d)
	}

	rep, err := pruneTrees(root, 24*time.Hour, false, now)
	if err != nil {
		t.Fatal(err)
	}
	pt := rep[0]
	if strings.Join(pt.Runs, ",") != ids[0]+","+ids[1] || pt.KeptRuns != 1 || pt.Bytes == 0 {
		t.Fatalf("prune: %+v", pt)
	}
	for _, gone := range []string{filepath.Join(q, ids[1]), oldOrphan, filepath.Join(root, ledger.PisessDir, ledger.PruningDir)} {
		if _, err := os.Lstat(gone); !os.IsNotExist(err) {
			t.Errorf("%s still there (%v)", gone, err)
		}
	}
	for _, kept := range []string{filepath.Join(q, ids[2]), newOrphan} {
		if _, err := os.Lstat(kept); err != nil {
			t.Errorf("%s was removed: %v", kept, err)
		}
	}
	// The journal is run C's lines, byte for byte and in order.
	var want bytes.Buffer
	for _, line := range bytes.SplitAfter(journalBefore, []byte("\n")) {
		if bytes.Contains(line, []byte(`"correlationId":"`+ids[2]+`"`)) {
			want.Write(line)
		}
	}
	got, _ := os.ReadFile(ledger.JournalPath(root))
	if want.Len() == 0 || !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("journal after prune:\n%s\nwant:\n%s", got, want.String())
	}
	if rr, _ := treeRuns(ctx, root); len(rr[0].Runs) != 1 || rr[0].Runs[0].CorrelationID != ids[2] {
		t.Fatalf("runs after prune: %+v", rr)
	}
	// A pruned run cannot be rolled back; the kept one can, and puts B's
	// sidecar back from C's quarantine.
	if rb, err := rollbackTree(ctx, root, ids[0], nil); err != nil || rb.Known {
		t.Fatalf("rollback of a pruned run: %+v %v", rb, err)
	}
	rb, err := rollbackTree(ctx, root, ids[2], at(now))
	if err != nil || rollbackProblems(rb) != 0 || len(rb.Sessions) == 0 {
		t.Fatalf("rollback of the kept run: %+v %v", rb, err)
	}
	after := migOptions(root)
	after.Clock = at(now)
	if s := migResult(t, migRun(t, after), path); s.Action != PlanRefresh {
		t.Fatalf("after the rollback the sidecar should be B's, stale: %+v", s)
	}
	rr, _ = treeRuns(ctx, root)
	if r := rr[0].Runs[0]; !r.RolledBack || len(rr[0].Runs) != 2 {
		t.Errorf("run C is not listed as rolled back: %+v", r)
	}

	// A second prune at the same time removes nothing more.
	again, err := pruneTrees(root, 24*time.Hour, false, now)
	if err != nil || len(again[0].Runs) != 0 || len(again[0].Quarantine) != 0 {
		t.Fatalf("second prune: %+v %v", again, err)
	}
}
