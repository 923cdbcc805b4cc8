package sqlitev1

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// SQLite's lock bytes in the database file (os.h): a reader takes a read
// lock on PENDING_BYTE, then on the SHARED range, then lets PENDING go; a
// writer holds a write lock on the SHARED range while it is EXCLUSIVE.
const (
	pendingByte = 0x40000000
	sharedFirst = pendingByte + 2
	sharedSize  = 510
)

// sharedLock holds SQLite's SHARED lock on a database file.
//
// Two kinds of fcntl lock can take it, and SQLite's writers, which take
// POSIX locks, conflict with either. An open file description (OFD) lock,
// Linux's (lockCmd in lock_linux.go), belongs to the descriptor. A POSIX
// lock (F_SETLK: macOS and FreeBSD, whose SQLite uses it too, and Linux
// where OFD locks are refused) belongs to the process and the file: a
// second lock of the same file by this process merges with the first, one
// unlock releases both, and a close(2) of any descriptor of the file drops
// them all. So a POSIX lock is taken only inside the file's gate
// (posixGates), which lets one lock of a file in this process at a time,
// and the database file is opened once for the whole copy (takeSnapshot):
// nothing of pisess closes another descriptor of it meanwhile. Should
// anything still drop the lock, a writer's commit during the copy moves
// the file's status or its WAL header, and the copy is taken again.
type sharedLock struct {
	f    *os.File
	cmd  int       // lockCmd, or F_SETLK where OFD locks are refused
	gate *fileGate // held while cmd is F_SETLK
}

// errBusy says another process holds a lock that excludes readers.
var errBusy = errors.New("database is locked by another process")

// lockShared takes the SHARED lock on f, waiting up to timeout while a
// writer holds PENDING or EXCLUSIVE.
func lockShared(f *os.File, timeout time.Duration) (*sharedLock, error) {
	return lockSharedBy(f, timeout, lockCmd)
}

// lockSharedBy is lockShared with the fcntl command to try first (tests
// take both kinds).
func lockSharedBy(f *os.File, timeout time.Duration, cmd int) (*sharedLock, error) {
	l := &sharedLock{f: f, cmd: cmd}
	if cmd == unix.F_SETLK {
		if err := l.enterGate(); err != nil {
			return nil, err
		}
	}
	deadline := time.Now().Add(timeout)
	for delay := time.Millisecond; ; delay = min(2*delay, 50*time.Millisecond) {
		err := l.try()
		if err == nil {
			return l, nil
		}
		if !errors.Is(err, errBusy) || time.Now().After(deadline) {
			l.leaveGate()
			return nil, err
		}
		time.Sleep(delay)
	}
}

func (l *sharedLock) try() error {
	if err := l.set(unix.F_RDLCK, pendingByte, 1); err != nil {
		return err
	}
	err := l.set(unix.F_RDLCK, sharedFirst, sharedSize)
	if uerr := l.set(unix.F_UNLCK, pendingByte, 1); err == nil {
		err = uerr
	}
	return err
}

func (l *sharedLock) set(typ int16, start, length int64) error {
	lk := unix.Flock_t{Type: typ, Whence: 0, Start: start, Len: length}
	for {
		err := unix.FcntlFlock(l.f.Fd(), l.cmd, &lk)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.EAGAIN), errors.Is(err, unix.EACCES):
			return errBusy
		case errors.Is(err, unix.EINVAL) && l.cmd != unix.F_SETLK:
			// No OFD locks on this kernel or filesystem (nothing is held
			// yet: this is the first call): POSIX locks conflict with
			// SQLite's the same way, taken inside the file's gate.
			l.cmd = unix.F_SETLK
			if err := l.enterGate(); err != nil {
				return err
			}
			continue
		default:
			return err
		}
	}
}

// unlock releases the lock.
func (l *sharedLock) unlock() error {
	err := l.set(unix.F_UNLCK, sharedFirst, sharedSize)
	l.leaveGate()
	return err
}

// fileID is a file's identity, the key of the kernel's POSIX locks.
type fileID struct{ dev, ino uint64 }

// fileGate lets one POSIX lock of a file in this process at a time.
type fileGate struct {
	mu    sync.Mutex
	id    fileID
	users int // holders and waiters, for posixGates to forget it
}

// posixGates holds a gate for each file this process is POSIX-locking:
// mutable package state, because the locks it serialises are the
// process's state too (SQLite keeps such a table, unixInodeInfo, for the
// same reason).
var posixGates = struct {
	sync.Mutex
	gates map[fileID]*fileGate
}{gates: map[fileID]*fileGate{}}

// enterGate waits for the gate of l's file.
func (l *sharedLock) enterGate() error {
	var st unix.Stat_t
	if err := unix.Fstat(int(l.f.Fd()), &st); err != nil {
		return fmt.Errorf("fstat %s: %w", l.f.Name(), err)
	}
	id := fileID{uint64(st.Dev), uint64(st.Ino)}
	posixGates.Lock()
	g := posixGates.gates[id]
	if g == nil {
		g = &fileGate{id: id}
		posixGates.gates[id] = g
	}
	g.users++
	posixGates.Unlock()
	g.mu.Lock()
	l.gate = g
	return nil
}

// leaveGate lets the next lock of l's file in, if l holds its gate.
func (l *sharedLock) leaveGate() {
	g := l.gate
	if g == nil {
		return
	}
	l.gate = nil
	g.mu.Unlock()
	posixGates.Lock()
	defer posixGates.Unlock()
	if g.users--; g.users == 0 {
		delete(posixGates.gates, g.id)
	}
}
