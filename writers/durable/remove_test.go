package durable

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// makeTree writes a small store-like tree at dir: files, and directories
// with files in them.
func makeTree(t *testing.T, dir string, width int) {
	t.Helper()
	for i := range width {
		sub := filepath.Join(dir, fmt.Sprintf("d%02d", i), "inner")
		if err := os.MkdirAll(sub, 0o700); err != nil {
			t.Fatal(err)
		}
		for j := range 3 {
			if err := os.WriteFile(filepath.Join(sub, fmt.Sprintf("f%d", j)), []byte("x"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%02d", i)), []byte("y"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// decoy is a directory outside the tree holding what a removal that
// follows a symlink would destroy.
func decoy(t *testing.T, names ...string) (dir, canary string) {
	t.Helper()
	dir = t.TempDir()
	p := filepath.Join(append([]string{dir}, names...)...)
	if err := os.MkdirAll(p, 0o700); err != nil {
		t.Fatal(err)
	}
	canary = filepath.Join(p, "canary")
	if err := os.WriteFile(canary, []byte("not the tree's\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir, canary
}

// TestRemoveAllNeverFollowsASymlink: the removal is made by descriptor,
// so a symlink is unlinked, never entered — one inside the tree, one that
// takes the place of a directory after the parent was opened, and one on
// the way to the path (refused) — and what is there is removed whole.
func TestRemoveAllNeverFollowsASymlink(t *testing.T) {
	t.Run("whole tree", func(t *testing.T) {
		base := t.TempDir()
		x := filepath.Join(base, "x")
		makeTree(t, x, 4)
		if err := OS.RemoveAll(x); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Lstat(x); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s left: %v", x, err)
		}
		if err := OS.RemoveAll(x); err != nil {
			t.Errorf("a missing path: %v", err)
		}
	})
	t.Run("a symlink inside", func(t *testing.T) {
		base := t.TempDir()
		x := filepath.Join(base, "x")
		makeTree(t, x, 2)
		out, canary := decoy(t, "d00")
		if err := os.Symlink(filepath.Join(out, "d00"), filepath.Join(x, "link")); err != nil {
			t.Fatal(err)
		}
		if err := OS.RemoveAll(x); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(canary); err != nil {
			t.Fatalf("the link's target was emptied: %v", err)
		}
	})
	t.Run("the parent swapped after it was opened", func(t *testing.T) {
		base := t.TempDir()
		q := filepath.Join(base, "q")
		makeTree(t, filepath.Join(q, "x"), 2)
		out, canary := decoy(t, "x")
		d, err := OS.OpenNoFollow(q, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		// The owner's swap: q moved away, a symlink to the decoy in its place.
		if err := os.Rename(q, q+".real"); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(out, q); err != nil {
			t.Fatal(err)
		}
		if err := RemoveBeneath(d, "x"); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(canary); err != nil {
			t.Fatalf("the removal went through the swapped parent: %v", err)
		}
		if _, err := os.Lstat(filepath.Join(q+".real", "x")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the directory opened was not removed: %v", err)
		}
	})
	t.Run("a symlink on the way", func(t *testing.T) {
		base := t.TempDir()
		out, canary := decoy(t, "x")
		if err := os.Symlink(out, filepath.Join(base, "q")); err != nil {
			t.Fatal(err)
		}
		if err := OS.RemoveAll(filepath.Join(base, "q", "x")); !errors.Is(err, syscall.ELOOP) {
			t.Errorf("RemoveAll through a symlinked parent: %v, want ELOOP", err)
		}
		if _, err := os.Stat(canary); err != nil {
			t.Fatalf("removed through the symlink: %v", err)
		}
	})
}
