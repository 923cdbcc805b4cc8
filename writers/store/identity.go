package store

import (
	"os"
	"syscall"
)

// ManifestIdentity returns the device and inode of the store's
// manifest.json (a regular file, not followed): a store rebuilt by pi,
// fsck or a rollback has another one.
func ManifestIdentity(root string) (dev, ino uint64, ok bool) {
	fi, err := os.Lstat(ManifestPath(root))
	if err != nil || !fi.Mode().IsRegular() {
		return 0, 0, false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, false
	}
	return uint64(st.Dev), st.Ino, true
}
