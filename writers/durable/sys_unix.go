//go:build unix

package durable

import (
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// posixSys is the platform of plain POSIX calls: the fallbacks of this
// package, used as they are on FreeBSD (and by a Linux build with -tags
// portable, which tests them), and under darwinSys on macOS.
type posixSys struct{}

// fsync is fsync(2) (os.File.Sync).
func (posixSys) fsync(f *os.File) error { return f.Sync() }

// open walks path one component at a time (openComponentwise).
func (posixSys) open(path string, flag int, perm os.FileMode) (*os.File, error) {
	return openComponentwise(path, flag|unix.O_NOFOLLOW|unix.O_CLOEXEC, uint32(perm.Perm()))
}

// rename is renameat(2), which replaces; without replacing it is
// renameExclusive.
func (posixSys) rename(ofd int, oldName string, nfd int, newName string, noReplace bool) error {
	if noReplace {
		return renameExclusive(ofd, oldName, nfd, newName)
	}
	return unix.Renameat(ofd, oldName, nfd, newName)
}

// syncFS: POSIX has no call that writes back one filesystem and waits
// (sync(2) need not wait, and on macOS does not).
func (posixSys) syncFS(*os.File) error { return unix.ENOSYS }

// dropCache: no portable advice drops clean pages (macOS has none), so
// the pages stay cached; the kernel reclaims them as it needs.
func (posixSys) dropCache(int, string) error { return nil }

// openComponentwise is openNoFollow without openat2: every directory on
// the way is opened with O_NOFOLLOW|O_DIRECTORY relative to the previous
// one, so a symlink anywhere yields ELOOP (or ENOTDIR) and a component
// swapped for a symlink after it was checked is never followed. ".." is
// refused (EINVAL), as the reference does.
func openComponentwise(path string, flag int, mode uint32) (*os.File, error) {
	perr := func(err error) error { return &os.PathError{Op: "open", Path: path, Err: err} }
	var names []string
	for _, c := range strings.Split(path, "/") {
		switch c {
		case "", ".":
		case "..":
			return nil, perr(unix.EINVAL)
		default:
			names = append(names, c)
		}
	}
	base := "."
	if filepath.IsAbs(path) {
		base = "/"
	}
	const dirFlags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
	dfd, err := unix.Open(base, dirFlags, 0)
	if err != nil {
		return nil, perr(err)
	}
	if len(names) == 0 {
		// The path names "/" or "." itself.
		unix.Close(dfd)
		fd, err := unix.Open(base, flag|unix.O_NOFOLLOW|unix.O_CLOEXEC, mode)
		if err != nil {
			return nil, perr(err)
		}
		return os.NewFile(uintptr(fd), path), nil
	}
	for i, name := range names {
		last := i == len(names)-1
		fl, m := dirFlags, uint32(0)
		if last {
			fl, m = flag|unix.O_NOFOLLOW|unix.O_CLOEXEC, mode
		}
		fd, err := unix.Openat(dfd, name, fl, m)
		if err == unix.ENOTDIR {
			// O_DIRECTORY|O_NOFOLLOW on a symlink says ENOTDIR (Linux);
			// report it as openat2 does.
			var st unix.Stat_t
			if unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
				err = unix.ELOOP
			}
		}
		unix.Close(dfd)
		if err != nil {
			return nil, perr(err)
		}
		if last {
			return os.NewFile(uintptr(fd), path), nil
		}
		dfd = fd
	}
	panic("unreachable")
}

// renameExclusive renames without replacing where the system or the
// filesystem has no such rename. A file is published with link(2), which
// creates the new name atomically or fails with EEXIST, and its old name
// is then removed: a crash in between leaves both names for the same
// inode, harmless for the temps and staging files this moves. link(2)
// cannot name a directory, so a directory is renamed only when nothing
// is at newName, and a rename(2) that finds something there after all
// refuses it unless it is an empty directory (ENOTEMPTY, ENOTDIR): the
// one thing this fallback may replace is an empty directory created in
// the instant between the check and the rename, which holds nothing to
// lose. EEXIST reports a newName in the way.
func renameExclusive(ofd int, oldName string, nfd int, newName string) error {
	var st unix.Stat_t
	if err := unix.Fstatat(ofd, oldName, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return err
	}
	if !isDir(st) {
		return linkNoReplace(ofd, oldName, nfd, newName)
	}
	switch err := unix.Fstatat(nfd, newName, &st, unix.AT_SYMLINK_NOFOLLOW); {
	case err == nil:
		return unix.EEXIST
	case err != unix.ENOENT:
		return err
	}
	switch err := unix.Renameat(ofd, oldName, nfd, newName); err {
	case unix.ENOTEMPTY, unix.ENOTDIR:
		return unix.EEXIST
	default:
		return err
	}
}

// linkNoReplace moves the non-directory oldName to newName by linkat(2),
// which never replaces, and then unlinks oldName.
func linkNoReplace(ofd int, oldName string, nfd int, newName string) error {
	if err := unix.Linkat(ofd, oldName, nfd, newName, 0); err != nil {
		return err
	}
	return unix.Unlinkat(ofd, oldName, 0)
}
