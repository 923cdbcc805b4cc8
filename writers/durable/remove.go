package durable

import (
	"errors"
	"io"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Removals never follow a symlink (issue 32 §4). A path checked for
// symlinks and then removed by path (os.RemoveAll) is resolved again at
// each step: a parent that the tree's owner swapped for a symlink between
// the check and the removal carries it to a directory of the same name
// anywhere the link points. Here the parent is opened once without
// following a symlink in any component (openat2 RESOLVE_NO_SYMLINKS), and
// everything beneath it is removed relative to descriptors: each
// directory entered with O_NOFOLLOW|O_DIRECTORY, each name unlinked with
// unlinkat in the directory it was listed in. A name swapped for a
// symlink meanwhile is unlinked (the link itself), never entered.

// RemoveAll removes path and everything beneath it, as os.RemoveAll does,
// but by descriptor (see above): path's parent is opened without
// following a symlink, and nothing below it is reached through one. A
// missing path is no error.
func (o Ops) RemoveAll(path string) error {
	dir, name, err := splitPath(path)
	if err != nil {
		return err
	}
	d, err := o.openFile(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return &os.PathError{Op: "removeall", Path: path, Err: err}
	}
	defer d.Close()
	return RemoveBeneath(d, name)
}

// RemoveDir removes the empty directory path (rmdir), its parent opened
// without following a symlink: a directory that is not empty is left, with
// an error.
func (o Ops) RemoveDir(path string) error {
	dir, name, err := splitPath(path)
	if err != nil {
		return err
	}
	d, err := o.openFile(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return &os.PathError{Op: "rmdir", Path: path, Err: err}
	}
	defer d.Close()
	if err := unix.Unlinkat(int(d.Fd()), name, unix.AT_REMOVEDIR); err != nil {
		return &os.PathError{Op: "rmdir", Path: path, Err: err}
	}
	return nil
}

// RemoveBeneath removes the entry name of the open directory dir and, when
// it is a directory, everything beneath it, relative to descriptors only.
// A missing entry is no error.
func RemoveBeneath(dir *os.File, name string) error {
	if name == "" || name == "." || name == ".." || filepath.Base(name) != name {
		return &os.PathError{Op: "removeall", Path: filepath.Join(dir.Name(), name), Err: unix.EINVAL}
	}
	return removeEntryAt(int(dir.Fd()), name, filepath.Join(dir.Name(), name))
}

// RemoveContents removes everything inside the open directory dir (not
// dir itself), relative to descriptors only.
func RemoveContents(dir *os.File) error {
	return removeContentsAt(int(dir.Fd()), dir.Name())
}

// removeEntryAt removes name of the directory open at dfd, recursively; path
// names it in errors.
func removeEntryAt(dfd int, name, path string) error {
	// An entry swapped between the unlink and the open (a directory for a
	// symlink, or back) is looked at again, a few times at most.
	for try := 0; ; try++ {
		err := unix.Unlinkat(dfd, name, 0)
		switch {
		case err == nil, errors.Is(err, unix.ENOENT):
			return nil
		case !errors.Is(err, unix.EISDIR) && !errors.Is(err, unix.EPERM):
			return &os.PathError{Op: "unlink", Path: path, Err: err}
		}
		fd, err := unix.Openat(dfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		switch {
		case errors.Is(err, unix.ENOENT):
			return nil
		case (errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR)) && try < 3:
			continue // no longer a directory: unlink what is there now
		case err != nil:
			return &os.PathError{Op: "open", Path: path, Err: err}
		}
		err = removeContentsAt(fd, path)
		unix.Close(fd)
		if err != nil {
			return err
		}
		err = unix.Unlinkat(dfd, name, unix.AT_REMOVEDIR)
		switch {
		case err == nil, errors.Is(err, unix.ENOENT):
			return nil
		case (errors.Is(err, unix.ENOTEMPTY) || errors.Is(err, unix.EEXIST)) && try < 3:
			continue // written to meanwhile: empty it again
		}
		return &os.PathError{Op: "rmdir", Path: path, Err: err}
	}
}

// removeContentsAt removes every entry of the directory open at fd; path
// names it in errors.
func removeContentsAt(fd int, path string) error {
	// Listed through a duplicate, read from its start: closing it leaves
	// the caller's descriptor open.
	dup, err := unix.Dup(fd)
	if err != nil {
		return &os.PathError{Op: "open", Path: path, Err: err}
	}
	d := os.NewFile(uintptr(dup), path)
	defer d.Close()
	if _, err := d.Seek(0, io.SeekStart); err != nil {
		return &os.PathError{Op: "readdir", Path: path, Err: err}
	}
	// Listed whole before anything is removed: a listing cut by removals
	// may skip names (what is added meanwhile, removeEntryAt's rmdir
	// finds).
	names, err := d.Readdirnames(-1)
	if err != nil {
		return &os.PathError{Op: "readdir", Path: path, Err: err}
	}
	for _, n := range names {
		if err := removeEntryAt(fd, n, filepath.Join(path, n)); err != nil {
			return err
		}
	}
	return nil
}
