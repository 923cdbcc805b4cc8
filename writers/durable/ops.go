package durable

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// Ops is the set of primitive file operations every helper of this package
// goes through. Each field is one system call (or a short fixed sequence);
// the helpers, methods on Ops, put them in the durable order. A nil field
// means the operating system's, so the zero Ops works; [OS] spells that out
// and is what production code passes.
//
// Ops exists so that tests can inject faults ([FaultyOps]) or record the
// order of steps (wrap a field of [OS] and call the original) without any
// package-level variable to swap.
type Ops struct {
	// OpenFile opens path refusing a symlink in any component: the
	// semantics of [Ops.OpenNoFollow], which calls it.
	OpenFile func(path string, flag int, perm os.FileMode) (*os.File, error)
	// Write writes b to f; f.Name() is the path it was opened with.
	Write func(f *os.File, b []byte) (int, error)
	// Sync fsyncs f, a file or a directory.
	Sync func(f *os.File) error
	// RenameAt renames oldpath to newpath without any fsync; with
	// noReplace it fails with EEXIST rather than replace newpath.
	RenameAt func(oldpath, newpath string, noReplace bool) error
	// Remove unlinks the non-directory path.
	Remove func(path string) error
	// SyncFS flushes the whole filesystem that holds the open f
	// (syncfs(2)): the one seal of a staging store written with
	// DeferSync (see [Ops.SealTree]).
	SyncFS func(f *os.File) error

	// Seals, when set, shares the syncfs of SealTree between the
	// concurrent jobs of a run (group commit).
	Seals *SyncGroup

	// DeferSync turns every fsync of the helpers into nothing: for the
	// files and directories of a staging store, invisible to pi until its
	// rename, which one [Ops.SealTree] makes durable before that rename
	// (issue 14: a handful of sync calls per session, not thirty).
	DeferSync bool
}

// OS is the Ops that uses the operating system. Its fields are set (rather
// than left nil) so that a test can wrap one and still call the original.
// It is a variable only because Go has no struct constants: copy it, never
// assign to it or its fields.
var OS = Ops{
	OpenFile: openNoFollow,
	Write:    osWrite,
	Sync:     osSync,
	RenameAt: renameAt,
	Remove:   removeAt,
	SyncFS:   osSyncFS,
}

func (o Ops) openFile(path string, flag int, perm os.FileMode) (*os.File, error) {
	if o.OpenFile != nil {
		return o.OpenFile(path, flag, perm)
	}
	return openNoFollow(path, flag, perm)
}

func (o Ops) write(f *os.File, b []byte) (int, error) {
	if o.Write != nil {
		return o.Write(f, b)
	}
	return osWrite(f, b)
}

func (o Ops) sync(f *os.File) error {
	if o.DeferSync {
		return nil
	}
	if o.Sync != nil {
		return o.Sync(f)
	}
	return osSync(f)
}

// SyncFile fsyncs the open file f through the Sync seam (nothing with
// DeferSync).
func (o Ops) SyncFile(f *os.File) error { return o.sync(f) }

func (o Ops) renameAt(oldpath, newpath string, noReplace bool) error {
	if o.RenameAt != nil {
		return o.RenameAt(oldpath, newpath, noReplace)
	}
	return renameAt(oldpath, newpath, noReplace)
}

func (o Ops) remove(path string) error {
	if o.Remove != nil {
		return o.Remove(path)
	}
	return removeAt(path)
}

// writeAll writes all of b through the Write seam; a writer that makes no
// progress without an error is reported as io.ErrShortWrite rather than
// looped on forever.
func (o Ops) writeAll(f *os.File, b []byte) (int, error) {
	written := 0
	for written < len(b) {
		n, err := o.write(f, b[written:])
		if n > 0 {
			written += n
		}
		if err != nil {
			return written, err
		}
		if n <= 0 {
			return written, io.ErrShortWrite
		}
	}
	return written, nil
}

// OpenNoFollow opens path the way pi opens store paths: no symlink is
// followed in any component, final one included, and the descriptor is
// close-on-exec. On Linux it uses openat2 with RESOLVE_NO_SYMLINKS (and
// RESOLVE_NO_MAGICLINKS); where openat2 is missing (ENOSYS, kernels before
// 5.6) it walks the path one component at a time with O_NOFOLLOW, refusing
// "..", as the reference does. A symlink met on the way is reported as
// ELOOP: test with errors.Is(err, syscall.ELOOP), and use
// [Ops.HasSymlinkAncestor] to name the component.
//
// perm matters only with O_CREAT and is subject to the umask: callers that
// create files use the helpers below, which chmod explicitly.
func (o Ops) OpenNoFollow(path string, flag int, perm os.FileMode) (*os.File, error) {
	return o.openFile(path, flag, perm)
}

func openNoFollow(path string, flag int, perm os.FileMode) (*os.File, error) {
	flag |= unix.O_NOFOLLOW | unix.O_CLOEXEC
	var mode uint64
	if flag&(unix.O_CREAT|unix.O_TMPFILE) != 0 {
		// openat2 rejects a non-zero mode without O_CREAT or O_TMPFILE.
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

// openComponentwise is openNoFollow for kernels without openat2: every
// directory on the way is opened with O_NOFOLLOW|O_DIRECTORY relative to the
// previous one, so a symlink anywhere yields ELOOP (or ENOTDIR) and a
// component swapped for a symlink after it was checked is never followed.
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
		if err == unix.ENOTDIR && !last {
			// O_DIRECTORY|O_NOFOLLOW on a symlink says ENOTDIR; report
			// it as openat2 does.
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

func osWrite(f *os.File, b []byte) (int, error) {
	// Under -tags failpoints, PISESS_KILL_AFTER_BYTES may cut this write
	// short and kill the process: the torn write a crash test wants.
	if allow, kill := writeBudget(len(b)); kill {
		_, _ = f.Write(b[:allow])
		killSelf("PISESS_KILL_AFTER_BYTES")
		return allow, io.ErrShortWrite // not reached: killSelf does not return
	}
	return f.Write(b)
}

func osSync(f *os.File) error { return f.Sync() }

func osSyncFS(f *os.File) error {
	if err := unix.Syncfs(int(f.Fd())); err != nil {
		return &os.PathError{Op: "syncfs", Path: f.Name(), Err: err}
	}
	return nil
}

// splitPath returns the parent directory and final name of path, refusing
// names that cannot be created or renamed ("", ".", "..", "/").
func splitPath(path string) (dir, name string, err error) {
	clean := filepath.Clean(path)
	dir, name = filepath.Split(clean)
	if name == "" || name == "." || name == ".." || name == "/" {
		return "", "", &os.PathError{Op: "split", Path: path, Err: unix.EINVAL}
	}
	if dir == "" {
		dir = "."
	}
	return dir, name, nil
}

// openDir opens a directory for *at calls and fsync, refusing symlinks in
// any component.
func openDir(path string) (*os.File, error) {
	return openNoFollow(path, unix.O_RDONLY|unix.O_DIRECTORY, 0)
}

// renameAt renames relative to parent descriptors opened without following
// symlinks, so neither side can be redirected through a symlinked ancestor.
// noReplace uses renameat2(RENAME_NOREPLACE); on a filesystem without it
// (EINVAL) a regular file is published with link(2), which never replaces
// either, and the old name is then unlinked.
func renameAt(oldpath, newpath string, noReplace bool) error {
	lerr := func(err error) error { return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: err} }
	od, oldName, nd, newName, err := openParents(openDir, oldpath, newpath, lerr)
	if err != nil {
		return err
	}
	defer od.Close()
	defer nd.Close()
	ofd, nfd := int(od.Fd()), int(nd.Fd())
	if !noReplace {
		if oldName == TempName(newName) {
			// A temp published over its destination (Ops.WriteFileAtomic).
			switch done, err := replaceByExchange(ofd, oldName, nfd, newName); {
			case err != nil:
				return lerr(err)
			case done:
				return nil
			}
		}
		if err := unix.Renameat(ofd, oldName, nfd, newName); err != nil {
			return lerr(err)
		}
		return nil
	}
	err = unix.Renameat2(ofd, oldName, nfd, newName, unix.RENAME_NOREPLACE)
	if err == unix.EINVAL || err == unix.ENOSYS {
		return linkNoReplace(ofd, oldName, nfd, newName, lerr)
	}
	if err != nil {
		return lerr(err)
	}
	return nil
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

// openParents opens the parent directories of oldpath and newpath with
// open (which refuses symlinks) and returns them with the final names.
func openParents(open func(string) (*os.File, error), oldpath, newpath string, lerr func(error) error) (od *os.File, oldName string, nd *os.File, newName string, err error) {
	oldDir, oldName, err := splitPath(oldpath)
	if err != nil {
		return nil, "", nil, "", lerr(unix.EINVAL)
	}
	newDir, newName, err := splitPath(newpath)
	if err != nil {
		return nil, "", nil, "", lerr(unix.EINVAL)
	}
	if od, err = open(oldDir); err != nil {
		return nil, "", nil, "", err
	}
	if nd, err = open(newDir); err != nil {
		od.Close()
		return nil, "", nil, "", err
	}
	return od, oldName, nd, newName, nil
}

// linkNoReplace is the no-replace publication for filesystems without
// RENAME_NOREPLACE: linkat creates the new name atomically or fails with
// EEXIST, and only then is the old name removed. A crash in between leaves
// both names for the same inode, which is harmless for a temp file.
func linkNoReplace(ofd int, oldName string, nfd int, newName string, lerr func(error) error) error {
	if err := unix.Linkat(ofd, oldName, nfd, newName, 0); err != nil {
		return lerr(err)
	}
	if err := unix.Unlinkat(ofd, oldName, 0); err != nil {
		return lerr(err)
	}
	return nil
}

// removeAt unlinks a non-directory relative to a parent opened without
// following symlinks.
func removeAt(path string) error {
	dir, name, err := splitPath(path)
	if err != nil {
		return err
	}
	d, err := openDir(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := unix.Unlinkat(int(d.Fd()), name, 0); err != nil {
		return &os.PathError{Op: "remove", Path: path, Err: err}
	}
	return nil
}

// lstatAt stats path without following a symlink in any component.
func lstatAt(path string) (unix.Stat_t, error) {
	var st unix.Stat_t
	dir, name, err := splitPath(path)
	if err != nil {
		return st, err
	}
	d, err := openDir(dir)
	if err != nil {
		return st, err
	}
	defer d.Close()
	if err := unix.Fstatat(int(d.Fd()), name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return st, &os.PathError{Op: "lstat", Path: path, Err: err}
	}
	return st, nil
}

func fstat(f *os.File) (unix.Stat_t, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return st, &os.PathError{Op: "fstat", Path: f.Name(), Err: err}
	}
	return st, nil
}

func isRegular(st unix.Stat_t) bool { return st.Mode&unix.S_IFMT == unix.S_IFREG }
func isDir(st unix.Stat_t) bool     { return st.Mode&unix.S_IFMT == unix.S_IFDIR }

// ReadLimited reads what is left of the regular file f, whose size a stat
// just gave, up to limit+1 bytes (a longer result means the file is over
// limit). io.ReadAll would grow its buffer from 512 bytes, four reads for
// a manifest; a buffer of the stat's size takes one, and a short read of
// exactly that size is the file's end (issue 14).
func ReadLimited(f *os.File, size, limit int64) ([]byte, error) {
	want := min(max(size, 0), limit) + 1
	b := make([]byte, 0, want)
	for {
		n, err := f.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		switch {
		case err == io.EOF:
			return b, nil
		case err != nil:
			return b, err
		case int64(len(b)) > limit:
			return b, nil
		case int64(len(b)) == size && len(b) < cap(b):
			return b, nil // short of the buffer: at the end
		case len(b) == cap(b):
			b = append(b, 0)[:len(b)] // grown since the stat: read on
		}
	}
}
