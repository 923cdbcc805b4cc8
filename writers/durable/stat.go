package durable

import (
	"io/fs"
	"syscall"

	"golang.org/x/sys/unix"
)

// Timespec is a time from a file's status: seconds and nanoseconds since
// the epoch, as the system keeps it (comparable with ==).
type Timespec struct{ Sec, Nsec int64 }

// FileStat is a file's status in the one form pisess compares and records
// on every platform: identity (device, inode), type and permission bits,
// links, owner, size, modification and change times. The systems' stat
// structures differ in field names and widths (macOS: a 32-bit device,
// 16-bit link count and mode, st_ctimespec); these are the values widened
// as the reference widens them (Rust's MetadataExt: dev() is st_dev as
// u64, so a negative 32-bit device sign-extends, here too), so that a
// fileIdentity pisess records equals the one the reference computes.
type FileStat struct {
	Dev, Ino     uint64
	Mode         uint32 // st_mode: S_IFMT type and permission bits
	Nlink        uint64
	UID, GID     uint32
	Size         int64
	Mtime, Ctime Timespec
}

// StatOf returns the status carried by fi (os.Stat, os.Lstat, File.Stat,
// DirEntry.Info); ok is false when fi carries none (a test's fake).
func StatOf(fi fs.FileInfo) (FileStat, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return FileStat{}, false
	}
	return StatOfSys(st), true
}

// StatOfUnix returns the status of an x/sys/unix stat buffer (Fstat,
// Fstatat), whose field names are the same on every system.
func StatOfUnix(st *unix.Stat_t) FileStat {
	return FileStat{Dev: uint64(st.Dev), Ino: uint64(st.Ino), Mode: uint32(st.Mode), Nlink: uint64(st.Nlink),
		UID: st.Uid, GID: st.Gid, Size: st.Size,
		Mtime: Timespec{int64(st.Mtim.Sec), int64(st.Mtim.Nsec)},
		Ctime: Timespec{int64(st.Ctim.Sec), int64(st.Ctim.Nsec)}}
}
