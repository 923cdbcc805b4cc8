// Package durable is the only package in pisess that makes bytes durable or
// moves them into place: it alone calls fsync, rename, chmod and chown on
// store files, and flock. Everything above it (store, ledger, rollback)
// describes *what* to write; this package owns *how*, so that the order of
// steps that keeps a crash from losing data is written down once.
//
// # The one order (STYLE.md §5)
//
// A whole file is published as restic's local.Save, Prometheus's checkpoint
// and etcd's WAL create do it:
//
//  1. a temp file in the store's tmp/ (same filesystem, so the rename is
//     atomic), named after its final name so a leftover is recognisable,
//     created O_EXCL|O_NOFOLLOW with mode 0600 and then fchmod-ed to the
//     wanted mode whatever the umask; written whole, fsynced, closed;
//  2. renamed into place, then the directory is fsynced (both, when the
//     rename crosses two);
//  3. on an error before the rename the temp is removed and the error
//     returned. A failed fsync is final: nothing here retries one, because
//     after a failed fsync the kernel may already have dropped the dirty
//     pages it could not write.
//
// Appends (ledger, journal) are whole lines, fsynced before success is
// reported. A staging store is written without per-file fsyncs and sealed
// once by syncfs ([Ops.SealWith]) through a [Seal] opened before its first
// write, so that a writeback error of any of its files is reported,
// before it is renamed into place.
//
// A directory is removed by descriptor ([Ops.RemoveAll], [RemoveBeneath]):
// its parent opened without a symlink in any component, every name
// unlinked in the directory it was listed in, a symlink unlinked, never
// followed.
//
// # What pi demands (FORMAT.md §1, §11)
//
// pi opens every store path with no symlink in any component (Linux
// openat2 with RESOLVE_NO_SYMLINKS), creates directories 0700 and files
// 0600 and chmods them explicitly, refuses special files, and fails outright
// on a permission error. Every open here therefore goes through
// [Ops.OpenNoFollow], and every created file or directory gets an explicit
// chmod. Running as root, each is also given, by descriptor and before it is
// published, to the owner of the directory it is created in, so pi is never
// locked out of a file even for a moment; [Ops.ChownTree] and
// [Ops.ChownIfRoot] hand over whatever else a root run must.
//
// # Seams
//
// There is no mutable package state to swap in tests. Every helper is a
// method on an [Ops] value whose function fields are the primitive system
// calls; [OS] is the real one and [FaultyOps] injects errors such as ENOSPC,
// EIO or EACCES on a write, fsync or rename of a matching path. Callers take
// an Ops and pass it down, so a test can hand a faulty one to any layer.
//
// # Failpoints
//
// [Failpoint] marks a step where a crash test may kill the process. In
// normal builds it is an empty function that the compiler removes; built
// with -tags failpoints it reads PISESS_FAILPOINT and SIGKILLs the process
// at the named point (see failpoint_on.go). [KnownFailpoints] lists every
// name registered with [Register], so the crash harness loops over all of
// them and a new failpoint is tested for free.
//
// # Platforms
//
// Linux, macOS and FreeBSD. What differs between them is one small
// interface, platform (sys.go), with one file per system: Linux opens with
// openat2, renames with renameat2 and seals with syncfs; macOS walks paths
// one component at a time with O_NOFOLLOW beneath the directory opened
// last, renames without replacing with renameatx_np(RENAME_EXCL), and
// fsyncs with F_FULLFSYNC; FreeBSD uses the plain POSIX
// fallbacks those build on. flock, fchown and the rest are the same
// everywhere. A Linux build with -tags portable uses the fallbacks, so
// that the tests and the crash harness run on Linux the code macOS runs.
// [FileStat] is a file's status in one form on every system (the BSDs'
// 32-bit st_dev sign-extended, as the reference does, and st_ctimespec).
// The seal of a staging store is one syncfs on Linux and elsewhere an
// fsync (F_FULLFSYNC on macOS) of each of its files and directories; the
// pages of a sealed store are dropped from the page cache on Linux only
// (posix_fadvise), left to the kernel elsewhere; a rename that must not
// replace is, in the POSIX fallback, link then unlink for a file and a
// rename onto nothing for a directory. The README's platform table, as
// issue 37 left it, is this paragraph.
package durable
