package ledger

import (
	"os"
	"path/filepath"
	"testing"
)

// TestIdentityNote: a note's "dev=D ino=I" is the file's own, survives a
// rename, is read back from the end of a longer detail, and is "" for a
// path that names nothing; a symlink's is its own, not its target's.
func TestIdentityNote(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "s.jsonl")
	if err := os.WriteFile(f, []byte("{}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	note := IdentityNote(f)
	id, ok := ParseIdentity("upgraded; the original is " + note)
	if !ok || id.String() != note || id.Ino == 0 {
		t.Fatalf("note %q read back as %+v %v", note, id, ok)
	}
	moved := filepath.Join(dir, "q.jsonl")
	if err := os.Rename(f, moved); err != nil {
		t.Fatal(err)
	}
	if got, err := InodeOf(moved); err != nil || got != id {
		t.Fatalf("after a rename: %+v %v, want %+v", got, err, id)
	}
	link := filepath.Join(dir, "l.jsonl")
	if err := os.Symlink(moved, link); err != nil {
		t.Fatal(err)
	}
	if got, err := InodeOf(link); err != nil || got == id {
		t.Errorf("a symlink's identity is its target's: %+v %v", got, err)
	}
	if n := IdentityNote(f); n != "" {
		t.Errorf("a missing file's note: %q", n)
	}
	for _, detail := range []string{"", "installed", "dev=x ino=1"} {
		if id, ok := ParseIdentity(detail); ok {
			t.Errorf("ParseIdentity(%q) = %+v", detail, id)
		}
	}
}
