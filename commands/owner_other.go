//go:build !linux

package commands

import (
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// dirOpenFlags open a directory of a walk (no O_PATH here: root can read
// every directory, and the owner its own tree).
const dirOpenFlags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_CLOEXEC

// selfExe is the binary a child runs as a tree's owner: the path this
// process was started from, resolved before the switch. Unlike Linux's
// /proc/self/exe, whoever may write its directory could replace it
// meanwhile: install pisess where only root can write.
func selfExe() (string, error) { return os.Executable() }

// ownerAttr runs the child with cred (nil: as root). There is no parent
// death signal: a parent interrupted by a signal forwards SIGTERM itself.
func ownerAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: cred}
}

// nameProcess: the child is exec'd by its own name here already.
func nameProcess(string) {}

// dieOfSignal: Exit falls back to 128+signal, the status a shell shows.
func dieOfSignal(syscall.Signal) {}
