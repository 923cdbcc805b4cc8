package durable

import "syscall"

// StatOfSys returns the status in a syscall stat buffer (Linux's: st_mtim, st_ctim).
func StatOfSys(st *syscall.Stat_t) FileStat {
	return FileStat{Dev: uint64(st.Dev), Ino: uint64(st.Ino), Mode: uint32(st.Mode), Nlink: uint64(st.Nlink),
		UID: st.Uid, GID: st.Gid, Size: st.Size,
		Mtime: Timespec{int64(st.Mtim.Sec), int64(st.Mtim.Nsec)},
		Ctime: Timespec{int64(st.Ctim.Sec), int64(st.Ctim.Nsec)}}
}
