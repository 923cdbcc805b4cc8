package commands

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"pisess/ledger"
)

// TestOverlappingRunRedoesNothing is the cron overlap of issue 34 §1:
// `pisess migrate -q T &` and, while it runs, `pisess migrate --lock-wait
// 5m T`. The second run waits for the tree lock, then must plan from what
// it sees once it holds it: the first run's sidecars are fresh (nothing
// refreshed, nothing displaced into the quarantine) and its staging
// directories, which belonged to a live run, are gone (nothing
// needs_repair). So the second run exits 0, prints nothing with -q and
// journals nothing.
//
// issue 34 §1: fails on 65304d8 (the second run walks the tree and reads
// its state files before it waits for the lock, then refreshes the
// sidecars the first installed meanwhile and calls the first run's staging
// directories leftovers: exit 4, hundreds of sidecars in the quarantine).
func TestOverlappingRunRedoesNothing(t *testing.T) {
	// The tree is 600 sessions of 300 MB; 20 MB keep the race and
	// take a few seconds a run on two loaded CPUs.
	tree := genTree(t, 600, 20, 3)
	first := startChild(t, nil, "migrate", "-q", tree)
	// The first run holds the lock and installs: a sidecar is in place.
	waitUntil(t, time.Minute, "the first run's first sidecar", func() bool { return sidecars(tree) > 0 || first.exited() })
	if first.exited() {
		t.Fatalf("the first run ended before the second began (make the tree larger): %s", first)
	}
	const secondID = "overlap-second-run-0001"
	second := startChild(t, nil, "migrate", "-q", "--lock-wait", "5m", "--correlation-id", secondID, tree)
	first.wait(t, 2*time.Minute)
	second.wait(t, 2*time.Minute)
	if second.at.Before(first.at) {
		t.Fatalf("the second run ended before the first: it did not wait for the tree lock\nfirst: %s\nsecond: %s", first, second)
	}
	if first.code != ExitClean || first.out.Len()+first.err.Len() != 0 {
		t.Fatalf("the first run: %s", first)
	}
	if n := sidecars(tree); n != 600 {
		t.Fatalf("%d sidecars installed, want 600", n)
	}
	if second.code != ExitClean || second.out.Len()+second.err.Len() != 0 {
		t.Errorf("the second run is not a silent no-op: %s", second)
	}
	q := filepath.Join(tree, ledger.PisessDir, ledger.QuarantineDir)
	if n := regularFiles(q); n != 0 {
		t.Errorf("the quarantine holds %d files (%d bytes of the second run's): the second run displaced what the first installed",
			n, dirSize(ledger.Quarantine(tree, secondID)))
	}
	if recs := runRecords(t, tree, secondID); len(recs) != 0 {
		refreshed := 0
		for _, r := range recs {
			if r.Event != nil && r.Event.Phase == "completed" {
				refreshed++
			}
		}
		t.Errorf("the second run journaled %d records (%d sessions rebuilt)", len(recs), refreshed)
	}
}

// dirSize is the bytes of the regular files under dir.
func dirSize(dir string) int64 {
	var n int64
	_ = filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			n += fi.Size()
		}
		return nil
	})
	return n
}
