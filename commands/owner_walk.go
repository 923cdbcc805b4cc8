package commands

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Root opens a tree one path component at a time, each directory with
// O_NOFOLLOW beneath the one before, so that what it opens is what it
// looked at. A symbolic link is followed only when root controls it (the
// link is root's, in a directory no one else may change): /home pointing
// at /var/home is the system's; a link another user could have made or
// replaced is an error, never an address.

// maxLinks bounds the links one walk follows, as the kernel does.
const maxLinks = 40

// walked is where a walk ended.
type walked struct {
	f  *os.File    // the last component, when it is a directory; else nil
	st unix.Stat_t // the last component
	// rootOnly: no one but root could have changed any directory entry
	// the walk went through, so what it found cannot have been swapped.
	rootOnly bool
}

// Errors of a walk, for callers that branch (--all-users skips a tree
// that does not exist).
var (
	errForeignLink = errors.New("a symbolic link root does not control (as root, pisess follows only links that root owns in directories no one else may change)")
	errChanged     = errors.New("it changed while pisess opened it")
)

// walkPath opens path (absolute) from "/".
func walkPath(path string) (*walked, error) {
	return walkFrom(nil, "/", path)
}

// walkFrom resolves rel beneath dir (whose path is at), or, when dir is
// nil, the absolute path rel from "/".
func walkFrom(dir *os.File, at, rel string) (w *walked, err error) {
	var fd int
	if dir == nil {
		fd, err = unix.Open("/", dirOpenFlags, 0)
		at = "/"
	} else {
		fd, err = unix.Dup(int(dir.Fd()))
		if err == nil {
			unix.CloseOnExec(fd)
		}
	}
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: at, Err: err}
	}
	defer func() {
		if fd >= 0 {
			unix.Close(fd)
		}
	}()
	var cur unix.Stat_t
	if err := unix.Fstat(fd, &cur); err != nil {
		return nil, &fs.PathError{Op: "stat", Path: at, Err: err}
	}
	rootOnly, links := true, 0
	comps := strings.Split(rel, "/")
	where := at
	for len(comps) > 0 {
		c := comps[0]
		comps = comps[1:]
		if c == "" || c == "." {
			continue
		}
		next := filepath.Join(where, c)
		var st unix.Stat_t
		if err := unix.Fstatat(fd, c, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return nil, &fs.PathError{Op: "lstat", Path: next, Err: err}
		}
		controlled := onlyRootChanges(&cur, &st)
		rootOnly = rootOnly && controlled
		switch {
		case st.Mode&unix.S_IFMT == unix.S_IFLNK:
			if st.Uid != 0 || !controlled {
				return nil, &fs.PathError{Op: "open", Path: next, Err: fmt.Errorf("%w; it belongs to uid %d", errForeignLink, st.Uid)}
			}
			if links++; links > maxLinks {
				return nil, &fs.PathError{Op: "open", Path: next, Err: syscall.ELOOP}
			}
			target, err := readlinkat(fd, c)
			if err != nil {
				return nil, &fs.PathError{Op: "readlink", Path: next, Err: err}
			}
			if filepath.IsAbs(target) {
				nfd, err := unix.Open("/", dirOpenFlags, 0)
				if err != nil {
					return nil, &fs.PathError{Op: "open", Path: "/", Err: err}
				}
				unix.Close(fd)
				fd, where = nfd, "/"
				if err := unix.Fstat(fd, &cur); err != nil {
					return nil, &fs.PathError{Op: "stat", Path: "/", Err: err}
				}
			}
			comps = append(strings.Split(target, "/"), comps...)
			continue
		case st.Mode&unix.S_IFMT != unix.S_IFDIR:
			if !onlyDots(comps) {
				return nil, &fs.PathError{Op: "open", Path: next, Err: syscall.ENOTDIR}
			}
			return &walked{st: st, rootOnly: rootOnly}, nil
		}
		nfd, err := unix.Openat(fd, c, dirOpenFlags|unix.O_NOFOLLOW, 0)
		if err != nil {
			return nil, &fs.PathError{Op: "open", Path: next, Err: err}
		}
		var got unix.Stat_t
		if err := unix.Fstat(nfd, &got); err != nil {
			unix.Close(nfd)
			return nil, &fs.PathError{Op: "stat", Path: next, Err: err}
		}
		if got.Dev != st.Dev || got.Ino != st.Ino {
			unix.Close(nfd)
			return nil, &fs.PathError{Op: "open", Path: next, Err: errChanged}
		}
		unix.Close(fd)
		fd, cur, where = nfd, got, next
	}
	f := os.NewFile(uintptr(fd), where)
	fd = -1
	return &walked{f: f, st: cur, rootOnly: rootOnly}, nil
}

// onlyRootChanges reports whether no one but root may rename, remove or
// replace entry in dir: dir is root's and writable by no one else (a
// group write bit counts only for a group other than root's), or sticky
// with entry root's.
func onlyRootChanges(dir, entry *unix.Stat_t) bool {
	if dir.Uid != 0 {
		return false
	}
	if uint32(dir.Mode)&unix.S_ISVTX != 0 && entry.Uid == 0 {
		return true
	}
	return uint32(dir.Mode)&0o002 == 0 && (uint32(dir.Mode)&0o020 == 0 || dir.Gid == 0)
}

func readlinkat(fd int, name string) (string, error) {
	for size := 256; ; size *= 2 {
		buf := make([]byte, size)
		n, err := unix.Readlinkat(fd, name, buf)
		if err != nil {
			return "", err
		}
		if n < size {
			return string(buf[:n]), nil
		}
	}
}

// onlyDots reports whether comps name nothing beyond where they start.
func onlyDots(comps []string) bool {
	for _, c := range comps {
		if c != "" && c != "." {
			return false
		}
	}
	return true
}

// fileID is a file's identity: device and inode.
type fileID struct{ dev, ino uint64 }

func idOf(st *unix.Stat_t) fileID { return fileID{uint64(st.Dev), uint64(st.Ino)} }

func isDirStat(st *unix.Stat_t) bool { return st.Mode&unix.S_IFMT == unix.S_IFDIR }
