package durable

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestLockFileTimeoutAcrossProcesses(t *testing.T) {
	withUmask(t, 0)
	path := filepath.Join(t.TempDir(), "session.jsonl.lock")
	h := startHolder(t, "hold-lock", path)
	if got := mode(t, path); got != 0o600 {
		t.Fatalf("lock file mode %v", got)
	}
	start := time.Now()
	_, err := OS.LockFile(context.Background(), path, 150*time.Millisecond)
	if !errors.Is(err, ErrLockTimeout) {
		t.Fatalf("err = %v, want ErrLockTimeout", err)
	}
	if waited := time.Since(start); waited < 150*time.Millisecond {
		t.Fatalf("gave up after %v", waited)
	}
	// Released while we wait: the lock is taken within the timeout.
	go func() {
		time.Sleep(50 * time.Millisecond)
		h.stdin.Close()
	}()
	l, err := OS.LockFile(context.Background(), path, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(); err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(); err != nil {
		t.Fatalf("second unlock: %v", err)
	}
	h.release(t)
	if !exists(t, path) {
		t.Fatal("lock file deleted")
	}
}

func TestLockFileSameProcessAndContext(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store.mutation.lock")
	l, err := OS.LockFile(context.Background(), path, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock()
	// flock belongs to the open file: a second open conflicts even here.
	if _, err := OS.LockFile(context.Background(), path, 0); !errors.Is(err, ErrLockTimeout) {
		t.Fatalf("err = %v, want ErrLockTimeout", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := OS.LockFile(ctx, path, time.Minute); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want the context's", err)
	}
	if time.Since(start) > 5*time.Second {
		t.Fatal("context not honoured")
	}
}

func TestLockFileRefusesSymlink(t *testing.T) {
	base := t.TempDir()
	target := filepath.Join(base, "target")
	writeFile(t, target, "")
	link := filepath.Join(base, "session.jsonl.lock")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if _, err := OS.LockFile(context.Background(), link, 0); err == nil {
		t.Fatal("locked through a symlink")
	}
}

func TestTreeLock(t *testing.T) {
	dir := filepath.Join(t.TempDir(), ".pisess")
	if err := OS.MkdirPrivate(dir); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "lock")

	h := startHolder(t, "hold-tree-lock", path, "unlock")
	pid := fmt.Sprintf("pid=%d ", h.cmd.Process.Pid)
	_, holder, err := OS.TryLockTree(path)
	var locked *TreeLockedError
	if !errors.As(err, &locked) || !strings.HasPrefix(holder, pid) || locked.Holder != holder || locked.Path != path {
		t.Fatalf("TryLockTree = %q, %v; want TreeLockedError naming %q", holder, err, pid)
	}
	if !strings.Contains(err.Error(), pid) {
		t.Fatalf("message does not name the holder: %v", err)
	}
	if got, stale, err := OS.StaleTreeLock(path); err != nil || stale || got != holder {
		t.Fatalf("StaleTreeLock of a held lock = %q, %v, %v", got, stale, err)
	}
	h.release(t)
	// An orderly unlock leaves nothing stale behind.
	if got, stale, err := OS.StaleTreeLock(path); err != nil || stale || got != "" {
		t.Fatalf("after unlock: %q, %v, %v", got, stale, err)
	}

	h = startHolder(t, "hold-tree-lock", path, "die")
	pid = fmt.Sprintf("pid=%d ", h.cmd.Process.Pid)
	h.release(t)
	got, stale, err := OS.StaleTreeLock(path)
	if err != nil || !stale || !strings.HasPrefix(got, pid) {
		t.Fatalf("after the holder died: %q, %v, %v; want stale naming %q", got, stale, err, pid)
	}
	l, previous, err := OS.TryLockTree(path)
	if err != nil || previous != got {
		t.Fatalf("TryLockTree over a stale lock = %q, %v; want the dead holder %q", previous, err, got)
	}
	mine := readFile(t, path)
	if !strings.HasPrefix(mine, fmt.Sprintf("pid=%d host=", os.Getpid())) || !strings.Contains(mine, " started=") {
		t.Fatalf("holder text %q", mine)
	}
	if err := l.Unlock(); err != nil {
		t.Fatal(err)
	}
	if readFile(t, path) != "" {
		t.Fatal("holder text left after unlock")
	}
}

// TestTreeLockWritesOnlyWhenTheRunChangesTheTree: a run that takes the tree
// lock and records no holder (it changed nothing) leaves the file exactly
// as it found it; one that records itself names its run, and its unlock
// clears the text; the takeover of a dead run's lock replaces the dead
// holder at once (issue 34 §3: every run rewrote the file).
func TestTreeLockWritesOnlyWhenTheRunChangesTheTree(t *testing.T) {
	dir := filepath.Join(t.TempDir(), ".pisess")
	if err := OS.MkdirPrivate(dir); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "lock")
	l, _, err := OS.TryLockTree(path)
	if err != nil {
		t.Fatal(err)
	}
	l.Unlock()
	var before unix.Stat_t
	if err := unix.Lstat(path, &before); err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Millisecond)
	l, previous, err := OS.TryLockTree(path)
	if err != nil || previous != "" {
		t.Fatalf("TryLockTree = %q, %v", previous, err)
	}
	if err := l.Unlock(); err != nil {
		t.Fatal(err)
	}
	var after unix.Stat_t
	if err := unix.Lstat(path, &after); err != nil {
		t.Fatal(err)
	}
	if after.Size != 0 || after.Mtim != before.Mtim || after.Ctim != before.Ctim || after.Ino != before.Ino {
		t.Fatalf("a run that recorded no holder changed the lock file: %+v → %+v", before, after)
	}

	l, _, err = OS.TryLockTree(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.RecordHolder("run-0001-holder"); err != nil {
		t.Fatal(err)
	}
	if err := l.RecordHolder("run-0001-again"); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, path); !strings.HasPrefix(got, fmt.Sprintf("pid=%d ", os.Getpid())) || !strings.HasSuffix(got, " run=run-0001-holder\n") {
		t.Fatalf("holder text %q", got)
	}
	l.Unlock()
	if readFile(t, path) != "" {
		t.Fatal("holder text left after unlock")
	}

	// A holder that has not recorded itself yet is named all the same,
	// where the system says who holds the flock (Linux: /proc/locks).
	h := startHolder(t, "hold-tree-lock", path, "unlock", "unrecorded")
	_, holder, err := OS.TryLockTree(path)
	if want := fmt.Sprintf("pid=%d (holder not yet recorded)", h.cmd.Process.Pid); runtime.GOOS == "linux" && holder != want {
		t.Errorf("TryLockTree of an unrecorded holder's lock = %q, %v; want %q", holder, err, want)
	}
	if got, stale, _ := OS.StaleTreeLock(path); stale || got != holder {
		t.Errorf("StaleTreeLock of an unrecorded holder's lock = %q %v, want %q", got, stale, holder)
	}
	h.release(t)

	dead := "pid=2147483000 host=gone started=2026-01-01T00:00:00Z run=dead-run-0001\n"
	if err := os.WriteFile(path, []byte(dead), 0o600); err != nil {
		t.Fatal(err)
	}
	l, previous, err = OS.TryLockTree(path)
	if err != nil || previous != strings.TrimSpace(dead) {
		t.Fatalf("TryLockTree over a dead run's lock = %q, %v", previous, err)
	}
	if got := readFile(t, path); !strings.HasPrefix(got, fmt.Sprintf("pid=%d ", os.Getpid())) {
		t.Fatalf("the dead holder was not replaced at the takeover: %q", got)
	}
	l.Unlock()
}

func TestStaleTreeLockMissing(t *testing.T) {
	if h, stale, err := OS.StaleTreeLock(filepath.Join(t.TempDir(), "lock")); h != "" || stale || err != nil {
		t.Fatalf("missing lock: %q, %v, %v", h, stale, err)
	}
}
