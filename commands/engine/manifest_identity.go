package engine

import (
	"os"
	"syscall"

	"pisess/writers/store"
)

// manifestIdentity returns the device and inode of the sidecar's
// manifest.json (a regular file, not followed).
func manifestIdentity(sidecar string) (dev, ino uint64, ok bool) {
	fi, err := os.Lstat(store.ManifestPath(sidecar))
	if err != nil || !fi.Mode().IsRegular() {
		return 0, 0, false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, false
	}
	return uint64(st.Dev), st.Ino, true
}
