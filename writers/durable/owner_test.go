package durable

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

const nobody = 65534

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("chown to another user needs root")
	}
}

func TestChownTree(t *testing.T) {
	requireRoot(t)
	base := t.TempDir()
	outside := filepath.Join(base, "outside")
	writeFile(t, outside, "not ours to give away")
	root := filepath.Join(base, "s.v2")
	for _, d := range []string{"segments", "index/deep"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, filepath.Join(root, "manifest.json"), "{}")
	writeFile(t, filepath.Join(root, "index", "deep", "f"), "x")
	if err := os.Symlink(outside, filepath.Join(root, "segments", "link")); err != nil {
		t.Fatal(err)
	}
	if err := OS.ChownTree(root, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	filepath.Walk(root, func(path string, fi os.FileInfo, err error) error {
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		if st.Uid != nobody || st.Gid != nobody {
			t.Errorf("%s owned by %d:%d", path, st.Uid, st.Gid)
		}
		return nil
	})
	if uid, gid, err := OS.Owner(outside); err != nil || uid != 0 || gid != 0 {
		t.Fatalf("symlink target chowned: %d:%d %v", uid, gid, err)
	}
	if uid, gid, err := OS.Owner(root); err != nil || uid != nobody || gid != nobody {
		t.Fatalf("Owner = %d:%d %v", uid, gid, err)
	}
}

func TestChownTreeRefusesSymlinkRoot(t *testing.T) {
	requireRoot(t)
	base := symlinkTree(t)
	if err := OS.ChownTree(filepath.Join(base, "link"), nobody, nobody); err == nil {
		t.Fatal("followed a symlinked root")
	}
	if uid, _, _ := OS.Owner(filepath.Join(base, "real", "dir", "file")); uid != 0 {
		t.Fatal("chowned through the symlink")
	}
}

func TestChownIfRoot(t *testing.T) {
	requireRoot(t)
	base := symlinkTree(t)
	link := filepath.Join(base, "real", "flink")
	if err := OS.ChownIfRoot(link, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	if uid, _, _ := OS.Owner(link); uid != nobody {
		t.Fatal("symlink itself not chowned")
	}
	if uid, _, _ := OS.Owner(filepath.Join(base, "real", "dir", "file")); uid != 0 {
		t.Fatal("symlink target chowned")
	}
	if err := OS.ChownIfRoot(filepath.Join(base, "link", "dir", "file"), nobody, nobody); err == nil {
		t.Fatal("chowned through a symlinked ancestor")
	}
}

// Run as root, what pisess creates in a user's directory is the user's
// from the moment it exists: a temp before it is renamed over a file pi
// may be opening, a lock file pi must be able to open.
func TestCreatedFilesInheritDirectoryOwner(t *testing.T) {
	requireRoot(t)
	dir, tmpDir := store(t)
	for _, d := range []string{dir, tmpDir} {
		if err := os.Chown(d, nobody, nobody); err != nil {
			t.Fatal(err)
		}
	}
	owned := func(path string) bool {
		uid, gid, err := OS.Owner(path)
		return err == nil && uid == nobody && gid == nobody
	}
	o := OS
	o.RenameAt = func(oldpath, newpath string, noReplace bool) error {
		if !owned(oldpath) {
			t.Errorf("%s renamed into place before it was chowned", oldpath)
		}
		return OS.RenameAt(oldpath, newpath, noReplace)
	}
	if err := o.WriteFileAtomic(dir, tmpDir, "manifest.json", []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := o.MkdirPrivate(filepath.Join(dir, "segments")); err != nil {
		t.Fatal(err)
	}
	if err := o.AppendLine(filepath.Join(dir, "ledger.jsonl"), []byte("x\n")); err != nil {
		t.Fatal(err)
	}
	l, err := o.LockFile(context.Background(), filepath.Join(dir, "store.mutation.lock"), 0)
	if err != nil {
		t.Fatal(err)
	}
	l.Unlock()
	for _, name := range []string{"manifest.json", "segments", "ledger.jsonl", "store.mutation.lock"} {
		if !owned(filepath.Join(dir, name)) {
			t.Errorf("%s not given to the directory's owner", name)
		}
	}
	// Something already there keeps its owner.
	other := filepath.Join(t.TempDir(), "session.jsonl.lock")
	writeFile(t, other, "")
	if err := os.Chown(other, 1234, 1234); err != nil {
		t.Fatal(err)
	}
	l, err = OS.LockFile(context.Background(), other, 0)
	if err != nil {
		t.Fatal(err)
	}
	l.Unlock()
	if uid, _, _ := OS.Owner(other); uid != 1234 {
		t.Fatalf("existing lock file given to %d", uid)
	}
}
