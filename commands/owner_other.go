//go:build !linux

package commands

import (
	"os"
	"syscall"
)

// selfExe is this binary, for the tree owner's child to run: the path it
// was started from (macOS and FreeBSD have no /proc/self/exe), which the
// owner must be allowed to reach: install pisess where every user can run
// it (/usr/local/bin) to run it as root over other users' trees.
func selfExe() (string, error) { return os.Executable() }

// ownerProcAttr runs the child with cred. No signal reaches it when pisess
// dies (Linux's Pdeathsig has no equivalent here): it finishes its command
// alone, under its own locks.
func ownerProcAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: cred}
}
