package commands

import "syscall"

// selfExe is this binary, for the tree owner's child to run:
// /proc/self/exe, not the binary's path: the owner may have no right to
// walk to where root keeps it, and it cannot be swapped meanwhile.
func selfExe() (string, error) { return "/proc/self/exe", nil }

// ownerProcAttr runs the child with cred, and ends it if pisess dies.
func ownerProcAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGTERM}
}
