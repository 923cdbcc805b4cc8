package discover

import (
	"encoding/binary"
	"io/fs"
	"syscall"

	"golang.org/x/sys/unix"

	"pisess/writers/durable"
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
	st, ok := durable.StatOf(fi)
	if !ok {
		return FileKey{}, false
	}
	return keyOf(st), true
}

// KeyOfStat returns the key of a syscall stat buffer (syscall.Lstat).
func KeyOfStat(st *syscall.Stat_t) FileKey { return keyOf(durable.StatOfSys(st)) }

// KeyOfUnix returns the key of an x/sys/unix stat buffer (unix.Fstatat).
func KeyOfUnix(st *unix.Stat_t) FileKey { return keyOf(durable.StatOfUnix(st)) }

// keyOf returns the key of a file's status, the same on every system.
func keyOf(st durable.FileStat) FileKey {
	return FileKey{Dev: st.Dev, Ino: st.Ino, Mode: uint64(st.Mode), Nlink: st.Nlink,
		UID: uint64(st.UID), GID: uint64(st.GID), Size: uint64(st.Size),
		MtimeSec: uint64(st.Mtime.Sec), MtimeNsec: uint64(st.Mtime.Nsec),
		CtimeSec: uint64(st.Ctime.Sec), CtimeNsec: uint64(st.Ctime.Nsec)}
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
