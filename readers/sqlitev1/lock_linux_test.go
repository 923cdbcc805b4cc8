package sqlitev1

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// lockProbe opens path for the length of the test, to ask the kernel
// whether a writer could lock SQLite's SHARED range for its commit. It
// asks with an open file description lock, which conflicts with this
// process's POSIX locks too; and it is not closed before the test ends,
// because a close(2) would drop this process's POSIX locks on the file.
func lockProbe(t *testing.T, path string) func() bool {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return func() bool {
		lk := unix.Flock_t{Type: unix.F_WRLCK, Start: sharedFirst, Len: sharedSize}
		if err := unix.FcntlFlock(f.Fd(), unix.F_OFD_GETLK, &lk); err != nil {
			t.Fatal(err)
		}
		return lk.Type != unix.F_UNLCK
	}
}

// openDB makes path a file and opens it for a lock, kept open until the
// test ends (see lockProbe).
func openDB(t *testing.T, path string) *os.File {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// TestSharedLockKinds: both kinds of lock, the open file description lock
// Linux takes and the POSIX lock macOS and FreeBSD take, hold SQLite's
// SHARED range against a writer until unlocked.
func TestSharedLockKinds(t *testing.T) {
	for name, cmd := range map[string]int{"ofd": unix.F_OFD_SETLK, "posix": unix.F_SETLK} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "s.sqlite")
			f := openDB(t, path)
			locked := lockProbe(t, path)
			l, err := lockSharedBy(f, time.Second, cmd)
			if err != nil {
				t.Fatal(err)
			}
			if !locked() {
				t.Fatal("a writer could commit under the shared lock")
			}
			if err := l.unlock(); err != nil {
				t.Fatal(err)
			}
			if locked() {
				t.Fatal("still locked after unlock")
			}
		})
	}
}

// TestPosixLockGate: POSIX locks belong to the process, so a second lock
// of the file in this process would merge with the first and the first
// unlock would release both. The second waits at the file's gate for the
// first to be released, and then holds the range itself.
func TestPosixLockGate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.sqlite")
	first, second := openDB(t, path), openDB(t, path)
	locked := lockProbe(t, path)
	a, err := lockSharedBy(first, time.Second, unix.F_SETLK)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *sharedLock, 1)
	go func() {
		b, err := lockSharedBy(second, time.Second, unix.F_SETLK)
		if err != nil {
			t.Error(err)
		}
		got <- b
	}()
	select {
	case <-got:
		t.Fatal("a second POSIX lock of the file was taken while the first was held")
	case <-time.After(200 * time.Millisecond):
	}
	if err := a.unlock(); err != nil {
		t.Fatal(err)
	}
	b := <-got
	if b == nil {
		t.FailNow()
	}
	if !locked() {
		t.Fatal("the second holder's lock was released by the first's unlock")
	}
	if err := b.unlock(); err != nil {
		t.Fatal(err)
	}
	if locked() {
		t.Fatal("still locked after both unlocked")
	}
	posixGates.Lock()
	defer posixGates.Unlock()
	if len(posixGates.gates) != 0 {
		t.Fatalf("%d gates kept after every lock was released", len(posixGates.gates))
	}
}
