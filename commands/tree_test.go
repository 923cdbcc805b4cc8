package commands

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"pisess/ledger"
	"pisess/readers/discover"
	"pisess/writers/durable"
)

// TestOneTreeOneJournal (issue 12, item 6): a run on a directory inside a
// tree uses the tree's journal, lock and quarantine; it makes no second
// .pisess/; it is kept out while another run holds the tree lock (exit 32),
// or waits for it with --lock-wait; its printed rollback hint works as
// printed.
func TestOneTreeOneJournal(t *testing.T) {
	t.Setenv("PI_SESSIONS_DIR", filepath.Join(t.TempDir(), "elsewhere"))
	root, session := placeSession(t, exampleSession, "2026-01-05T10-00-00-000Z_3f2b8c1e-9a4d-4e6f-8b2a-1c5d7e9f0a1b.jsonl")
	sub := filepath.Dir(session)
	if r, rep := mcMigrate(t, root); r.code != ExitClean || rep.Totals.Migrated != 1 {
		t.Fatalf("first run: %s", r)
	}

	// Another run holds the tree lock: a run on the subdirectory is kept out.
	held, _, err := durable.OS.TryLockTree(ledger.TreeLockPath(root))
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := mcMigrate(t, "--force", sub); r.code != ExitLocked {
		held.Unlock()
		t.Fatalf("a run on a subdirectory while the tree is locked: %s", r)
	}
	// With --lock-wait it waits until the holder is gone, then runs.
	released := make(chan struct{})
	go func() {
		time.Sleep(300 * time.Millisecond)
		held.Unlock()
		close(released)
	}()
	t.Setenv(EnvClock, fixedClock)
	r := pisess(t, "migrate", "--force", "--lock-wait", "1m", sub)
	<-released
	if r.code != ExitClean {
		t.Fatalf("--lock-wait: %s", r)
	}
	if _, err := os.Lstat(filepath.Join(sub, discover.PisessDir)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a run on a subdirectory made a second .pisess/ (%v)", err)
	}
	journal, err := os.ReadFile(filepath.Join(root, discover.PisessDir, "journal.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	out := r.stdout + r.stderr
	i := strings.Index(out, "undo this run with: ")
	if i < 0 {
		t.Fatalf("no rollback hint: %s", r)
	}
	hint := strings.Fields(strings.SplitN(out[i+len("undo this run with: "):], "\n", 2)[0])
	want := []string{"pisess", "rollback", "--tree", root}
	if len(hint) != 5 || strings.Join(hint[:4], " ") != strings.Join(want, " ") {
		t.Fatalf("hint %q, want %q ID", hint, want)
	}
	if !strings.Contains(string(journal), `"correlationId":"`+hint[4]+`"`) {
		t.Fatalf("the tree's journal does not know run %s", hint[4])
	}
	// The hint, run as printed, undoes the run: the displaced sidecar goes back.
	if rb := pisess(t, hint[1:]...); rb.code != ExitClean {
		t.Fatalf("the printed hint failed: %s", rb)
	}
	// rollback --tree of a directory inside the tree finds the same journal.
	if rb := pisess(t, "rollback", "--dry-run", "--tree", sub, hint[4]); rb.code != ExitClean || strings.Contains(rb.stdout+rb.stderr, "no journal") {
		t.Fatalf("rollback --tree SUBDIR: %s", rb)
	}
	// A bad --lock-wait is a usage error.
	if r := pisess(t, "migrate", "--lock-wait", "-1s", sub); r.code != ExitUsage {
		t.Fatalf("--lock-wait -1s: %s", r)
	}
}
