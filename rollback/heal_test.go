package rollback

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"pisess/ledger"
	"pisess/readers/discover"
	"pisess/writers/durable"
)

// TestNeedsHealLeavesALiveWriter: staging beside a session whose lock is
// held belongs to a live writer (the reference stages its own rebuild so,
// under the session lock), never to an interrupted run, even after the
// takeover of a dead run's tree lock (stale, when everything else there
// is taken): NeedsHeal selects it only once the lock is free (issue 34 §1).
func TestNeedsHealLeavesALiveWriter(t *testing.T) {
	tree := t.TempDir()
	dir := filepath.Join(tree, "--home-u-proj--")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	session := filepath.Join(dir, "2026-01-05T10-00-00-000Z_"+testSessionID+".jsonl")
	if err := os.WriteFile(session, append([]byte(`{"type":"session","version":3,"id":"`+testSessionID+`","timestamp":"2026-01-05T10:00:00.000Z","cwd":"/w"}`+"\n"), jsonlLines(1, 3)...), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(discover.SidecarPath(session)+".staging.0123456789abcdef0123456789abcdef", 0o700); err != nil {
		t.Fatal(err)
	}
	j, err := ledger.OpenJournal(tree)
	if err != nil {
		t.Fatal(err)
	}
	needs := func() bool {
		trees, err := discover.Walk([]string{tree})
		if err != nil || len(trees) != 1 {
			t.Fatalf("walk: %v %v", trees, err)
		}
		_, ok := NeedsHeal(trees[0], j, true)
		return ok
	}
	l, err := durable.OS.LockFile(context.Background(), discover.LockPath(session), 0)
	if err != nil {
		t.Fatal(err)
	}
	if needs() {
		t.Error("the staging of a session whose lock is held was taken for an interrupted run's")
	}
	l.Unlock()
	if !needs() {
		t.Error("with the lock free, the staging (of a dead run's tree) was not selected")
	}
}
