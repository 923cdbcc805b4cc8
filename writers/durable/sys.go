package durable

import "os"

// platform is everything in this package that differs between the
// operating systems pisess runs on: five calls, each the one means a system
// gives to keep a promise of the package. The rest of the package is
// POSIX (openat, fstatat, linkat, flock, fchown) and the same everywhere.
//
// Each system's file defines its type: linuxSys (sys_linux.go: openat2,
// renameat2, syncfs, posix_fadvise), darwinSys (sys_darwin.go:
// F_FULLFSYNC, renameatx_np) and posixSys (sys_unix.go: the portable
// fallbacks, which darwinSys builds on and FreeBSD uses as they are). native, set at build
// time in native_*.go, is the one this binary uses: a Linux binary built
// with -tags portable uses posixSys, so that the whole test suite, crash
// harness included, runs on Linux the code macOS and FreeBSD run.
type platform interface {
	// fsync makes f's data and metadata durable: fsync(2) where it
	// reaches the disk (Ops.Sync).
	fsync(f *os.File) error
	// open opens path with no symlink followed in any component, final
	// one included, close-on-exec (Ops.OpenNoFollow).
	open(path string, flag int, perm os.FileMode) (*os.File, error)
	// rename renames oldName in the directory ofd to newName in the
	// directory nfd, with no fsync; with noReplace it fails with EEXIST
	// rather than replace anything at newName.
	rename(ofd int, oldName string, nfd int, newName string, noReplace bool) error
	// syncFS writes back every dirty file of the filesystem that holds f
	// and waits for it; ENOSYS where the system has no such call (the
	// seal then fsyncs the tree file by file: Ops.SealFilesystem).
	syncFS(f *os.File) error
	// dropCache asks the kernel to drop the cached pages of the regular
	// file name in the directory dfd: advice, nil where there is none.
	dropCache(dfd int, name string) error
}

// Every system's platform is complete.
var _ platform = native{}
