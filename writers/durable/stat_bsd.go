//go:build darwin || freebsd

package durable

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// StatOfSys returns the status in a syscall stat buffer (the BSDs':
// st_mtimespec, st_ctimespec).
func StatOfSys(st *syscall.Stat_t) FileStat {
	return FileStat{Dev: uint64(st.Dev), Ino: uint64(st.Ino), Mode: uint32(st.Mode), Nlink: uint64(st.Nlink),
		UID: st.Uid, GID: st.Gid, Size: st.Size,
		Mtime: Timespec{int64(st.Mtimespec.Sec), int64(st.Mtimespec.Nsec)},
		Ctime: Timespec{int64(st.Ctimespec.Sec), int64(st.Ctimespec.Nsec)}}
}

// pcNameMax is _PC_NAME_MAX in <unistd.h>, 4 on macOS and FreeBSD alike;
// x/sys/unix does not name it.
const pcNameMax = 4

// NameMax returns the longest name, in bytes, that the file system holding
// dir accepts in it (pathconf(_PC_NAME_MAX): the BSDs' statfs does not say
// it), or 0 when it cannot tell.
func NameMax(dir string) int {
	n, err := unix.Pathconf(dir, pcNameMax)
	if err != nil || n <= 0 {
		return 0
	}
	return n
}
