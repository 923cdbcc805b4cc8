package commands

import (
	"os"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// dirOpenFlags open a directory of a walk: O_PATH asks for no permission
// on it beyond search, which a tree's owner has on the way to the tree.
const dirOpenFlags = unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC

// selfExe is the binary a child runs as a tree's owner: this very
// process's, through /proc/self/exe, which the owner can neither swap
// (it names the file, not a path) nor be kept from (no directory on the
// way to where root keeps pisess is searched).
func selfExe() (string, error) { return "/proc/self/exe", nil }

// ownerAttr runs the child with cred (nil: as root) and has the kernel
// send it SIGTERM when the parent dies, so that no owner's run outlives
// the root run that started it.
func ownerAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGTERM}
}

// nameProcess gives the process the name ps and pgrep match (its comm):
// exec'd through /proc/self/exe, the child would be called "exe". A child
// the kernel made undumpable (the binary is not readable by the owner)
// cannot rename itself and keeps that name.
func nameProcess(name string) {
	_ = os.WriteFile("/proc/self/comm", []byte(name), 0)
}

// dieOfSignal ends the process by sig with the signal's default action,
// as the child it mirrors ended; the Go runtime ignores a SIGPIPE it did
// not cause itself, so the default action is restored directly.
func dieOfSignal(sig syscall.Signal) {
	// struct sigaction, all zero: SIG_DFL, no flags, an empty mask (32
	// bytes cover every architecture's layout; sigsetsize is 8).
	var act [4]uint64
	_, _, errno := unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(sig), uintptr(unsafe.Pointer(&act)), 0, 8, 0, 0)
	if errno != 0 {
		return
	}
	_ = unix.Tgkill(unix.Getpid(), unix.Gettid(), sig)
	time.Sleep(100 * time.Millisecond)
}
