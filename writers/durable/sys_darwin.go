package durable

import (
	"os"

	"golang.org/x/sys/unix"
)

// darwinSys is macOS's platform: posixSys's component-by-component open
// and tree seal, with the exclusive rename and the full fsync the system
// has. macOS has no syncfs, so a staging store is sealed by an fsync of
// each of its files and directories (Ops.SealFilesystem's fallback). The
// page-cache advice of Ops.DropCached has no macOS equivalent (F_NOCACHE
// only stops caching through the descriptor it is set on) and is skipped.
type darwinSys struct{ posixSys }

// fsync is fcntl(F_FULLFSYNC): fsync(2) on macOS hands the data to the
// drive, whose cache may still lose or reorder it on a power loss;
// F_FULLFSYNC also has the drive write its cache out. A filesystem that
// cannot (SMB says ENOTSUP, FUSE volumes EINVAL) gets fsync(2), the most
// it offers. (os.File.Sync falls back on ENOTSUP only.)
func (darwinSys) fsync(f *os.File) error {
	fd := int(f.Fd())
	for {
		_, err := unix.FcntlInt(uintptr(fd), unix.F_FULLFSYNC, 0)
		switch err {
		case nil:
			return nil
		case unix.EINTR:
			continue
		case unix.ENOTSUP, unix.EINVAL, unix.ENOTTY:
			for {
				if err = unix.Fsync(fd); err != unix.EINTR {
					break
				}
			}
		}
		if err != nil {
			return &os.PathError{Op: "sync", Path: f.Name(), Err: err}
		}
		return nil
	}
}

// rename uses renameatx_np: RENAME_EXCL not to replace, atomically for
// directories too; on a filesystem without it (ENOTSUP, EINVAL)
// renameExclusive. A replacing rename is renameat(2): the exchange Linux
// uses avoids an ext4 write-back that APFS does not have.
func (darwinSys) rename(ofd int, oldName string, nfd int, newName string, noReplace bool) error {
	if !noReplace {
		return unix.Renameat(ofd, oldName, nfd, newName)
	}
	err := unix.RenameatxNp(ofd, oldName, nfd, newName, unix.RENAME_EXCL)
	if err == unix.ENOTSUP || err == unix.EINVAL {
		return renameExclusive(ofd, oldName, nfd, newName)
	}
	return err
}
