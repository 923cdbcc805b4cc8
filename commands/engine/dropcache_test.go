//go:build linux && !portable

package engine

import (
	"os"
	"path/filepath"
	"testing"

	"pisess/fixtures/trees"
	"pisess/rollback"
	"pisess/writers/store"
)

// A migrated session's store leaves no page of its segments or index in
// the page cache: they were read back, sealed and given back (issue 14).
func TestMigrateDropsCachedPages(t *testing.T) {
	tree := t.TempDir()
	trees.SkipUnlessPagesDroppable(t, tree)
	path, _ := migSession(t, tree, "big", 3000)
	rep := migRun(t, migOptions(tree))
	if s := migResult(t, rep, path); s.Outcome != OutcomeDone {
		t.Fatalf("outcome %s, want %s: %+v", s.Outcome, OutcomeDone, s)
	}
	sidecar := rollback.SidecarPath(path)
	var files []string
	for _, dir := range []string{store.SegmentsPath(sidecar), store.IndexDirPath(sidecar)} {
		ents, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			files = append(files, filepath.Join(dir, e.Name()))
		}
	}
	if len(files) < 2 {
		t.Fatalf("store files %v: want a segment and the index", files)
	}
	for _, f := range files {
		res, total := trees.ResidentPages(t, f)
		if total == 0 {
			t.Fatalf("%s is empty", f)
		}
		if res != 0 {
			t.Errorf("%s: %d of %d pages still cached", f, res, total)
		}
	}
	// The pages went, the bytes did not: the store is still what the
	// migration installed.
	migCheckInstalled(t, path, rep.CorrelationID, -1, -1)
}
