package durable

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// ErrLockTimeout is returned (wrapped, with the path) when a lock stays
// held by someone else for the whole timeout given to [Ops.LockFile].
var ErrLockTimeout = errors.New("lock wait timed out")

// Lock is a held flock. Release it with [Lock.Unlock]; a process that dies
// releases it too (the kernel drops flocks with the last descriptor). Lock
// files are never deleted: removing one while another process waits on the
// old inode would let two holders in at once.
type Lock struct {
	f    *os.File
	o    Ops
	tree bool
	// holder: a tree lock's holder text was written (RecordHolder, or the
	// takeover of a dead run's lock), so Unlock clears it.
	holder bool
}

// LockFile takes an exclusive flock on path the way pi takes its session
// lock (<session>.lock) and the store's store.mutation.lock: path is opened
// O_RDWR|O_CREAT|O_NOFOLLOW|O_CLOEXEC, mode 0600 when created, and must be a
// regular file. Holding it keeps pi from appending to, rewriting or
// repairing the same session while pisess works on it.
//
// It polls with LOCK_NB (so that ctx and timeout are honoured; a blocking
// flock cannot be interrupted) and returns an error matching
// [ErrLockTimeout] when the lock is still held after timeout, or ctx's
// error. timeout <= 0 tries once. flock locks belong to an open file, so a
// second LockFile of the same path in the same process waits like any
// other process would.
func (o Ops) LockFile(ctx context.Context, path string, timeout time.Duration) (*Lock, error) {
	f, _, err := o.openCreate(path, unix.O_RDWR)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	deadline := time.Now().Add(timeout)
	delay := 5 * time.Millisecond
	for {
		if err := ctx.Err(); err != nil {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		err := flock(f, unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return &Lock{f: f, o: o}, nil
		}
		if err != unix.EWOULDBLOCK {
			f.Close()
			return nil, &os.PathError{Op: "flock", Path: path, Err: err}
		}
		remaining := time.Until(deadline)
		if remaining <= 0 {
			f.Close()
			return nil, fmt.Errorf("lock %s: held by another process after %v: %w", path, timeout, ErrLockTimeout)
		}
		t := time.NewTimer(min(delay, remaining))
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C:
		}
		delay = min(2*delay, 100*time.Millisecond)
	}
}

func flock(f *os.File, how int) error {
	for {
		err := unix.Flock(int(f.Fd()), how)
		if err != unix.EINTR {
			return err
		}
	}
}

// Unlock releases the lock. A tree lock's holder text, when one was
// written, is cleared first, so that only a run that died holding it
// leaves a holder behind for [Ops.StaleTreeLock] to report (a run that
// wrote none leaves the file as it found it). Unlock of a released lock
// does nothing.
func (l *Lock) Unlock() error {
	if l == nil || l.f == nil {
		return nil
	}
	f := l.f
	l.f = nil
	var errs []error
	if l.tree && l.holder {
		if err := unix.Ftruncate(int(f.Fd()), 0); err != nil {
			errs = append(errs, &os.PathError{Op: "truncate", Path: f.Name(), Err: err})
		} else if err := l.o.sync(f); err != nil {
			errs = append(errs, err)
		}
	}
	if err := flock(f, unix.LOCK_UN); err != nil {
		errs = append(errs, &os.PathError{Op: "flock", Path: f.Name(), Err: err})
	}
	if err := f.Close(); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("unlock: %w", err)
	}
	return nil
}

// TreeLockedError reports that another pisess run holds the tree lock.
// Holder is the text that run wrote into the lock file ("pid=… host=…
// started=…"), empty when it has not written it yet.
type TreeLockedError struct {
	Path   string
	Holder string
}

func (e *TreeLockedError) Error() string {
	h := e.Holder
	if h == "" {
		h = "holder not yet recorded"
	}
	return fmt.Sprintf("tree locked by another pisess run (%s): %s", h, e.Path)
}

// TryLockTree takes the tree lock <tree>/.pisess/lock without waiting: two
// pisess runs (cron and a person, say) must not work on one tree at once,
// and the second should say who is in the way rather than queue behind
// it. It returns the holder text it found in the file: non-empty only when
// an earlier run died holding the lock, whose text it then replaces with
// its own at once (the takeover is a change). Otherwise it writes nothing:
// the run records itself as the holder ([Lock.RecordHolder]) before it
// first changes the tree, so that a run with nothing to do leaves the file
// as it was (issue 34 §3: backup tools saw it change every 15 minutes).
// When another run holds it, it returns that run's holder text and a
// *[TreeLockedError].
func (o Ops) TryLockTree(path string) (*Lock, string, error) {
	f, created, err := o.openCreate(path, unix.O_RDWR)
	if err != nil {
		return nil, "", fmt.Errorf("tree lock %s: %w", path, err)
	}
	err = flock(f, unix.LOCK_EX|unix.LOCK_NB)
	if err == unix.EWOULDBLOCK {
		holder := heldBy(f)
		f.Close()
		return nil, holder, &TreeLockedError{Path: path, Holder: holder}
	}
	if err != nil {
		f.Close()
		return nil, "", &os.PathError{Op: "flock", Path: path, Err: err}
	}
	l := &Lock{f: f, o: o, tree: true}
	previous := readHolder(f)
	if previous != "" {
		if err := l.RecordHolder(""); err != nil {
			l.Unlock()
			return nil, "", fmt.Errorf("tree lock %s: %w", path, err)
		}
	}
	if created {
		dir, _, _ := splitPath(path)
		if err := o.SyncDir(dir); err != nil {
			l.Unlock()
			return nil, "", fmt.Errorf("tree lock %s: %w", path, err)
		}
	}
	return l, previous, nil
}

// RecordHolder writes "pid=<pid> host=<host> started=<RFC 3339>" and, when
// run is not "", " run=<run>" (its correlation id) into a tree lock's file,
// once: later calls do nothing. A run calls it before its first change to
// the tree, so that a run that dies after it leaves a stale holder naming
// it. Not a tree lock: nothing.
func (l *Lock) RecordHolder(run string) error {
	if l == nil || l.f == nil || !l.tree || l.holder {
		return nil
	}
	l.holder = true // whatever a failed write left, Unlock clears
	if err := l.o.writeHolder(l.f, run); err != nil {
		return fmt.Errorf("tree lock %s: %w", l.f.Name(), err)
	}
	return nil
}

func (o Ops) writeHolder(f *os.File, run string) error {
	host, _ := os.Hostname()
	text := fmt.Sprintf("pid=%d host=%s started=%s", os.Getpid(), host, time.Now().UTC().Format(time.RFC3339))
	if run != "" {
		text += " run=" + run
	}
	text += "\n"
	if err := unix.Ftruncate(int(f.Fd()), 0); err != nil {
		return &os.PathError{Op: "truncate", Path: f.Name(), Err: err}
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	if _, err := o.writeAll(f, []byte(text)); err != nil {
		return err
	}
	return o.sync(f)
}

// heldBy is the holder text of a held tree lock: the one it recorded, else
// the pid of the process holding its flock when the system tells
// (flockOwner).
func heldBy(f *os.File) string {
	if h := readHolder(f); h != "" {
		return h
	}
	if pid := flockOwner(f); pid > 0 {
		return fmt.Sprintf("pid=%d (holder not yet recorded)", pid)
	}
	return ""
}

// readHolder returns the trimmed holder text of a tree lock file (at most
// 4 KiB are read: the file is ours and short, but it sits in a user's tree).
func readHolder(f *os.File) string {
	buf := make([]byte, 4096)
	n, _ := f.ReadAt(buf, 0)
	return string(bytes.TrimSpace(buf[:n]))
}

// StaleTreeLock tells whether the tree lock at path is stale: nobody holds
// its flock, yet it names a pid, which only a run that died while holding
// it leaves behind (an orderly [Lock.Unlock] clears it). It returns the
// holder text either way, so fsck can say who is running or who died. It
// only reads: a missing file is neither held nor stale. The check takes a
// shared flock for an instant, during which a starting run's
// [Ops.TryLockTree] would see the tree as locked.
func (o Ops) StaleTreeLock(path string) (holder string, stale bool, err error) {
	f, err := o.openFile(path, unix.O_RDONLY|unix.O_NONBLOCK, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("tree lock %s: %w", path, err)
	}
	defer f.Close()
	if err := requireRegular(f); err != nil {
		return "", false, fmt.Errorf("tree lock %s: %w", path, err)
	}
	holder = readHolder(f)
	err = flock(f, unix.LOCK_SH|unix.LOCK_NB)
	if err == unix.EWOULDBLOCK {
		return heldBy(f), false, nil
	}
	if err != nil {
		return "", false, &os.PathError{Op: "flock", Path: path, Err: err}
	}
	_ = flock(f, unix.LOCK_UN)
	return holder, holderPID(holder) > 0, nil
}

// LockHeld reports whether another open file holds the flock of path (pi's
// session lock, say) at this instant, without creating the file or
// waiting: a missing file is not held. Like StaleTreeLock it takes a
// shared flock for an instant, during which a taker of the lock waits.
func (o Ops) LockHeld(path string) (bool, error) {
	f, err := o.openFile(path, unix.O_RDONLY|unix.O_NONBLOCK, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("lock %s: %w", path, err)
	}
	defer f.Close()
	if err := requireRegular(f); err != nil {
		return false, fmt.Errorf("lock %s: %w", path, err)
	}
	switch err := flock(f, unix.LOCK_SH|unix.LOCK_NB); {
	case err == unix.EWOULDBLOCK:
		return true, nil
	case err != nil:
		return false, &os.PathError{Op: "flock", Path: path, Err: err}
	}
	_ = flock(f, unix.LOCK_UN)
	return false, nil
}

// holderPID returns the pid named by a tree lock's holder text, or 0.
func holderPID(holder string) int {
	for _, field := range strings.Fields(holder) {
		if v, ok := strings.CutPrefix(field, "pid="); ok {
			if pid, err := strconv.Atoi(v); err == nil && pid > 0 {
				return pid
			}
		}
	}
	return 0
}
