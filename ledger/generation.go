package ledger

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Generation identifies what pisess runs have written in a tree's
// .pisess/: the metadata (device, inode, size, modification and change
// times) of the journal and of each state file. Every run that changes a
// tree appends to its journal (prune rewrites it) or saves a state file,
// and either moves this; a run taken before the tree lock and compared
// after tells whether another run worked on the tree meanwhile (issue 34
// §1: a run that waited for the lock planned from what it had seen
// before, and redid the first run's work).
func Generation(tree string) string {
	h := sha256.New()
	var b [8]byte
	for _, name := range []string{JournalName, FreshCacheName, RefusalCacheName, RefreshRecordName} {
		h.Write([]byte(name))
		var st unix.Stat_t
		if err := unix.Lstat(filepath.Join(tree, PisessDir, name), &st); err != nil {
			h.Write([]byte(err.Error())) // missing (or unreadable), and how
			h.Write([]byte{0})
			continue
		}
		for _, v := range []uint64{uint64(st.Dev), st.Ino, uint64(st.Size), uint64(st.Mtim.Sec), uint64(st.Mtim.Nsec),
			uint64(st.Ctim.Sec), uint64(st.Ctim.Nsec)} {
			binary.LittleEndian.PutUint64(b[:], v)
			h.Write(b[:])
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}
