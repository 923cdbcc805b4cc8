package durable

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
)

// Owner returns the owner of path itself (lstat: a symlink's own owner).
// A root run gives what it creates in a tree to the owner of the session
// file or tree, read with this.
func (o Ops) Owner(path string) (uid, gid int, err error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return 0, 0, err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, fmt.Errorf("owner %s: no unix ownership", path)
	}
	return int(st.Uid), int(st.Gid), nil
}

// ChownTree gives root and everything under it to uid:gid, without
// following any symlink. pi must be able to open and rewrite its sidecar,
// and a permission error fails its open outright (FORMAT.md §1), so a store
// created by root from cron must belong to the session's owner.
//
// It is safe against the owner racing it: it walks by directory
// descriptor (a directory swapped for a symlink mid-walk is refused, not
// followed), and it chowns each directory only after everything in it, so
// the new owner gains control of a directory only once the walk has left
// it. A symlink found inside is chowned itself (lchown), never its target.
func (o Ops) ChownTree(root string, uid, gid int) error {
	f, err := o.openFile(root, unix.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return fmt.Errorf("chown tree: %w", err)
	}
	defer f.Close()
	if err := chownTree(f, uid, gid); err != nil {
		return fmt.Errorf("chown tree %s: %w", root, err)
	}
	return nil
}

func chownTree(f *os.File, uid, gid int) error {
	st, err := fstat(f)
	if err != nil {
		return err
	}
	fd := int(f.Fd())
	if !isDir(st) && st.Nlink > 1 {
		return &os.PathError{Op: "chown", Path: f.Name(), Err: fmt.Errorf("%w (%d)", ErrMultiLink, st.Nlink)}
	}
	if isDir(st) {
		names, err := f.Readdirnames(-1)
		if err != nil {
			return err
		}
		for _, name := range names {
			if err := chownEntry(fd, filepath.Join(f.Name(), name), name, uid, gid); err != nil {
				return err
			}
		}
	}
	if err := unix.Fchown(fd, uid, gid); err != nil {
		return &os.PathError{Op: "chown", Path: f.Name(), Err: err}
	}
	return nil
}

func chownEntry(dfd int, path, name string, uid, gid int) error {
	var st unix.Stat_t
	if err := unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return &os.PathError{Op: "lstat", Path: path, Err: err}
	}
	if !isDir(st) {
		if st.Nlink > 1 {
			return &os.PathError{Op: "chown", Path: path, Err: fmt.Errorf("%w (%d)", ErrMultiLink, st.Nlink)}
		}
		if err := unix.Fchownat(dfd, name, uid, gid, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return &os.PathError{Op: "chown", Path: path, Err: err}
		}
		return nil
	}
	cfd, err := unix.Openat(dfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return &os.PathError{Op: "open", Path: path, Err: err}
	}
	child := os.NewFile(uintptr(cfd), path)
	defer child.Close()
	return chownTree(child, uid, gid)
}

// ChownIfRoot gives path itself (lchown, parents resolved without
// symlinks) to uid:gid when the process runs as root, and does nothing
// otherwise: an ordinary user's run creates files that are already the
// user's and could not give them away anyway.
func (o Ops) ChownIfRoot(path string, uid, gid int) error {
	if os.Geteuid() != 0 {
		return nil
	}
	dir, name, err := splitPath(path)
	if err != nil {
		return err
	}
	d, err := o.openFile(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return fmt.Errorf("chown %s: %w", path, err)
	}
	defer d.Close()
	var st unix.Stat_t
	if err := unix.Fstatat(int(d.Fd()), name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return &os.PathError{Op: "chown", Path: path, Err: err}
	}
	if !isDir(st) && st.Nlink > 1 {
		// Another name of this inode may lie outside the tree.
		return &os.PathError{Op: "chown", Path: path, Err: fmt.Errorf("%w (%d)", ErrMultiLink, st.Nlink)}
	}
	if err := unix.Fchownat(int(d.Fd()), name, uid, gid, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return &os.PathError{Op: "chown", Path: path, Err: err}
	}
	return nil
}

// inheritOwner gives f, just created at path, to the owner of its
// directory when the process runs as root, and does nothing otherwise.
//
// Why here and not only in the caller: pi fails outright on a file it may
// not open (FORMAT.md §1), and a root-owned file that pisess creates in a
// user's tree — a session lock, a temp about to be renamed over an
// installed manifest — would lock pi out from the moment it appears until
// the caller's chown. Doing it by descriptor before the file is published
// leaves no such moment. The directory's owner is the right one wherever
// pisess creates files: the session's directory, a store or staging root
// created in it (and so inheriting it), the tree's .pisess/. A caller that
// wants another owner still calls [Ops.ChownTree] or [Ops.ChownIfRoot].
func inheritOwner(f *os.File, path string) error {
	if os.Geteuid() != 0 {
		return nil
	}
	dir, _, err := splitPath(path)
	if err != nil {
		return err
	}
	d, err := openDir(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return inheritOwnerAt(d, f)
}

// inheritOwnerAt is inheritOwner with the directory already open.
func inheritOwnerAt(dir, f *os.File) error {
	if os.Geteuid() != 0 {
		return nil
	}
	dst, err := fstat(dir)
	if err != nil {
		return err
	}
	fst, err := fstat(f)
	if err != nil {
		return err
	}
	if fst.Uid == dst.Uid && fst.Gid == dst.Gid {
		return nil
	}
	if err := unix.Fchown(int(f.Fd()), int(dst.Uid), int(dst.Gid)); err != nil {
		return &os.PathError{Op: "chown", Path: f.Name(), Err: err}
	}
	return nil
}
