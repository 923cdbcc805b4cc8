package durable

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// ErrMultiLink is matched when pisess refuses to change the mode or owner
// of a file with more than one hard link, or to rename over one: the other
// name may lie outside the tree (a link planted by whoever can write the
// tree), and a change to the inode would reach it there.
var ErrMultiLink = errors.New("file has more than one hard link")

// Lstat stats path itself without following a symlink in any component
// (the parent is opened with RESOLVE_NO_SYMLINKS): what a path names
// inside a tree, never where a planted symlink points.
func Lstat(path string) (unix.Stat_t, error) { return lstatAt(path) }

// Link gives the file oldpath the second name newpath: linkat(2) between
// parents opened without following symlinks, never following a symlink at
// oldpath and never replacing newpath.
func (o Ops) Link(oldpath, newpath string) error {
	lerr := func(err error) error { return &os.LinkError{Op: "link", Old: oldpath, New: newpath, Err: err} }
	openDir := func(dir string) (*os.File, error) { return o.openFile(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0) }
	od, oldName, nd, newName, err := openParents(openDir, oldpath, newpath, lerr)
	if err != nil {
		return err
	}
	defer od.Close()
	defer nd.Close()
	if err := unix.Linkat(int(od.Fd()), oldName, int(nd.Fd()), newName, 0); err != nil {
		return lerr(err)
	}
	return nil
}

// SetModeOwner gives the regular file at path the permission bits perm
// and, when the process runs as root, the owner uid:gid. It works on a
// descriptor opened without following symlinks and refuses a file with
// more than one hard link (ErrMultiLink), so that neither a symlink nor a
// planted hard link can carry the change to a file outside the tree.
func (o Ops) SetModeOwner(path string, perm os.FileMode, uid, gid int) error {
	f, err := o.openFile(path, unix.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := fstat(f)
	if err != nil {
		return err
	}
	if !isRegular(st) {
		return &os.PathError{Op: "chmod", Path: path, Err: fmt.Errorf("not a regular file")}
	}
	if st.Nlink > 1 {
		return &os.PathError{Op: "chmod", Path: path, Err: fmt.Errorf("%w (%d)", ErrMultiLink, st.Nlink)}
	}
	if err := unix.Fchmod(int(f.Fd()), uint32(perm.Perm())); err != nil {
		return &os.PathError{Op: "chmod", Path: path, Err: err}
	}
	if os.Geteuid() == 0 && (int(st.Uid) != uid || int(st.Gid) != gid) {
		if err := unix.Fchown(int(f.Fd()), uid, gid); err != nil {
			return &os.PathError{Op: "chown", Path: path, Err: err}
		}
	}
	return nil
}
