package discover

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// TestFileKeyOf: the key of a file is the same from an os.Lstat, a
// syscall stat buffer and an x/sys/unix one (whose field names differ
// between systems), and it holds the file's identity, size and times.
func TestFileKeyOf(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a.jsonl")
	if err := os.WriteFile(path, []byte("{}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	k, ok := FileKeyOf(fi)
	if !ok {
		t.Fatal("no key for an os.Lstat result")
	}
	var sst syscall.Stat_t
	if err := syscall.Lstat(path, &sst); err != nil {
		t.Fatal(err)
	}
	var ust unix.Stat_t
	if err := unix.Lstat(path, &ust); err != nil {
		t.Fatal(err)
	}
	if ks, ku := KeyOfStat(&sst), KeyOfUnix(&ust); ks != k || ku != k {
		t.Fatalf("keys differ:\nFileKeyOf  %+v\nKeyOfStat  %+v\nKeyOfUnix  %+v", k, ks, ku)
	}
	if k.Size != 3 || k.Nlink != 1 || k.Ino == 0 || k.Mode&unix.S_IFMT != unix.S_IFREG ||
		k.MtimeSec != uint64(fi.ModTime().Unix()) || k.MtimeNsec != uint64(fi.ModTime().Nanosecond()) || k.CtimeSec == 0 {
		t.Fatalf("key %+v of %s", k, path)
	}
}
