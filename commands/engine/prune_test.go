package engine

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"pisess/fixtures"
	"pisess/ledger"
)

func at(t time.Time) func() time.Time { return func() time.Time { return t } }

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
	rr, err := Runs(ctx, RunsOptions{Paths: []string{filepath.Join(root, "--home-u-proj--")}})
	if err != nil || len(rr.Trees) != 1 || rr.Trees[0].Root != root {
		t.Fatalf("runs: %+v %v", rr, err)
	}
	runs := rr.Trees[0].Runs
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
	dry, err := Prune(ctx, PruneOptions{Paths: []string{root}, KeepWithin: 24 * time.Hour, DryRun: true, Clock: at(now)})
	if err != nil || len(dry.Trees) != 1 || strings.Join(dry.Trees[0].Runs, ",") != ids[0]+","+ids[1] {
		t.Fatalf("dry run: %+v %v", dry, err)
	}
	if d := migDigestDiff(before, fixtures.TreeDigest(t, root), nil); len(d) != 0 {
		t.Fatalf("the dry run changed %v", d)
	}

	rep, err := Prune(ctx, PruneOptions{Paths: []string{root}, KeepWithin: 24 * time.Hour, Clock: at(now)})
	if err != nil {
		t.Fatal(err)
	}
	pt := rep.Trees[0]
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
	if rr, _ := Runs(ctx, RunsOptions{Paths: []string{root}}); len(rr.Trees[0].Runs) != 1 || rr.Trees[0].Runs[0].CorrelationID != ids[2] {
		t.Fatalf("runs after prune: %+v", rr)
	}
	// A pruned run cannot be rolled back; the kept one can, and puts B's
	// sidecar back from C's quarantine.
	if rb, err := Rollback(ctx, RollbackOptions{CorrelationID: ids[0], Trees: []string{root}}); err != nil || rb.Unknown == "" {
		t.Fatalf("rollback of a pruned run: %+v %v", rb, err)
	}
	rb, err := Rollback(ctx, RollbackOptions{CorrelationID: ids[2], Trees: []string{root}, Clock: at(now)})
	if err != nil || rb.Tally().Problems != 0 || len(rb.Sessions) == 0 {
		t.Fatalf("rollback of the kept run: %+v %v", rb, err)
	}
	after := migOptions(root)
	after.Clock = at(now)
	if s := migResult(t, migRun(t, after), path); s.Action != PlanRefresh {
		t.Fatalf("after the rollback the sidecar should be B's, stale: %+v", s)
	}
	rr, _ = Runs(ctx, RunsOptions{Paths: []string{root}})
	if r := rr.Trees[0].Runs[0]; !r.RolledBack || len(rr.Trees[0].Runs) != 2 {
		t.Errorf("run C is not listed as rolled back: %+v", r)
	}

	// A second prune at the same time removes nothing more.
	again, err := Prune(ctx, PruneOptions{Paths: []string{root}, KeepWithin: 24 * time.Hour, Clock: at(now)})
	if err != nil || len(again.Trees[0].Runs) != 0 || len(again.Trees[0].Quarantine) != 0 {
		t.Fatalf("second prune: %+v %v", again, err)
	}
	if _, err := Prune(ctx, PruneOptions{Paths: []string{root}}); err == nil {
		t.Fatal("prune without --keep-within ran")
	}
}
