package discover

import (
	"encoding/binary"
	"io/fs"
	"syscall"
)

// FileKey is what an lstat says of a file that every change to it moves:
// identity, type and mode, links, owner, size and both times. Change times
// cannot be set back, so an equal key (read no sooner than a moment after
// the file last changed) means unchanged content (git's stat cache, with
// its racily-clean rule left to the caller).
type FileKey struct {
	Dev, Ino, Mode, Nlink, UID, GID, Size    uint64
	MtimeSec, MtimeNsec, CtimeSec, CtimeNsec uint64
}

// FileKeyOf returns the key of an lstat result; ok is false when fi does
// not carry the system's stat (a test's fake).
func FileKeyOf(fi fs.FileInfo) (FileKey, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return FileKey{}, false
	}
	return KeyOfStat(st), true
}

// KeyOfStat returns the key of a stat buffer.
func KeyOfStat(st *syscall.Stat_t) FileKey {
	return FileKey{Dev: uint64(st.Dev), Ino: uint64(st.Ino), Mode: uint64(st.Mode), Nlink: uint64(st.Nlink),
		UID: uint64(st.Uid), GID: uint64(st.Gid), Size: uint64(st.Size),
		MtimeSec: uint64(st.Mtim.Sec), MtimeNsec: uint64(st.Mtim.Nsec),
		CtimeSec: uint64(st.Ctim.Sec), CtimeNsec: uint64(st.Ctim.Nsec)}
}

// AppendBinary appends the key's eleven fields, little-endian, in the
// order they are declared.
func (k FileKey) AppendBinary(b []byte) []byte {
	for _, v := range [...]uint64{k.Dev, k.Ino, k.Mode, k.Nlink, k.UID, k.GID, k.Size,
		k.MtimeSec, k.MtimeNsec, k.CtimeSec, k.CtimeNsec} {
		b = binary.LittleEndian.AppendUint64(b, v)
	}
	return b
}

// Headers answers for the header of a session file an earlier run read,
// as long as the file is unchanged since (its key equal): the walk then
// does not open it. Version is the header's version.
type Headers interface {
	Header(rel string, key FileKey) (version int, ok bool)
}

// Options tune a walk.
type Options struct {
	// Headers returns the header cache of a tree (by its root), or nil.
	// Called once per tree.
	Headers func(root string) Headers
}
