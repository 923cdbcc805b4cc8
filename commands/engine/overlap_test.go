package engine

import (
	"context"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"pisess/ledger"
	"pisess/readers/discover"
	"pisess/writers/durable"
)

// countWalks counts the walks of the runs given sm; walked, when not nil,
// is called after each.
func countWalks(sm *seams, walked func(n int32)) *atomic.Int32 {
	var n atomic.Int32
	sm.walked = func() {
		m := n.Add(1)
		if walked != nil {
			walked(m)
		}
	}
	return &n
}

// TestNoopRunWalksOnce: a run with nothing to do walks its tree once (the
// lock taken at once, the tree's generation unchanged since the walk).
func TestNoopRunWalksOnce(t *testing.T) {
	tree := t.TempDir()
	migSession(t, tree, "a", 3)
	migRun(t, migOptions(tree))
	sm := &seams{}
	n := countWalks(sm, nil)
	rep := migRun(t, seamed(tree, sm))
	if rep.Totals.Skipped != 1 || n.Load() != 1 {
		t.Fatalf("%d walks, totals %+v", n.Load(), rep.Totals)
	}
}

// TestRunPlansUnderTheLock is issue 34 §1 at the engine: a run that waits
// for the tree lock plans from what it sees once it holds it. Here the run
// ahead of it (the test, holding the lock) had a staging directory beside
// a session when the waiting run walked, and is done with it before it
// lets go: the waiting run walks again and finds nothing to do, where it
// called the staging directory an interrupted run's leftovers.
func TestRunPlansUnderTheLock(t *testing.T) {
	tree := t.TempDir()
	path, _ := migSession(t, tree, "a", 3)
	migRun(t, migOptions(tree))
	staging := discover.SidecarPath(path) + ".staging.0123456789abcdef0123456789abcdef"
	if err := os.Mkdir(staging, 0o700); err != nil {
		t.Fatal(err)
	}
	lock, _, err := ledger.LockTreeForRepair(durable.OS, tree)
	if err != nil {
		t.Fatal(err)
	}
	walked := make(chan struct{})
	sm := &seams{}
	n := countWalks(sm, func(n int32) {
		if n == 1 {
			close(walked)
		}
	})
	opt := seamed(tree, sm)
	opt.LockWait = time.Minute
	done := make(chan MigrateReport)
	go func() {
		rep, err := Migrate(context.Background(), opt)
		if err != nil {
			t.Error(err)
		}
		done <- rep
	}()
	<-walked
	// The run ahead finishes: its staging directory is gone, and it
	// lets go of the lock.
	if err := os.Remove(staging); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // the waiting run is polling for the lock
	lock.Unlock()
	rep := <-done
	if s := migResult(t, rep, path); s.Outcome != OutcomeSkipped {
		t.Fatalf("the session: %s %s (%s), want skipped", s.Action, s.Outcome, s.Reason)
	}
	if n.Load() != 2 {
		t.Errorf("%d walks, want 2 (one again once the lock was held)", n.Load())
	}
}

// TestLiveWritersStagingIsBusy: staging beside a session whose lock is held
// (the reference stages its own rebuild so, under the session lock) is a
// live writer's: the session is busy, never needs_repair, and nothing of
// it is healed or touched; once the lock is free it is an interrupted
// run's leftovers again.
func TestLiveWritersStagingIsBusy(t *testing.T) {
	tree := t.TempDir()
	path, _ := migSession(t, tree, "a", 3)
	migRun(t, migOptions(tree))
	staging := discover.SidecarPath(path) + ".staging.0123456789abcdef0123456789abcdef"
	if err := os.Mkdir(staging, 0o700); err != nil {
		t.Fatal(err)
	}
	l, err := durable.OS.LockFile(context.Background(), discover.LockPath(path), 0)
	if err != nil {
		t.Fatal(err)
	}
	s := migResult(t, migRun(t, migOptions(tree)), path)
	if s.Outcome != OutcomeBusy {
		t.Fatalf("with the session lock held: %s %s (%s), want busy", s.Action, s.Outcome, s.Reason)
	}
	if _, err := os.Stat(staging); err != nil {
		t.Fatalf("the live writer's staging was touched: %v", err)
	}
	l.Unlock()
	if s := migResult(t, migRun(t, migOptions(tree)), path); s.Outcome != OutcomeLeft {
		t.Fatalf("with the lock free: %s %s (%s), want left (leftovers)", s.Action, s.Outcome, s.Reason)
	}
}
