package durable

import (
	"io"
	"os"
	"path/filepath"

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
	// Sync fsyncs f, a file or a directory (F_FULLFSYNC on macOS).
	Sync func(f *os.File) error
	// RenameAt renames oldpath to newpath without any fsync; with
	// noReplace it fails with EEXIST rather than replace newpath.
	RenameAt func(oldpath, newpath string, noReplace bool) error
	// Remove unlinks the non-directory path.
	Remove func(path string) error
	// SyncFS flushes the whole filesystem that holds the open f
	// (syncfs(2)): the one seal of a staging store written with
	// DeferSync (see [Ops.SealTree]). Where the system has none (macOS,
	// FreeBSD) it says ENOSYS, and the seal fsyncs the tree instead.
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
// RESOLVE_NO_MAGICLINKS); elsewhere, and where openat2 is missing (ENOSYS,
// kernels before 5.6), it walks the path one component at a time with
// O_NOFOLLOW beneath the directory opened last, refusing "..", as the
// reference does (sys.go). A symlink met on the way is reported as
// ELOOP: test with errors.Is(err, syscall.ELOOP), and use
// [Ops.HasSymlinkAncestor] to name the component.
//
// perm matters only with O_CREAT and is subject to the umask: callers that
// create files use the helpers below, which chmod explicitly.
func (o Ops) OpenNoFollow(path string, flag int, perm os.FileMode) (*os.File, error) {
	return o.openFile(path, flag, perm)
}

func openNoFollow(path string, flag int, perm os.FileMode) (*os.File, error) {
	return native{}.open(path, flag, perm)
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

func osSync(f *os.File) error { return native{}.fsync(f) }

func osSyncFS(f *os.File) error { return native{}.syncFS(f) }

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
// symlinks, so neither side can be redirected through a symlinked ancestor;
// the rename itself is the platform's (sys.go): with noReplace it never
// replaces newpath, on every system and filesystem.
func renameAt(oldpath, newpath string, noReplace bool) error {
	return renameAtOn(native{}, oldpath, newpath, noReplace)
}

// renameAtOn is renameAt on the platform p (tests run every platform the
// system has).
func renameAtOn(p platform, oldpath, newpath string, noReplace bool) error {
	lerr := func(err error) error { return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: err} }
	openDir := func(dir string) (*os.File, error) { return p.open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0) }
	od, oldName, nd, newName, err := openParents(openDir, oldpath, newpath, lerr)
	if err != nil {
		return err
	}
	defer od.Close()
	defer nd.Close()
	if err := p.rename(int(od.Fd()), oldName, int(nd.Fd()), newName, noReplace); err != nil {
		return lerr(err)
	}
	return nil
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
