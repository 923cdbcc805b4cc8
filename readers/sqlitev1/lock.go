package sqlitev1

import (
	"errors"
	"os"
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
type sharedLock struct {
	f   *os.File
	cmd int // F_OFD_SETLK, or F_SETLK where OFD locks are refused
}

// errBusy says another process holds a lock that excludes readers.
var errBusy = errors.New("database is locked by another process")

// lockShared takes the SHARED lock on f, waiting up to timeout while a
// writer holds PENDING or EXCLUSIVE.
func lockShared(f *os.File, timeout time.Duration) (*sharedLock, error) {
	l := &sharedLock{f: f, cmd: unix.F_OFD_SETLK}
	deadline := time.Now().Add(timeout)
	for delay := time.Millisecond; ; delay = min(2*delay, 50*time.Millisecond) {
		err := l.try()
		if err == nil {
			return l, nil
		}
		if !errors.Is(err, errBusy) {
			return nil, err
		}
		if time.Now().After(deadline) {
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
		case errors.Is(err, unix.EINVAL) && l.cmd == unix.F_OFD_SETLK:
			// No OFD locks on this kernel or filesystem: POSIX locks
			// conflict with SQLite's the same way.
			l.cmd = unix.F_SETLK
			continue
		default:
			return err
		}
	}
}

// unlock releases the lock.
func (l *sharedLock) unlock() error {
	return l.set(unix.F_UNLCK, sharedFirst, sharedSize)
}
