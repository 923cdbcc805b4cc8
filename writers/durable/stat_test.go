package durable

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestStatOf: the status read from an os.FileInfo and from an x/sys/unix
// stat buffer of the same file is one FileStat, on every system (their
// field names differ), and a change to the file moves its change time.
func TestStatOf(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	writeFile(t, path, "abc")
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	got, ok := StatOf(fi)
	if !ok {
		t.Fatal("no status in an os.Lstat result")
	}
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		t.Fatal(err)
	}
	if want := StatOfUnix(&st); got != want {
		t.Fatalf("StatOf %+v\nStatOfUnix %+v", got, want)
	}
	if got.Size != 3 || got.Nlink != 1 || got.Mode&unix.S_IFMT != unix.S_IFREG || got.Mode&0o777 != 0o600 ||
		got.UID != uint32(os.Geteuid()) || got.Ino == 0 {
		t.Fatalf("status %+v", got)
	}
	if mt := time.Unix(got.Mtime.Sec, got.Mtime.Nsec); !mt.Equal(fi.ModTime()) {
		t.Fatalf("mtime %v, os says %v", mt, fi.ModTime())
	}
	time.Sleep(10 * time.Millisecond)
	if err := os.Chmod(path, 0o640); err != nil {
		t.Fatal(err)
	}
	fi, err = os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	if after, _ := StatOf(fi); after.Ctime == got.Ctime || after.Mtime != got.Mtime {
		t.Fatalf("a chmod: ctime %v → %v, mtime %v → %v", got.Ctime, after.Ctime, got.Mtime, after.Mtime)
	}
}
