package sqlitev1

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"pisess/readers"
)

// TestPassingErrorsAreTransient: what says nothing about the database's
// bytes — a writer's exclusive lock, a temporary directory that is not
// there for the private copy — is refused with a transient class, so that
// callers count it a failure of the run and never remember it; a file that
// is not a database is a verdict (issue 32 §2).
func TestPassingErrorsAreTransient(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "s.sqlite")
	startChild(t, "excl-delete", db, branchingSession(t))
	_, err := OpenWith(db, Options{BusyTimeout: 100 * time.Millisecond})
	if r := readers.AsRefused(err); r == nil || r.Class != readers.ClassLocked || !r.Transient() || readers.AsVerdict(err) != nil {
		t.Errorf("locked: %v, want a transient ClassLocked refusal", err)
	}

	good := filepath.Join(t.TempDir(), "g.sqlite")
	h, e := sessionRows(t, branchingSession(t))
	buildDB(t, good, h, e)
	_, err = OpenWith(good, Options{TempDir: filepath.Join(dir, "no-such-dir")})
	if r := readers.AsRefused(err); r == nil || r.Class != readers.ClassIO || !r.Transient() || readers.AsVerdict(err) != nil {
		t.Errorf("missing TempDir: %v, want a transient ClassIO refusal", err)
	}

	bad := filepath.Join(t.TempDir(), "b.sqlite")
	if err := os.WriteFile(bad, []byte("SQLite format 3\x00 but no more than this"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(bad); readers.AsVerdict(err) == nil {
		t.Errorf("a truncated header: %v, want a verdict", err)
	}
}
