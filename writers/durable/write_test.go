package durable

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
)

func TestWriteFileAtomicOrder(t *testing.T) {
	dir, tmpDir := store(t)
	var log []string
	if err := tracing(&log).WriteFileAtomic(dir, tmpDir, "manifest.json", []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"write manifest.json.tmp",
		"sync manifest.json.tmp",
		"rename manifest.json.tmp manifest.json",
		"sync store",
		"sync tmp",
	}
	if !reflect.DeepEqual(log, want) {
		t.Fatalf("steps\n got %q\nwant %q", log, want)
	}
	if got := readFile(t, filepath.Join(dir, "manifest.json")); got != "{}" {
		t.Fatalf("content %q", got)
	}
	if exists(t, filepath.Join(tmpDir, "manifest.json.tmp")) {
		t.Fatal("temp left behind")
	}
}

func TestWriteFileAtomicSameDir(t *testing.T) {
	_, tmpDir := store(t)
	var log []string
	if err := tracing(&log).WriteFileAtomic(tmpDir, tmpDir, "rollback.intent.json", []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if last := log[len(log)-1]; last != "sync tmp" || strings.Count(strings.Join(log, ","), "sync tmp") != 1 {
		t.Fatalf("directory synced other than once: %q", log)
	}
}

func TestWriteFileAtomicModes(t *testing.T) {
	for _, mask := range []int{0, 0o077, 0o277} {
		for _, perm := range []os.FileMode{0o600, 0o640, 0o400} {
			t.Run(filepath.Join("umask"+octal(mask), octal(int(perm))), func(t *testing.T) {
				dir, tmpDir := store(t) // before the umask, which may forbid it
				withUmask(t, mask)
				if err := OS.WriteFileAtomic(dir, tmpDir, "f", []byte("data"), perm); err != nil {
					t.Fatal(err)
				}
				if got := mode(t, filepath.Join(dir, "f")); got != perm {
					t.Fatalf("mode %v, want %v", got, perm)
				}
			})
		}
	}
}

func octal(n int) string { return fmt.Sprintf("%04o", n) }

// TestWriteFileAtomicFaults: whatever step fails before the rename, the
// old file is intact and no temp is left.
func TestWriteFileAtomicFaults(t *testing.T) {
	tests := []struct {
		name string
		rule FaultRule
	}{
		{"EIO on fsync", FaultRule{Op: FaultSync, Pattern: "*.tmp", Err: syscall.EIO}},
		{"ENOSPC on write", FaultRule{Op: FaultWrite, Pattern: "*.tmp", Err: syscall.ENOSPC}},
		{"EACCES on rename", FaultRule{Op: FaultRename, Pattern: "*.tmp", Err: syscall.EACCES}},
		{"EACCES on open", FaultRule{Op: FaultOpen, Pattern: "*.tmp", Err: syscall.EACCES}},
	}
	for _, tt := range tests {
		for _, old := range []bool{true, false} {
			name := tt.name + "/new"
			if old {
				name = tt.name + "/replace"
			}
			t.Run(name, func(t *testing.T) {
				dir, tmpDir := store(t)
				final := filepath.Join(dir, "manifest.json")
				if old {
					writeFile(t, final, "old")
				}
				err := FaultyOps(tt.rule).WriteFileAtomic(dir, tmpDir, "manifest.json", []byte("new content"), 0o600)
				if !errors.Is(err, tt.rule.Err) {
					t.Fatalf("err = %v, want %v", err, tt.rule.Err)
				}
				if exists(t, filepath.Join(tmpDir, "manifest.json.tmp")) {
					t.Fatal("temp left behind")
				}
				switch {
				case old && readFile(t, final) != "old":
					t.Fatalf("old file changed: %q", readFile(t, final))
				case !old && exists(t, final):
					t.Fatal("final file created")
				}
			})
		}
	}
}

// A failed directory fsync after the rename is reported although the new
// content is in place: the caller must not count the write as durable.
func TestWriteFileAtomicDirSyncFails(t *testing.T) {
	dir, tmpDir := store(t)
	o := FaultyOps(FaultRule{Op: FaultSync, Pattern: "store", Err: syscall.EIO})
	err := o.WriteFileAtomic(dir, tmpDir, "f", []byte("new"), 0o600)
	if !errors.Is(err, syscall.EIO) {
		t.Fatalf("err = %v", err)
	}
	if exists(t, filepath.Join(tmpDir, "f.tmp")) {
		t.Fatal("temp left behind")
	}
}

func TestWriteFileAtomicLeftoverTemp(t *testing.T) {
	t.Run("regular file is removed", func(t *testing.T) {
		dir, tmpDir := store(t)
		writeFile(t, filepath.Join(tmpDir, "f.tmp"), "torn garbage from a crash")
		if err := OS.WriteFileAtomic(dir, tmpDir, "f", []byte("new"), 0o600); err != nil {
			t.Fatal(err)
		}
		if got := readFile(t, filepath.Join(dir, "f")); got != "new" {
			t.Fatalf("content %q", got)
		}
	})
	t.Run("anything else is refused", func(t *testing.T) {
		dir, tmpDir := store(t)
		if err := os.Mkdir(filepath.Join(tmpDir, "f.tmp"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := OS.WriteFileAtomic(dir, tmpDir, "f", []byte("new"), 0o600); err == nil {
			t.Fatal("wrote over a directory named like our temp")
		}
		if !exists(t, filepath.Join(tmpDir, "f.tmp")) || exists(t, filepath.Join(dir, "f")) {
			t.Fatal("touched what it refused")
		}
	})
}

func TestWriteFileAtomicSymlinks(t *testing.T) {
	t.Run("symlinked ancestor of dir", func(t *testing.T) {
		base := t.TempDir()
		real := filepath.Join(base, "real")
		if err := os.MkdirAll(filepath.Join(real, "tmp"), 0o700); err != nil {
			t.Fatal(err)
		}
		link := filepath.Join(base, "link")
		if err := os.Symlink(real, link); err != nil {
			t.Fatal(err)
		}
		err := OS.WriteFileAtomic(link, filepath.Join(link, "tmp"), "f", []byte("x"), 0o600)
		if !errors.Is(err, syscall.ELOOP) {
			t.Fatalf("err = %v, want ELOOP", err)
		}
		if exists(t, filepath.Join(real, "f")) || exists(t, filepath.Join(real, "tmp", "f.tmp")) {
			t.Fatal("wrote through the symlink")
		}
	})
	t.Run("symlinked tmp dir", func(t *testing.T) {
		dir, _ := store(t)
		other := t.TempDir()
		if err := os.Symlink(other, filepath.Join(dir, "tmp2")); err != nil {
			t.Fatal(err)
		}
		err := OS.WriteFileAtomic(dir, filepath.Join(dir, "tmp2"), "f", []byte("x"), 0o600)
		if !errors.Is(err, syscall.ELOOP) {
			t.Fatalf("err = %v, want ELOOP", err)
		}
	})
	t.Run("symlinked final name", func(t *testing.T) {
		dir, tmpDir := store(t)
		target := filepath.Join(t.TempDir(), "target")
		writeFile(t, target, "outside")
		if err := os.Symlink(target, filepath.Join(dir, "f")); err != nil {
			t.Fatal(err)
		}
		if err := OS.WriteFileAtomic(dir, tmpDir, "f", []byte("x"), 0o600); err == nil {
			t.Fatal("replaced a symlink")
		}
		if fi, _ := os.Lstat(filepath.Join(dir, "f")); fi.Mode()&os.ModeSymlink == 0 {
			t.Fatal("symlink replaced")
		}
		if readFile(t, target) != "outside" || exists(t, filepath.Join(tmpDir, "f.tmp")) {
			t.Fatal("wrote through the symlink or left a temp")
		}
	})
	t.Run("name with a slash", func(t *testing.T) {
		dir, tmpDir := store(t)
		if err := OS.WriteFileAtomic(dir, tmpDir, "a/b", []byte("x"), 0o600); err == nil {
			t.Fatal("accepted a name with a slash")
		}
	})
}

func TestCreateNoReplace(t *testing.T) {
	withUmask(t, 0)
	dir, tmpDir := store(t)
	cp := filepath.Join(dir, "0000000000000001.json")
	if err := OS.CreateNoReplace(dir, tmpDir, "0000000000000001.json", []byte("first")); err != nil {
		t.Fatal(err)
	}
	if got := mode(t, cp); got != 0o600 {
		t.Fatalf("mode %v", got)
	}
	err := OS.CreateNoReplace(dir, tmpDir, "0000000000000001.json", []byte("second"))
	if !errors.Is(err, os.ErrExist) {
		t.Fatalf("err = %v, want ErrExist", err)
	}
	if got := readFile(t, cp); got != "first" {
		t.Fatalf("checkpoint replaced: %q", got)
	}
	if exists(t, filepath.Join(tmpDir, "0000000000000001.json.tmp")) {
		t.Fatal("temp left behind")
	}
}

func TestWriteFileInPlace(t *testing.T) {
	withUmask(t, 0)
	dir, _ := store(t)
	path := filepath.Join(dir, "source-state.json")
	var log []string
	o := tracing(&log)
	if err := o.WriteFileInPlace(path, []byte("a much longer first version\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := o.WriteFileInPlace(path, []byte("short\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, path); got != "short\n" {
		t.Fatalf("content %q", got)
	}
	if got := mode(t, path); got != 0o600 {
		t.Fatalf("mode %v", got)
	}
	want := []string{"write source-state.json", "sync source-state.json", "sync store"}
	if !reflect.DeepEqual(log[3:], want) {
		t.Fatalf("steps %q, want %q twice", log, want)
	}
}

func TestWriteFileInPlaceRefuses(t *testing.T) {
	t.Run("symlink", func(t *testing.T) {
		dir, _ := store(t)
		target := filepath.Join(t.TempDir(), "target")
		writeFile(t, target, "outside")
		path := filepath.Join(dir, "source-state.json")
		if err := os.Symlink(target, path); err != nil {
			t.Fatal(err)
		}
		if err := OS.WriteFileInPlace(path, []byte("x"), 0o600); !errors.Is(err, syscall.ELOOP) {
			t.Fatalf("err = %v, want ELOOP", err)
		}
		if readFile(t, target) != "outside" {
			t.Fatal("wrote through the symlink")
		}
	})
	t.Run("fifo", func(t *testing.T) {
		dir, _ := store(t)
		path := filepath.Join(dir, "source-state.json")
		if err := syscall.Mkfifo(path, 0o600); err != nil {
			t.Fatal(err)
		}
		// Must fail at once, not block waiting for a reader.
		if err := OS.WriteFileInPlace(path, []byte("x"), 0o600); err == nil {
			t.Fatal("wrote to a fifo")
		}
	})
}

func TestAppendLine(t *testing.T) {
	withUmask(t, 0)
	dir, _ := store(t)
	if err := os.Mkdir(filepath.Join(dir, "migrations"), 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "migrations", "ledger.jsonl")
	var log []string
	o := tracing(&log)
	for _, line := range []string{`{"n":1}`, `{"n":2}`} {
		if err := o.AppendLine(path, []byte(line+"\n")); err != nil {
			t.Fatal(err)
		}
	}
	if got := readFile(t, path); got != "{\"n\":1}\n{\"n\":2}\n" {
		t.Fatalf("content %q", got)
	}
	if got := mode(t, path); got != 0o600 {
		t.Fatalf("mode %v", got)
	}
	want := []string{
		"write ledger.jsonl", "sync ledger.jsonl", "sync migrations", // created: directory too
		"write ledger.jsonl", "sync ledger.jsonl",
	}
	if !reflect.DeepEqual(log, want) {
		t.Fatalf("steps\n got %q\nwant %q", log, want)
	}
	for _, bad := range []string{"", "no newline", "two\nlines\n", "\n\n"} {
		if err := OS.AppendLine(path, []byte(bad)); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}

// A write that fails part way leaves no torn line in front of the next
// append.
func TestAppendLineFullDisk(t *testing.T) {
	dir, _ := store(t)
	path := filepath.Join(dir, "ledger.jsonl")
	writeFile(t, path, "{\"n\":1}\n")
	o := FaultyOps(FaultRule{Op: FaultWrite, Pattern: "ledger.jsonl", Err: syscall.ENOSPC})
	if err := o.AppendLine(path, []byte("{\"n\":2,\"long\":\"enough to be cut\"}\n")); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("err = %v", err)
	}
	if got := readFile(t, path); got != "{\"n\":1}\n" {
		t.Fatalf("torn line left: %q", got)
	}
}

// AppendLines writes several lines with one write and one sync; a write
// that fails part way leaves none of them.
func TestAppendLines(t *testing.T) {
	dir, _ := store(t)
	path := filepath.Join(dir, "ledger.jsonl")
	writeFile(t, path, "{\"n\":1}\n")
	var log []string
	if err := tracing(&log).AppendLines(path, []byte("{\"n\":2}\n{\"n\":3}\n")); err != nil {
		t.Fatal(err)
	}
	if want := []string{"write ledger.jsonl", "sync ledger.jsonl"}; !reflect.DeepEqual(log, want) {
		t.Fatalf("steps\n got %q\nwant %q", log, want)
	}
	if got := readFile(t, path); got != "{\"n\":1}\n{\"n\":2}\n{\"n\":3}\n" {
		t.Fatalf("content %q", got)
	}
	o := FaultyOps(FaultRule{Op: FaultWrite, Pattern: "ledger.jsonl", Err: syscall.ENOSPC})
	if err := o.AppendLines(path, []byte("{\"n\":4,\"long\":\"enough to be cut\"}\n{\"n\":5}\n")); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("err = %v", err)
	}
	if got := readFile(t, path); got != "{\"n\":1}\n{\"n\":2}\n{\"n\":3}\n" {
		t.Fatalf("part of the lines left: %q", got)
	}
	for _, bad := range []string{"", "no newline", "one\ntwo"} {
		if err := OS.AppendLines(path, []byte(bad)); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}

func TestAppendLineRefusesSymlink(t *testing.T) {
	dir, _ := store(t)
	target := filepath.Join(t.TempDir(), "target")
	writeFile(t, target, "")
	path := filepath.Join(dir, "ledger.jsonl")
	if err := os.Symlink(target, path); err != nil {
		t.Fatal(err)
	}
	if err := OS.AppendLine(path, []byte("x\n")); !errors.Is(err, syscall.ELOOP) {
		t.Fatalf("err = %v, want ELOOP", err)
	}
	if readFile(t, target) != "" {
		t.Fatal("appended through the symlink")
	}
}

func TestCreatePrivate(t *testing.T) {
	withUmask(t, 0)
	dir, _ := store(t)
	path := filepath.Join(dir, "0000000000000001.seg")
	f, err := OS.CreatePrivate(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("frame\n")); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if got := mode(t, path); got != 0o600 {
		t.Fatalf("mode %v", got)
	}
	if _, err := OS.CreatePrivate(path); !errors.Is(err, os.ErrExist) {
		t.Fatalf("err = %v, want ErrExist", err)
	}
	o := FaultyOps(FaultRule{Op: FaultWrite, Pattern: "*.seg", Err: syscall.ENOSPC})
	f, err = o.CreatePrivate(filepath.Join(dir, "0000000000000002.seg"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if n, err := f.Write([]byte("0123456789")); !errors.Is(err, syscall.ENOSPC) || n != 5 {
		t.Fatalf("n, err = %d, %v; want a torn write of 5", n, err)
	}
}

func TestTruncate(t *testing.T) {
	dir, _ := store(t)
	path := filepath.Join(dir, "0000000000000001.seg")
	writeFile(t, path, "good\ntorn")
	if err := OS.Truncate(path, 5); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, path); got != "good\n" {
		t.Fatalf("content %q", got)
	}
	if err := OS.Truncate(path, 6); err == nil {
		t.Fatal("grew a file")
	}
	link := filepath.Join(dir, "link.seg")
	if err := os.Symlink(path, link); err != nil {
		t.Fatal(err)
	}
	if err := OS.Truncate(link, 0); !errors.Is(err, syscall.ELOOP) {
		t.Fatalf("err = %v, want ELOOP", err)
	}
}

// The zero Ops is the operating system's.
func TestZeroOps(t *testing.T) {
	dir, tmpDir := store(t)
	if err := (Ops{}).WriteFileAtomic(dir, tmpDir, "f", []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestWriteFileAtomicReplacesByExchange: a file published over an existing
// one takes its place by an exchange (replaceByExchange), so the old inode
// is unlinked and no temp is left; what stands in the way and is no file
// (a directory) is exchanged back and the publication fails as a rename
// over it would, both sides as they were.
func TestWriteFileAtomicReplacesByExchange(t *testing.T) {
	dir, tmpDir := store(t)
	final := filepath.Join(dir, "f")
	writeFile(t, final, "old")
	old, err := os.Open(final)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	if err := OS.WriteFileAtomic(dir, tmpDir, "f", []byte("new"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, final); got != "new" {
		t.Fatalf("content %q", got)
	}
	if exists(t, filepath.Join(tmpDir, TempName("f"))) {
		t.Fatal("the displaced file was left in tmp/")
	}
	st, err := fstat(old)
	if err != nil {
		t.Fatal(err)
	}
	if st.Nlink != 0 {
		t.Fatalf("the old file still has %d links", st.Nlink)
	}

	// A directory where the file was (checkReplaceable looks first: the
	// rename is called as a race past it would).
	if err := os.Remove(final); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(final, 0o700); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(final, "inside"), "kept")
	tmp := filepath.Join(tmpDir, TempName("f"))
	writeFile(t, tmp, "newer")
	if err := renameAt(tmp, final, false); err == nil {
		t.Fatal("a file renamed over a directory")
	}
	if got := readFile(t, filepath.Join(final, "inside")); got != "kept" {
		t.Fatalf("the directory's content %q", got)
	}
	if got := readFile(t, tmp); got != "newer" {
		t.Fatalf("the temp's content %q", got)
	}
}

// TestReadLimited: the whole file whatever the stat said (exact, grown
// since, shrunk since), and limit+1 bytes of a file over the limit.
func TestReadLimited(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name        string
		data        string
		size, limit int64
		want        string
	}{
		{"exact", "0123456789", 10, 100, "0123456789"},
		{"grown since the stat", "0123456789", 4, 100, "0123456789"},
		{"shrunk since the stat", "0123", 10, 100, "0123"},
		{"empty", "", 0, 100, ""},
		{"over the limit", "0123456789", 10, 5, "012345"},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(dir, c.name)
			writeFile(t, path, c.data)
			f, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			got, err := ReadLimited(f, c.size, c.limit)
			if err != nil || string(got) != c.want {
				t.Fatalf("ReadLimited = %q, %v; want %q", got, err, c.want)
			}
		})
	}
}
