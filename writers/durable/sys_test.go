package durable

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
)

// opsOn is OS on the platform p instead of the native one: its opens,
// renames and filesystem sync, so that a Linux test runs the fallbacks
// macOS and FreeBSD use next to the Linux calls.
func opsOn(p platform) Ops {
	o := OS
	o.OpenFile = p.open
	o.RenameAt = func(oldpath, newpath string, noReplace bool) error {
		return renameAtOn(p, oldpath, newpath, noReplace)
	}
	o.SyncFS = p.syncFS
	return o
}

// TestRenameNoReplace: on every platform, a rename that must not replace
// moves a file or a directory to an absent name, and refuses with ErrExist
// whatever is at the new name (file, directory, empty or not, symlink),
// both sides left as they were. The portable fallback moves a directory
// (link(2) cannot) and refuses an empty one in the way.
func TestRenameNoReplace(t *testing.T) {
	type kind int
	const (
		absent kind = iota
		file
		dir
		emptyDir
		symlink
	)
	create := func(t *testing.T, path string, k kind) {
		t.Helper()
		var err error
		switch k {
		case file:
			err = os.WriteFile(path, []byte("in the way"), 0o600)
		case dir:
			if err = os.Mkdir(path, 0o700); err == nil {
				err = os.WriteFile(filepath.Join(path, "inside"), []byte("kept"), 0o600)
			}
		case emptyDir:
			err = os.Mkdir(path, 0o700)
		case symlink:
			err = os.Symlink("elsewhere", path)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	// describe tells what is at path, content included, to compare before
	// and after.
	describe := func(t *testing.T, path string) string {
		t.Helper()
		fi, err := os.Lstat(path)
		switch {
		case errors.Is(err, os.ErrNotExist):
			return "absent"
		case err != nil:
			t.Fatal(err)
		case fi.Mode()&os.ModeSymlink != 0:
			target, _ := os.Readlink(path)
			return "symlink " + target
		case fi.IsDir():
			names, _ := os.ReadDir(path)
			var s []string
			for _, n := range names {
				s = append(s, n.Name()+"="+readFile(t, filepath.Join(path, n.Name())))
			}
			return "dir " + strings.Join(s, ",")
		}
		return "file " + readFile(t, path)
	}
	for pname, p := range platforms() {
		for _, from := range []kind{file, dir} {
			for _, to := range []kind{absent, file, dir, emptyDir, symlink} {
				name := pname + "/" + [...]string{"absent", "file", "dir", "empty dir", "symlink"}[from] +
					" onto " + [...]string{"absent", "file", "dir", "empty dir", "symlink"}[to]
				t.Run(name, func(t *testing.T) {
					base := t.TempDir()
					oldpath, newpath := filepath.Join(base, "old"), filepath.Join(base, "new")
					create(t, oldpath, from)
					if to != absent {
						create(t, newpath, to)
					}
					wasOld, wasNew := describe(t, oldpath), describe(t, newpath)
					err := opsOn(p).RenameNoReplace(oldpath, newpath)
					if to == absent {
						if err != nil {
							t.Fatal(err)
						}
						if got := describe(t, newpath); got != wasOld || describe(t, oldpath) != "absent" {
							t.Fatalf("not moved: old %s, new %s", describe(t, oldpath), got)
						}
						return
					}
					if !errors.Is(err, os.ErrExist) {
						t.Fatalf("err = %v, want ErrExist", err)
					}
					if describe(t, oldpath) != wasOld || describe(t, newpath) != wasNew {
						t.Fatalf("changed: old %s (was %s), new %s (was %s)",
							describe(t, oldpath), wasOld, describe(t, newpath), wasNew)
					}
				})
			}
		}
	}
}

// TestRenameReplaces: on every platform a replacing rename puts a file in
// the place of another (a temp published by WriteFileAtomic included) and
// of nothing, and moves a directory over an empty one.
func TestRenameReplaces(t *testing.T) {
	for pname, p := range platforms() {
		t.Run(pname, func(t *testing.T) {
			dir, tmpDir := store(t)
			o := opsOn(p)
			for _, data := range []string{"first", "second"} {
				if err := o.WriteFileAtomic(dir, tmpDir, "f", []byte(data), 0o600); err != nil {
					t.Fatal(err)
				}
				if got := readFile(t, filepath.Join(dir, "f")); got != data {
					t.Fatalf("content %q, want %q", got, data)
				}
			}
			if names, _ := os.ReadDir(tmpDir); len(names) != 0 {
				t.Fatalf("left in tmp/: %v", names)
			}
			staging, empty := filepath.Join(dir, "staging"), filepath.Join(dir, "empty")
			for _, d := range []string{staging, empty} {
				if err := os.Mkdir(d, 0o700); err != nil {
					t.Fatal(err)
				}
			}
			writeFile(t, filepath.Join(staging, "m"), "x")
			if err := o.Rename(staging, empty); err != nil {
				t.Fatal(err)
			}
			if readFile(t, filepath.Join(empty, "m")) != "x" || exists(t, staging) {
				t.Fatal("directory not moved")
			}
		})
	}
}

// errSymlinkDir: a final symlink opened O_DIRECTORY|O_NOFOLLOW, which
// openat2 refuses with ENOTDIR and the component walk with ELOOP.
var errSymlinkDir = errors.New("ELOOP or ENOTDIR")

// TestOpenNoFollowPlatforms: every platform's open refuses a symlink in
// any component, final one included, with ELOOP.
func TestOpenNoFollowPlatforms(t *testing.T) {
	base := symlinkTree(t)
	tests := []struct {
		name string
		path string
		flag int
		err  error // nil: opens
	}{
		{"plain", "real/dir/file", os.O_RDONLY, nil},
		{"symlinked ancestor", "link/dir/file", os.O_RDONLY, syscall.ELOOP},
		{"symlinked final", "real/flink", os.O_RDONLY, syscall.ELOOP},
		{"symlinked final directory", "link/", os.O_RDONLY | syscall.O_DIRECTORY, syscall.ELOOP},
		{"symlinked final, as a directory", "link", os.O_RDONLY | syscall.O_DIRECTORY, errSymlinkDir},
		{"missing", "real/nope", os.O_RDONLY, os.ErrNotExist},
		{"create beneath a symlink", "link/dir/new", os.O_WRONLY | os.O_CREATE | os.O_EXCL, syscall.ELOOP},
	}
	for pname, p := range platforms() {
		for _, tt := range tests {
			t.Run(pname+"/"+tt.name, func(t *testing.T) {
				f, err := p.open(base+"/"+tt.path, tt.flag, 0o600) // not Join: keep a trailing /
				if f != nil {
					f.Close()
				}
				if tt.err == errSymlinkDir && (errors.Is(err, syscall.ELOOP) || errors.Is(err, syscall.ENOTDIR)) {
					return
				}
				if tt.err == nil && err != nil || tt.err != nil && !errors.Is(err, tt.err) {
					t.Fatalf("err = %v, want %v", err, tt.err)
				}
			})
		}
	}
	if exists(t, filepath.Join(base, "real", "dir", "new")) {
		t.Fatal("created through a symlinked directory")
	}
}

// TestSealFilesystemPlatforms: where the platform has syncfs a seal is one
// call for the whole filesystem (whole); where it has none (macOS,
// FreeBSD) every file and directory of the tree is fsynced, each directory
// after its contents (the parent, as after SyncTree, is synced by the
// rename that installs the tree), and the seal says it covered only the
// tree. A fault in a file's fsync fails the seal either way.
func TestSealFilesystemPlatforms(t *testing.T) {
	for pname, p := range platforms() {
		t.Run(pname, func(t *testing.T) {
			base := t.TempDir()
			root := filepath.Join(base, "s.v2.staging.1")
			if err := os.MkdirAll(filepath.Join(root, "segments"), 0o700); err != nil {
				t.Fatal(err)
			}
			writeFile(t, filepath.Join(root, "segments", "0000000000000001.seg"), "a")
			writeFile(t, filepath.Join(root, "manifest.json"), "b")
			var log []string
			o := tracing(&log)
			o.OpenFile, o.RenameAt = opsOn(p).OpenFile, opsOn(p).RenameAt
			o.SyncFS = func(f *os.File) error {
				log = append(log, "syncfs "+filepath.Base(f.Name()))
				return p.syncFS(f)
			}
			o.DeferSync = true // as a staging store is written
			_, whole, err := o.SealFilesystem(root)
			if err != nil {
				t.Fatal(err)
			}
			want := []string{"syncfs s.v2.staging.1"}
			if !whole {
				want = append(want, "sync manifest.json", "sync 0000000000000001.seg", "sync segments",
					"sync s.v2.staging.1")
			}
			if !reflect.DeepEqual(log, want) {
				t.Fatalf("steps\n got %q\nwant %q", log, want)
			}
			if whole != (pname == "linux") {
				t.Fatalf("whole = %v on %s", whole, pname)
			}

			f := FaultyOps(FaultRule{Op: FaultSync, Pattern: "*.seg", Err: syscall.EIO})
			f.OpenFile, f.RenameAt, f.DeferSync = opsOn(p).OpenFile, opsOn(p).RenameAt, true
			if !whole {
				f.SyncFS = p.syncFS
				if _, _, err := f.SealFilesystem(root); !errors.Is(err, syscall.EIO) {
					t.Fatalf("err = %v, want EIO", err)
				}
			}
		})
	}
}
