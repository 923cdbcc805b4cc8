//go:build !portable

package sqlitev1

import "golang.org/x/sys/unix"

// lockCmd takes SQLite's locks as open file description locks, which no
// close(2) elsewhere in the process can drop (see sharedLock).
const lockCmd = unix.F_OFD_SETLK
