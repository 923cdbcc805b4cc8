package durable

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// linuxSys is Linux's platform: openat2, renameat2, syncfs and
// posix_fadvise, each falling back to posixSys where the kernel or the
// filesystem lacks it.
type linuxSys struct{}

// fsync is fsync(2) (os.File.Sync).
func (linuxSys) fsync(f *os.File) error { return f.Sync() }

// open uses openat2 with RESOLVE_NO_SYMLINKS (and RESOLVE_NO_MAGICLINKS);
// where openat2 is missing (ENOSYS, kernels before 5.6) it walks the path
// (openComponentwise).
func (linuxSys) open(path string, flag int, perm os.FileMode) (*os.File, error) {
	flag |= unix.O_NOFOLLOW | unix.O_CLOEXEC
	var mode uint64
	if flag&unix.O_CREAT != 0 || flag&unix.O_TMPFILE == unix.O_TMPFILE {
		// openat2 rejects a non-zero mode without O_CREAT or O_TMPFILE
		// (whose bits include O_DIRECTORY's: test them all).
		mode = uint64(perm.Perm())
	}
	how := unix.OpenHow{
		Flags:   uint64(flag),
		Mode:    mode,
		Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	}
	for attempt := 0; ; attempt++ {
		fd, err := unix.Openat2(unix.AT_FDCWD, path, &how)
		switch {
		case err == nil:
			return os.NewFile(uintptr(fd), path), nil
		case errors.Is(err, unix.ENOSYS):
			return openComponentwise(path, flag, uint32(mode))
		case (err == unix.EINTR || err == unix.EAGAIN) && attempt < 8:
			// EAGAIN: openat2 saw a concurrent rename during resolution.
			continue
		default:
			return nil, &os.PathError{Op: "open", Path: path, Err: err}
		}
	}
}

// rename uses renameat2: RENAME_NOREPLACE not to replace, falling back to
// renameExclusive on a filesystem without it (EINVAL); to replace a file
// by its temp (Ops.WriteFileAtomic), an exchange (replaceByExchange).
func (linuxSys) rename(ofd int, oldName string, nfd int, newName string, noReplace bool) error {
	if !noReplace {
		if oldName == TempName(newName) {
			switch done, err := replaceByExchange(ofd, oldName, nfd, newName); {
			case err != nil:
				return err
			case done:
				return nil
			}
		}
		return unix.Renameat(ofd, oldName, nfd, newName)
	}
	err := unix.Renameat2(ofd, oldName, nfd, newName, unix.RENAME_NOREPLACE)
	if err == unix.EINVAL || err == unix.ENOSYS {
		return renameExclusive(ofd, oldName, nfd, newName)
	}
	return err
}

// replaceByExchange puts the temp oldName in the place of the file newName
// by exchanging the two (renameat2 RENAME_EXCHANGE, as atomic for a reader
// as a rename) and unlinking the displaced file, now at oldName. A rename
// over an existing file makes ext4 (auto_da_alloc, its default) start the
// write-back of the new file's delayed blocks then and there: ~0.1 ms of
// CPU and more of waiting per replacement, in every refresh's manifest,
// for a safety the callers get from their own syncs or seal (issue 14). A
// crash between the two steps leaves the old content under the temp's
// name, a leftover the next write removes (createExclusive). done is
// false, with nothing changed, where there is nothing to exchange with
// (ENOENT), the filesystem cannot exchange (EINVAL), or what newName held
// is not a file to unlink (then exchanged back): a plain rename follows.
func replaceByExchange(ofd int, oldName string, nfd int, newName string) (done bool, err error) {
	if unix.Renameat2(ofd, oldName, nfd, newName, unix.RENAME_EXCHANGE) != nil {
		return false, nil
	}
	if unix.Unlinkat(ofd, oldName, 0) == nil {
		return true, nil
	}
	if err := unix.Renameat2(ofd, oldName, nfd, newName, unix.RENAME_EXCHANGE); err != nil {
		return false, fmt.Errorf("undo an exchange: %w", err)
	}
	return false, nil
}

// syncFS is syncfs(2), which also reports the writeback errors of the
// filesystem's files (Linux 5.8 and later).
func (linuxSys) syncFS(f *os.File) error {
	if err := unix.Syncfs(int(f.Fd())); err != nil {
		return &os.PathError{Op: "syncfs", Path: f.Name(), Err: err}
	}
	return nil
}

// dropCache is posix_fadvise(POSIX_FADV_DONTNEED) on name, when it is a
// regular file (a device or FIFO is never opened).
func (linuxSys) dropCache(dfd int, name string) error {
	var st unix.Stat_t
	if err := unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return err
	}
	if !isRegular(st) {
		return nil
	}
	// A raw descriptor: os.NewFile would register it with the poller, two
	// system calls more for one fadvise.
	fd, err := unix.Openat(dfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	err = unix.Fadvise(fd, 0, 0, unix.FADV_DONTNEED)
	if cerr := unix.Close(fd); err == nil {
		err = cerr
	}
	return err
}
