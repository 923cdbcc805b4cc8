//go:build !portable

package durable

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"pisess/fixtures/trees"
)

// writeSynced writes n bytes to path and fsyncs it: its pages are cached
// and clean, the state DropCached expects. Linux only: the portable
// platform (macOS) has no advice to drop pages.
func writeSynced(t *testing.T, path string, n int) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(bytes.Repeat([]byte("x"), n)); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestDropCached(t *testing.T) {
	base := t.TempDir()
	trees.SkipUnlessPagesDroppable(t, base)
	dir := filepath.Join(base, "segments")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	a, b := filepath.Join(dir, "a.seg"), filepath.Join(dir, "b.seg")
	outside := filepath.Join(base, "outside")
	for _, p := range []string{a, b, outside} {
		writeSynced(t, p, 1<<20)
	}
	// Neither a symlink's target nor a FIFO is opened (a FIFO's open would
	// block without O_NONBLOCK; a device's could act).
	if err := os.Symlink(outside, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mkfifo(filepath.Join(dir, "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{a, b, outside} {
		if res, total := trees.ResidentPages(t, p); res != total {
			t.Fatalf("%s: %d of %d pages cached before, want all", p, res, total)
		}
	}
	if err := OS.DropCached(dir); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{a, b} {
		if res, total := trees.ResidentPages(t, p); res != 0 {
			t.Errorf("%s: %d of %d pages still cached", p, res, total)
		}
	}
	if res, total := trees.ResidentPages(t, outside); res != total {
		t.Errorf("the symlink's target lost %d of its %d cached pages: the link was followed", total-res, total)
	}
	data, err := os.ReadFile(a)
	if err != nil || len(data) != 1<<20 || data[0] != 'x' || data[len(data)-1] != 'x' {
		t.Errorf("a.seg after the drop: %d bytes, %v", len(data), err)
	}
}
