//go:build darwin || freebsd || (linux && portable)

package sqlitev1

import "golang.org/x/sys/unix"

// lockCmd takes SQLite's locks as POSIX locks, as SQLite itself does on
// macOS and FreeBSD, which have no open file description locks; a Linux
// build with -tags portable does too, to test that path (see sharedLock).
const lockCmd = unix.F_SETLK
