package sqlitev1

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"pisess/fixtures"
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

// TestChangedWhileCopiedIsSourceChanged: a database that a writer ignoring
// every lock keeps changing (it rewrites the file's first bytes as they
// are, which moves its change time) is never copied as one state: after
// its tries, Open says the source changed while it was read — the one
// class of a session written while pisess reads it, JSONL or SQLite (issue
// 34 §3) — neither a lock nor a refusal. Fails on 7f23c48 (a ClassLocked
// refusal).
func TestChangedWhileCopiedIsSourceChanged(t *testing.T) {
	db := filepath.Join(t.TempDir(), "s.sqlite")
	h, e := sessionRows(t, branchingSession(t))
	buildDB(t, db, h, e)
	d := openRaw(t, db)
	// A copy that outlasts a coarse file system clock.
	for _, q := range []string{"CREATE TABLE pad (b BLOB)", "INSERT INTO pad VALUES (zeroblob(8388608))"} {
		if _, err := d.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	d.Close()
	stop := fixtures.KeepRewriting(t, db)
	src, err := Open(db)
	stop()
	if err == nil {
		src.Close()
	}
	if !errors.Is(err, readers.ErrSourceChanged) || readers.AsRefused(err) != nil {
		t.Errorf("a database changed while copied: %v, want the source changed while read, not a refusal", err)
	}
	if _, err := Open(db); err != nil {
		t.Errorf("the writer gone: %v, want it read", err)
	}
}
