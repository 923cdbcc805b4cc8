package durable

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// StatOfSys returns the status in a syscall stat buffer (Linux's: st_mtim, st_ctim).
func StatOfSys(st *syscall.Stat_t) FileStat {
	return FileStat{Dev: uint64(st.Dev), Ino: uint64(st.Ino), Mode: uint32(st.Mode), Nlink: uint64(st.Nlink),
		UID: st.Uid, GID: st.Gid, Size: st.Size,
		Mtime: Timespec{int64(st.Mtim.Sec), int64(st.Mtim.Nsec)},
		Ctime: Timespec{int64(st.Ctim.Sec), int64(st.Ctim.Nsec)}}
}

// NameMax returns the longest name, in bytes, that the file system holding
// dir accepts in it (statfs's f_namelen), or 0 when it cannot tell.
func NameMax(dir string) int {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil || st.Namelen <= 0 {
		return 0
	}
	return int(st.Namelen)
}
