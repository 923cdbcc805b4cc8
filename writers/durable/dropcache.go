package durable

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// DropCached asks the kernel to drop the cached pages of the regular files
// directly in dir (posix_fadvise POSIX_FADV_DONTNEED), for files that were
// made durable and will not be read again soon: the segments and index of
// a store just sealed. A migration writes about as much as the tree it
// reads; kept cached, those pages push out what the machine was using, and
// each new file is written into pages the kernel must find afresh (on the
// PVM guest of scripts/bench ~13× the system time of pages just given
// back, which the next session's files then reuse: issue 14). Dirty pages
// are not dropped (the kernel only starts their writeback), so the call is
// useful only after a seal. It is advice: nothing is read or changed, dir
// is opened without following symlinks, and only regular files are
// opened. The first error is returned after every file was tried.
func (o Ops) DropCached(dir string) error {
	d, err := o.openFile(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return fmt.Errorf("drop cached pages: %w", err)
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return fmt.Errorf("drop cached pages of %s: %w", dir, err)
	}
	dfd := int(d.Fd())
	var first error
	for _, name := range names {
		if err := (native{}).dropCache(dfd, name); err != nil && first == nil {
			first = &os.PathError{Op: "fadvise", Path: filepath.Join(dir, name), Err: err}
		}
	}
	return first
}
