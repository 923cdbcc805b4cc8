package engine

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"pisess/fixtures"
	"pisess/readers/discover"
	"pisess/verify"
	"pisess/writers/store"
)

// TestRefreshInPlace: a sidecar that pi marked dirty after appending (or
// left with a mismatching fingerprint, as the TypeScript pi does) is
// continued where it lies: the same directory, nothing displaced and
// nothing in the quarantine, byte for byte the full rebuild, verified, and
// the next refresh goes in place again.
func TestRefreshInPlace(t *testing.T) {
	for _, rust := range []bool{true, false} {
		name := "fingerprint left (TypeScript pi)"
		if rust {
			name = "marked dirty (Rust pi)"
		}
		t.Run(name, func(t *testing.T) {
			tree := t.TempDir()
			path, _ := migSession(t, tree, "busy", 6)
			migRun(t, migOptions(tree))
			sidecar := discover.SidecarPath(path)
			before, err := os.Lstat(sidecar)
			if err != nil {
				t.Fatal(err)
			}
			for round, tag := range []string{"r1", "r2"} {
				incAppend(t, path, 2, tag)
				if rust {
					fixtures.MarkDirty(t, sidecar)
				}
				rep := migRun(t, migOptions(tree))
				r := migResult(t, rep, path)
				if r.Outcome != OutcomeDone || !r.Incremental || r.Displaced != "" {
					t.Fatalf("round %d: %s incremental %v displaced %q %v", round, r.Outcome, r.Incremental, r.Displaced, r.Notes)
				}
				incRefreshedBy(t, rep, []string{path}, incInPlace)
				incSameAsFull(t, path, 0)
				incVerify(t, path)
				after, err := os.Lstat(sidecar)
				if err != nil || !os.SameFile(before, after) {
					t.Fatalf("round %d: the sidecar is another directory (%v)", round, err)
				}
				if st, err := verify.StatusFast(path); err != nil || st.Class != verify.ClassMigrated || len(st.Findings) > 0 {
					t.Fatalf("round %d: status %+v %v", round, st, err)
				}
			}
			if q, err := os.ReadDir(filepath.Join(tree, discover.PisessDir, "quarantine")); err == nil && len(q) > 0 {
				t.Errorf("a refresh in place left %d entries in the quarantine", len(q))
			}
		})
	}
}

// TestRollbackInPlace: a run that continued a sidecar in place is rolled
// back as any run that installed one: the sidecar goes to the quarantine
// and pi reads the session file. The run before it, whose sidecar the
// later run continued, is refused (its sidecar was superseded) while the
// continued one is in place.
func TestRollbackInPlace(t *testing.T) {
	tree := t.TempDir()
	path, _ := migSession(t, tree, "busy", 5)
	first := migRun(t, migOptions(tree))
	incAppend(t, path, 2, "r1")
	fixtures.MarkDirty(t, discover.SidecarPath(path))
	second := migRun(t, migOptions(tree))
	incRefreshedBy(t, second, []string{path}, incInPlace)
	src := fixtures.SHA256File(t, path)

	rollBack := func(cid string) RollbackSession {
		t.Helper()
		rb, err := Rollback(context.Background(), RollbackOptions{CorrelationID: cid, Trees: []string{tree}, Clock: migClock})
		if err != nil || len(rb.Sessions) != 1 {
			t.Fatalf("rollback %s: %+v %v", cid, rb, err)
		}
		return rb.Sessions[0]
	}
	if s := rollBack(first.CorrelationID); s.Error == "" || !strings.Contains(s.Error, "continued in place") {
		t.Fatalf("rollback of the run before the refresh in place: %+v", s)
	}
	if _, err := os.Lstat(discover.SidecarPath(path)); err != nil {
		t.Fatalf("the refused rollback took the sidecar: %v", err)
	}
	if s := rollBack(second.CorrelationID); s.Error != "" || !s.Changed {
		t.Fatalf("rollback of the refresh in place: %+v", s)
	}
	if st, err := verify.StatusFast(path); err != nil || st.Class != verify.ClassUnmigrated {
		t.Fatalf("after the rollback pi should read the session file: %+v %v", st, err)
	}
	if fixtures.SHA256File(t, path) != src {
		t.Fatal("the rollback changed the session file")
	}
	if s := migResult(t, migRun(t, migOptions(tree)), path); s.Outcome != OutcomeDone {
		t.Fatalf("after the rollback: %+v", s)
	}
	incVerify(t, path)
}

// TestRefreshInPlaceYields: while another process holds the sidecar's
// store mutation lock, the refresh goes through a staging copy at once
// (not after the session lock's timeout), having written nothing into the
// sidecar.
func TestRefreshInPlaceYields(t *testing.T) {
	tree := t.TempDir()
	path, _ := migSession(t, tree, "busy", 5)
	migRun(t, migOptions(tree))
	incAppend(t, path, 2, "r1")
	sidecar := discover.SidecarPath(path)
	fixtures.MarkDirty(t, sidecar)
	lock, err := store.LockMutation(context.Background(), sidecar, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Unlock()
	opt := migOptions(tree)
	opt.LockTimeout = 10 * time.Minute
	t0 := time.Now()
	rep := migRun(t, opt)
	if d := time.Since(t0); d > time.Minute {
		t.Fatalf("the refresh waited %v for the store lock", d)
	}
	incRefreshedBy(t, rep, []string{path}, incCopied)
	incSameAsFull(t, path, 0)
}
