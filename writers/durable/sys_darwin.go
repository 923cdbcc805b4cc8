package durable

import "golang.org/x/sys/unix"

// darwinSys is macOS's platform: posixSys's component-by-component open
// and tree seal, with the exclusive rename the system has.
//
// Durability needs nothing more here: os.File.Sync, the one fsync of this
// package (Ops.Sync), is fcntl(F_FULLFSYNC) on macOS, falling back to
// fsync(2) where the filesystem refuses it (ENOTSUP: SMB): fsync(2) alone
// hands the data to the drive, whose cache may still lose it. macOS has
// no syncfs, so a staging store is sealed by an F_FULLFSYNC of each of its
// files and directories (Ops.SealFilesystem's fallback). The page-cache
// advice of Ops.DropCached has no macOS equivalent (F_NOCACHE only stops
// caching through the descriptor it is set on) and is skipped.
type darwinSys struct{ posixSys }

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
