package rollback

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"pisess/ledger"
)

// TestInTrees: a path inside a tree names that tree; a tree without a
// journal is skipped untouched (no .pisess/ made for its lock); a run no
// journal knows is not Known and no error; the rows name their tree.
func TestInTrees(t *testing.T) {
	f := newTreeFixture(t, 3)
	migrateRun(t, f.tree, f.session, testRun)
	empty := t.TempDir()
	ctx := context.Background()

	res, err := InTrees(ctx, []string{empty, f.tree}, "run-9999-never-ran", Options{}, 0)
	if err != nil || res.Known || len(res.Sessions)+len(res.Forged) != 0 {
		t.Fatalf("unknown id: %+v, %v", res, err)
	}

	res, err = InTrees(ctx, []string{empty, filepath.Dir(f.session)}, testRun, Options{Clock: fixedClock}, 0)
	if err != nil || !res.Known {
		t.Fatalf("rollback: %+v, %v", res, err)
	}
	if len(res.Sessions) != 1 {
		t.Fatalf("sessions: %+v", res.Sessions)
	}
	s := res.Sessions[0]
	if s.Tree != f.tree || s.Session != f.session || s.Action != string(ActionRolledBack) || !s.Changed || s.Error != "" {
		t.Errorf("row: %+v, want tree %s session %s rolled back", s, f.tree, f.session)
	}
	if _, err := os.Lstat(f.sidecar); !os.IsNotExist(err) {
		t.Errorf("sidecar still installed: %v", err)
	}
	if _, err := os.Lstat(filepath.Dir(ledger.JournalPath(empty))); !os.IsNotExist(err) {
		t.Errorf("tree without a journal got .pisess/: %v", err)
	}
}
