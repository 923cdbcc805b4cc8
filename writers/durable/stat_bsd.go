//go:build darwin || freebsd

package durable

import "syscall"

// StatOfSys returns the status in a syscall stat buffer (the BSDs':
// st_mtimespec, st_ctimespec).
func StatOfSys(st *syscall.Stat_t) FileStat {
	return FileStat{Dev: uint64(st.Dev), Ino: uint64(st.Ino), Mode: uint32(st.Mode), Nlink: uint64(st.Nlink),
		UID: st.Uid, GID: st.Gid, Size: st.Size,
		Mtime: Timespec{int64(st.Mtimespec.Sec), int64(st.Mtimespec.Nsec)},
		Ctime: Timespec{int64(st.Ctimespec.Sec), int64(st.Ctimespec.Nsec)}}
}
