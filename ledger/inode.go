package ledger

import (
	"fmt"
	"strings"

	"pisess/writers/durable"
)

// Inode is a file's device and inode: a rename keeps it, so it tells
// whether the file or directory at a path is the one that was renamed
// there. A journal note's detail names it ("dev=D ino=I") so that a
// rollback acts on that very file only.
type Inode struct{ Dev, Ino uint64 }

func (id Inode) String() string { return fmt.Sprintf("dev=%d ino=%d", id.Dev, id.Ino) }

// InodeOf lstats path, never following a final symlink.
func InodeOf(path string) (Inode, error) {
	st, err := durable.Lstat(path)
	if err != nil {
		return Inode{}, err
	}
	return Inode{uint64(st.Dev), uint64(st.Ino)}, nil
}

// IdentityNote is what a journal note's detail says of the file at path
// so that a rollback acts on that file only: "dev=D ino=I", or "" when it
// cannot be read.
func IdentityNote(path string) string {
	id, err := InodeOf(path)
	if err != nil {
		return ""
	}
	return id.String()
}

// ParseIdentity reads the "dev=D ino=I" that Inode.String writes into a
// note's detail (the last one); ok is false when the detail holds none.
func ParseIdentity(detail string) (Inode, bool) {
	i := strings.LastIndex(detail, "dev=")
	if i < 0 {
		return Inode{}, false
	}
	var id Inode
	if _, err := fmt.Sscanf(detail[i:], "dev=%d ino=%d", &id.Dev, &id.Ino); err != nil {
		return Inode{}, false
	}
	return id, true
}
