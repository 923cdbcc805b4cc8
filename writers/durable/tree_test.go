package durable

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// symlinkTree makes base/real/dir/file and base/link → real, plus
// base/real/flink → file.
func symlinkTree(t *testing.T) (base string) {
	t.Helper()
	base = t.TempDir()
	if err := os.MkdirAll(filepath.Join(base, "real", "dir"), 0o700); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(base, "real", "dir", "file"), "x")
	if err := os.Symlink(filepath.Join(base, "real"), filepath.Join(base, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("dir/file", filepath.Join(base, "real", "flink")); err != nil {
		t.Fatal(err)
	}
	return base
}

func TestOpenComponentwiseRelative(t *testing.T) {
	base := symlinkTree(t)
	t.Chdir(base)
	f, err := openComponentwise("real/dir/file", unix.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if _, err := openComponentwise("link/dir/file", unix.O_RDONLY, 0); !errors.Is(err, syscall.ELOOP) {
		t.Fatalf("err = %v, want ELOOP", err)
	}
	if _, err := openComponentwise("real/dir/../dir/file", unix.O_RDONLY, 0); !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("err = %v, want EINVAL for ..", err)
	}
	d, err := openComponentwise("/", unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	d.Close()
}

func TestHasSymlinkAncestor(t *testing.T) {
	base := symlinkTree(t)
	tests := []struct {
		path string
		want string // "" for none
	}{
		{filepath.Join(base, "real", "dir", "file"), ""},
		{filepath.Join(base, "link", "dir", "file"), filepath.Join(base, "link")},
		{filepath.Join(base, "link"), ""}, // the last component is not an ancestor
		{filepath.Join(base, "real", "flink"), ""},
		{filepath.Join(base, "real", "missing", "link", "x"), ""},
		{base + "/link/../real/dir/file", filepath.Join(base, "link")}, // not cleaned away
	}
	for _, tt := range tests {
		got, ok, err := OS.HasSymlinkAncestor(tt.path)
		if err != nil || got != tt.want || ok != (tt.want != "") {
			t.Errorf("HasSymlinkAncestor(%s) = %q, %v, %v; want %q", tt.path, got, ok, err, tt.want)
		}
	}
	t.Chdir(base)
	if got, ok, _ := OS.HasSymlinkAncestor("link/dir/file"); !ok || got != "link" {
		t.Errorf("relative: %q, %v", got, ok)
	}
}

func TestSyncTree(t *testing.T) {
	root := filepath.Join(t.TempDir(), "staging")
	for _, d := range []string{"segments", "index", "tmp"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, filepath.Join(root, "segments", "0000000000000001.seg"), "a")
	writeFile(t, filepath.Join(root, "segments", "0000000000000002.seg"), "b")
	writeFile(t, filepath.Join(root, "index", "offsets.jsonl"), "c")
	writeFile(t, filepath.Join(root, "manifest.json"), "d")
	var log []string
	if err := tracing(&log).SyncTree(root); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"sync offsets.jsonl", "sync index",
		"sync manifest.json",
		"sync 0000000000000001.seg", "sync 0000000000000002.seg", "sync segments",
		"sync tmp",
		"sync staging",
	}
	if !reflect.DeepEqual(log, want) {
		t.Fatalf("steps\n got %q\nwant %q", log, want)
	}

	if err := os.Symlink("manifest.json", filepath.Join(root, "index", "evil")); err != nil {
		t.Fatal(err)
	}
	if err := OS.SyncTree(root); err == nil || !strings.Contains(err.Error(), "evil") {
		t.Fatalf("err = %v, want a refusal naming the symlink", err)
	}
	o := FaultyOps(FaultRule{Op: FaultSync, Pattern: "*.seg", Err: syscall.EIO})
	os.Remove(filepath.Join(root, "index", "evil"))
	if err := o.SyncTree(root); !errors.Is(err, syscall.EIO) {
		t.Fatalf("err = %v, want EIO", err)
	}
}

func TestRename(t *testing.T) {
	base := t.TempDir()
	a, b := filepath.Join(base, "a"), filepath.Join(base, "b")
	for _, d := range []string{a, b} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, filepath.Join(a, "f"), "x")
	var log []string
	if err := tracing(&log).Rename(filepath.Join(a, "f"), filepath.Join(b, "g")); err != nil {
		t.Fatal(err)
	}
	if want := []string{"rename f g", "sync b", "sync a"}; !reflect.DeepEqual(log, want) {
		t.Fatalf("steps %q, want %q", log, want)
	}
	if readFile(t, filepath.Join(b, "g")) != "x" {
		t.Fatal("not moved")
	}
}

// The cutover moves a staging directory into an absent sidecar name and
// must never replace one that appeared meanwhile.
func TestRenameNoReplaceDirectories(t *testing.T) {
	base := t.TempDir()
	staging, sidecar := filepath.Join(base, "s.v2.staging.1"), filepath.Join(base, "s.v2")
	for _, d := range []string{staging, sidecar} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, filepath.Join(sidecar, "manifest.json"), "old")
	if err := OS.RenameNoReplace(staging, sidecar); !errors.Is(err, os.ErrExist) {
		t.Fatalf("err = %v, want ErrExist", err)
	}
	if err := os.Rename(sidecar, sidecar+".backup.1"); err != nil {
		t.Fatal(err)
	}
	if err := OS.RenameNoReplace(staging, sidecar); err != nil {
		t.Fatal(err)
	}
	if exists(t, staging) || !exists(t, sidecar) {
		t.Fatal("not moved")
	}
	// Rename replaces an empty directory, as rename(2) does.
	if err := os.Mkdir(staging, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := OS.Rename(sidecar+".backup.1", staging); err != nil {
		t.Fatal(err)
	}
	if readFile(t, filepath.Join(staging, "manifest.json")) != "old" {
		t.Fatal("not moved")
	}
}

func TestRenameRefusesSymlinkedParent(t *testing.T) {
	base := symlinkTree(t)
	err := OS.Rename(filepath.Join(base, "link", "dir", "file"), filepath.Join(base, "real", "moved"))
	if !errors.Is(err, syscall.ELOOP) {
		t.Fatalf("err = %v, want ELOOP", err)
	}
	if !exists(t, filepath.Join(base, "real", "dir", "file")) {
		t.Fatal("moved through a symlink")
	}
}

// TestMkdirPrivateIn: several directories made in one parent, opened once
// and synced once; an existing one is set to 0700, a symlink among them is
// refused and not followed, and a name that is not one component is
// refused.
func TestMkdirPrivateIn(t *testing.T) {
	withUmask(t, 0)
	root := filepath.Join(t.TempDir(), "s.v2.staging.1")
	if err := os.Mkdir(root, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(root, "index"), 0o755); err != nil {
		t.Fatal(err)
	}
	var log []string
	o := tracing(&log)
	names := []string{"segments", "index", "checkpoints", "migrations", "tmp"}
	if err := o.MkdirPrivateIn(root, names...); err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if got := mode(t, filepath.Join(root, n)); got != 0o700 {
			t.Fatalf("%s: mode %v", n, got)
		}
	}
	if want := []string{"sync " + filepath.Base(root)}; !reflect.DeepEqual(log, want) {
		t.Fatalf("steps %q, want %q", log, want)
	}
	log = nil
	if err := o.MkdirPrivateIn(root, names...); err != nil || len(log) != 0 {
		t.Fatalf("again: %v, steps %q (nothing created: no sync)", err, log)
	}
	sym := symlinkTree(t)
	if err := os.Chmod(filepath.Join(sym, "real"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := OS.MkdirPrivateIn(sym, "fresh", "link"); err == nil {
		t.Fatal("accepted a symlink as a directory")
	}
	if got := mode(t, filepath.Join(sym, "real")); got != 0o755 {
		t.Fatalf("chmod-ed through the symlink: %v", got)
	}
	for _, bad := range []string{"", ".", "..", "a/b"} {
		if err := OS.MkdirPrivateIn(root, bad); err == nil {
			t.Errorf("accepted the name %q", bad)
		}
	}
}

func TestMkdirPrivate(t *testing.T) {
	withUmask(t, 0)
	base := t.TempDir()
	path := filepath.Join(base, "s.v2.staging.1")
	var log []string
	o := tracing(&log)
	if err := o.MkdirPrivate(path); err != nil {
		t.Fatal(err)
	}
	if got := mode(t, path); got != 0o700 {
		t.Fatalf("mode %v", got)
	}
	if want := []string{"sync " + filepath.Base(base)}; !reflect.DeepEqual(log, want) {
		t.Fatalf("steps %q, want %q", log, want)
	}
	if err := os.Chmod(path, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := o.MkdirPrivate(path); err != nil {
		t.Fatal(err)
	}
	if got := mode(t, path); got != 0o700 {
		t.Fatalf("existing directory left at %v", got)
	}

	sym := symlinkTree(t)
	if err := os.Chmod(filepath.Join(sym, "real"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := OS.MkdirPrivate(filepath.Join(sym, "link")); err == nil {
		t.Fatal("accepted a symlink as the directory")
	}
	if got := mode(t, filepath.Join(sym, "real")); got != 0o755 {
		t.Fatalf("chmod-ed through the symlink: %v", got)
	}
	if err := OS.MkdirPrivate(filepath.Join(sym, "link", "new")); !errors.Is(err, syscall.ELOOP) {
		t.Fatalf("err = %v, want ELOOP", err)
	}
	if exists(t, filepath.Join(sym, "real", "new")) {
		t.Fatal("created through a symlink")
	}
}
