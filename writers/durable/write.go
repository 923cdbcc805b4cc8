package durable

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// TempName is the name under which a file called name is prepared in a
// store's tmp/ ("manifest.json" → "manifest.json.tmp"). Naming the temp
// after its destination makes a leftover from a crash recognisable as ours,
// which is what lets the next write remove it safely.
func TempName(name string) string { return name + ".tmp" }

// WriteFileAtomic replaces dir/name with data in the durable order of
// STYLE.md §5: it writes tmpDir/TempName(name) (O_EXCL|O_NOFOLLOW, 0600,
// then fchmod to perm whatever the umask), fsyncs and closes it, renames it
// over dir/name (by an exchange where the filesystem has one: see
// replaceByExchange) and fsyncs dir, then tmpDir when it differs (the
// rename changed both). tmpDir must be on the same filesystem as dir: the
// store's tmp/.
//
// A leftover temp of the same name is removed first when it is a regular
// file (a crash of an earlier write left it; nothing else uses that name);
// anything else there is refused. dir/name must be absent or a regular file:
// a symlink, directory or special file there is refused, never replaced.
//
// On an error before the rename the temp is removed and dir/name is
// untouched. An error after the rename (a failed directory fsync) means the
// new content is in place but may not survive a power loss; it is still
// reported, and the caller must treat the write as failed.
func (o Ops) WriteFileAtomic(dir, tmpDir, name string, data []byte, perm os.FileMode) error {
	return o.publish(dir, tmpDir, name, data, perm, false)
}

// CreateNoReplace publishes dir/name like [Ops.WriteFileAtomic] with mode
// 0600, except that it never replaces an existing dir/name: the rename is
// renameat2(RENAME_NOREPLACE), or link(2) then unlink of the temp on
// filesystems without it. Checkpoints and the rollback intent are immutable
// once published, as in the reference; an existing target yields an error
// for which errors.Is(err, os.ErrExist) holds, and the temp is removed.
func (o Ops) CreateNoReplace(dir, tmpDir, name string, data []byte) error {
	return o.publish(dir, tmpDir, name, data, 0o600, true)
}

func (o Ops) publish(dir, tmpDir, name string, data []byte, perm os.FileMode, noReplace bool) error {
	final := filepath.Join(dir, name)
	if name != filepath.Base(name) || name == "." || name == ".." {
		return fmt.Errorf("write %s: name must be a single path component", final)
	}
	if !noReplace {
		if err := checkReplaceable(final); err != nil {
			return fmt.Errorf("write %s: %w", final, err)
		}
	}
	tmp, err := o.writeTemp(tmpDir, name, data, perm)
	if err != nil {
		return fmt.Errorf("write %s: %w", final, err)
	}
	Failpoint(fpBeforeRename)
	if err := o.renameAt(tmp, final, noReplace); err != nil {
		_ = o.remove(tmp)
		return fmt.Errorf("publish %s: %w", final, err)
	}
	Failpoint(fpAfterRename)
	if err := o.SyncDir(dir); err != nil {
		return fmt.Errorf("publish %s: %w", final, err)
	}
	if filepath.Clean(tmpDir) != filepath.Clean(dir) {
		if err := o.SyncDir(tmpDir); err != nil {
			return fmt.Errorf("publish %s: %w", final, err)
		}
	}
	return nil
}

// checkReplaceable refuses to rename over anything but a regular file: a
// rename over a symlink would not write through it, but a store never holds
// one, so its presence means something is wrong and must be looked at.
func checkReplaceable(path string) error {
	// A plain lstat: the rename that follows opens the parents refusing
	// symlinks, so a symlinked ancestor fails it anyway.
	var st unix.Stat_t
	err := unix.Lstat(path, &st)
	if err != nil {
		err = &os.PathError{Op: "lstat", Path: path, Err: err}
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return err
	case !isRegular(st):
		return &os.PathError{Op: "replace", Path: path, Err: errNotRegular}
	}
	return nil
}

var errNotRegular = errors.New("not a regular file")

// writeTemp writes data to tmpDir/TempName(name), fsynced and closed, and
// returns its path; on error it removes what it created.
func (o Ops) writeTemp(tmpDir, name string, data []byte, perm os.FileMode) (string, error) {
	tmp := filepath.Join(tmpDir, TempName(name))
	f, err := o.createExclusive(tmp, unix.O_WRONLY, true)
	if err != nil {
		return "", err
	}
	if err := o.fillTemp(f, data, perm); err != nil {
		f.Close()
		_ = o.remove(tmp)
		return "", err
	}
	return tmp, nil
}

func (o Ops) fillTemp(f *os.File, data []byte, perm os.FileMode) error {
	if err := fchmod(f, perm); err != nil {
		return err
	}
	if _, err := o.writeAll(f, data); err != nil {
		return err
	}
	Failpoint(fpBeforeSync)
	if err := o.sync(f); err != nil {
		return err
	}
	// Close before rename (restic): a close error can report a failed
	// write-back on some filesystems.
	return f.Close()
}

// createExclusive creates path with flag|O_CREAT|O_EXCL and mode 0600,
// chmod-ed explicitly so the umask cannot change it, and owned like its
// directory when running as root (see inheritOwner). With removeLeftover,
// an existing regular file at path is first removed.
func (o Ops) createExclusive(path string, flag int, removeLeftover bool) (*os.File, error) {
	flag |= unix.O_CREAT | unix.O_EXCL
	f, err := o.openFile(path, flag, 0o600)
	if errors.Is(err, fs.ErrExist) && removeLeftover {
		st, serr := lstatAt(path)
		if serr != nil {
			return nil, serr
		}
		if !isRegular(st) {
			return nil, &os.PathError{Op: "remove leftover", Path: path, Err: errNotRegular}
		}
		if rerr := o.remove(path); rerr != nil {
			return nil, fmt.Errorf("remove leftover: %w", rerr)
		}
		f, err = o.openFile(path, flag, 0o600)
	}
	if err != nil {
		return nil, err
	}
	if err := fchmod(f, 0o600); err != nil {
		f.Close()
		return nil, err
	}
	if err := inheritOwner(f, path); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// openCreate opens path for writing, creating it (0600 whatever the umask)
// when absent; created tells which happened so the caller knows whether the
// directory needs an fsync. An existing path must be a regular file: it is
// opened O_NONBLOCK so that a FIFO planted there cannot hang us.
func (o Ops) openCreate(path string, flag int) (f *os.File, created bool, err error) {
	// The file usually exists (a journal, a ledger appended to): open it
	// first, and create it only when it is missing.
	for attempt := 0; attempt < 3; attempt++ {
		f, err = o.openFile(path, flag|unix.O_NONBLOCK, 0)
		if err == nil {
			if err := requireRegular(f); err != nil {
				f.Close()
				return nil, false, err
			}
			return f, false, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return nil, false, err
		}
		f, err = o.createExclusive(path, flag, false)
		if err == nil {
			return f, true, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return nil, false, err
		}
		// Created between the two opens: open it.
	}
	return nil, false, err
}

func requireRegular(f *os.File) error {
	st, err := fstat(f)
	if err != nil {
		return err
	}
	if !isRegular(st) {
		return &os.PathError{Op: "open", Path: f.Name(), Err: errNotRegular}
	}
	return nil
}

func fchmod(f *os.File, perm os.FileMode) error {
	if err := unix.Fchmod(int(f.Fd()), uint32(perm.Perm())); err != nil {
		return &os.PathError{Op: "chmod", Path: f.Name(), Err: err}
	}
	return nil
}

// WriteFileInPlace writes data to path without a rename, the way the
// reference writes source-state.json: create-exclusive when absent, else
// open the existing regular file (never through a symlink), set perm
// explicitly, write data over the file from its start, cut what is left
// of the old content after it, fsync the file and its directory.
//
// Not atomic: a crash part way leaves the new content's start followed by
// the old content's end (or, with a torn write, some of each). That is
// acceptable only for a document whose damage is itself a valid state (an
// unreadable source-state means "stale", FORMAT.md §8). The reference
// truncates first and then writes: the same damaged states, but cutting a
// file to nothing frees its blocks (on a file system mounted with discard,
// a synchronous discard each time: ~0.1 ms, three times per session a
// refresh continues in place).
func (o Ops) WriteFileInPlace(path string, data []byte, perm os.FileMode) error {
	f, _, err := o.openCreate(path, unix.O_WRONLY)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer f.Close()
	if err := fchmod(f, perm); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if _, err := o.writeAll(f, data); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	Failpoint(fpBeforeTrim)
	if err := unix.Ftruncate(int(f.Fd()), int64(len(data))); err != nil {
		return fmt.Errorf("write %s: cut the old content: %w", path, err)
	}
	Failpoint(fpBeforeSync)
	if err := o.sync(f); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	dir, _, _ := splitPath(path)
	if err := o.SyncDir(dir); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// AppendLine appends one whole line (ending in its only '\n') to path,
// creating it 0600 when absent, and fsyncs it before returning; when it
// created the file it also fsyncs the directory, so the new name survives a
// power loss too. A write that fails part way is cut back to where it
// started (best effort), so a full disk does not leave a torn last line in
// front of the next append. A failed fsync is not undone: what reached the
// disk is unknown, and readers treat a torn tail as torn.
//
// Appends are not serialised here: callers hold the store mutation lock or
// the tree lock.
func (o Ops) AppendLine(path string, line []byte) error {
	if len(line) == 0 || line[len(line)-1] != '\n' || bytes.IndexByte(line[:len(line)-1], '\n') >= 0 {
		return fmt.Errorf("append %s: not one newline-terminated line", path)
	}
	return o.appendLines(path, line)
}

// AppendLines is AppendLine for several whole lines at once (lines ends
// with '\n'): one open, write and fsync for all of them, and a write that
// fails part way is cut back to before the first.
func (o Ops) AppendLines(path string, lines []byte) error {
	if len(lines) == 0 || lines[len(lines)-1] != '\n' {
		return fmt.Errorf("append %s: not newline-terminated lines", path)
	}
	return o.appendLines(path, lines)
}

func (o Ops) appendLines(path string, lines []byte) error {
	f, created, err := o.openCreate(path, unix.O_WRONLY|unix.O_APPEND)
	if err != nil {
		return fmt.Errorf("append %s: %w", path, err)
	}
	defer f.Close()
	st, err := fstat(f)
	if err != nil {
		return fmt.Errorf("append %s: %w", path, err)
	}
	if err := o.appendWhole(f, lines, st.Size); err != nil {
		return fmt.Errorf("append %s: %w", path, err)
	}
	Failpoint(fpBeforeSync)
	if err := o.sync(f); err != nil {
		return fmt.Errorf("append %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("append %s: %w", path, err)
	}
	if created {
		dir, _, _ := splitPath(path)
		if err := o.SyncDir(dir); err != nil {
			return fmt.Errorf("append %s: %w", path, err)
		}
	}
	return nil
}

// File is a new private file being filled in a staging store. Its writes go
// through the Ops write primitive (so faults and PISESS_KILL_AFTER_BYTES
// reach them); it has no Sync on purpose: a staging store is sealed once,
// by [Ops.SyncTree], before it is renamed into place.
type File struct {
	f *os.File
	o Ops
}

// CreatePrivate creates path exclusively (O_EXCL|O_NOFOLLOW) with mode 0600
// set explicitly, for the files of a staging store (segments, index). It
// exists so that no package above this one needs to chmod.
func (o Ops) CreatePrivate(path string) (*File, error) {
	f, err := o.createExclusive(path, unix.O_WRONLY, false)
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", path, err)
	}
	return &File{f: f, o: o}, nil
}

// OpenAppendPrivate opens the existing store file path (a segment, the
// index of an installed store) to append to it, and returns its size. It
// must be a regular file with one link: pisess, root included, never
// writes through a second name (ErrMultiLink) that could lead outside the
// tree. Like CreatePrivate's, its writes are not synced: the caller seals.
func (o Ops) OpenAppendPrivate(path string) (*File, int64, error) {
	f, err := o.openFile(path, unix.O_WRONLY|unix.O_APPEND|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, 0, fmt.Errorf("open %s: %w", path, err)
	}
	st, err := fstat(f)
	switch {
	case err != nil:
	case !isRegular(st):
		err = &os.PathError{Op: "open", Path: path, Err: errNotRegular}
	case st.Nlink != 1:
		err = &os.PathError{Op: "open", Path: path, Err: fmt.Errorf("%w (%d)", ErrMultiLink, st.Nlink)}
	}
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	return &File{f: f, o: o}, st.Size, nil
}

// Write writes all of b or returns an error.
func (f *File) Write(b []byte) (int, error) { return f.o.writeAll(f.f, b) }

// Name is the path the file was created with.
func (f *File) Name() string { return f.f.Name() }

// Close closes the file; its error must be checked like a write's.
func (f *File) Close() error { return f.f.Close() }

// Truncate cuts the regular file path down to size and fsyncs it: the one
// repair that removes bytes from a store file (a torn tail of the last
// segment, FORMAT.md §2). It refuses to grow a file, which would append
// zeros rather than cut.
func (o Ops) Truncate(path string, size int64) error {
	f, err := o.openFile(path, unix.O_WRONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return fmt.Errorf("truncate %s: %w", path, err)
	}
	defer f.Close()
	st, err := fstat(f)
	if err != nil {
		return fmt.Errorf("truncate %s: %w", path, err)
	}
	if !isRegular(st) {
		return fmt.Errorf("truncate %s: %w", path, errNotRegular)
	}
	if size < 0 || size > st.Size {
		return fmt.Errorf("truncate %s: size %d outside 0..%d", path, size, st.Size)
	}
	if err := unix.Ftruncate(int(f.Fd()), size); err != nil {
		return fmt.Errorf("truncate %s: %w", path, err)
	}
	if err := o.sync(f); err != nil {
		return fmt.Errorf("truncate %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("truncate %s: %w", path, err)
	}
	return nil
}

// Appender appends whole lines to one file it keeps open: AppendLines
// without the open, fstat and close of every append (a run appends to its
// tree's journal several times per session; issue 14). The caller checks,
// before each append, that the path still names the file it holds.
type Appender struct {
	o Ops
	f *os.File
}

// OpenAppender opens the existing regular file path for appending, without
// following a symlink in any component, and returns its state.
func (o Ops) OpenAppender(path string) (*Appender, unix.Stat_t, error) {
	f, err := o.openFile(path, unix.O_WRONLY|unix.O_APPEND|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, unix.Stat_t{}, fmt.Errorf("append %s: %w", path, err)
	}
	st, err := fstat(f)
	if err == nil && !isRegular(st) {
		err = &os.PathError{Op: "append", Path: path, Err: errNotRegular}
	}
	if err != nil {
		f.Close()
		return nil, unix.Stat_t{}, err
	}
	return &Appender{o: o, f: f}, st, nil
}

// Append writes lines (whole lines, ending with '\n') at the end of the
// file, whose length before is size: a write that fails part way is cut
// back to it. It does not sync (Sync), and returns the file's state after.
func (a *Appender) Append(lines []byte, size int64) (unix.Stat_t, error) {
	if len(lines) == 0 || lines[len(lines)-1] != '\n' {
		return unix.Stat_t{}, fmt.Errorf("append %s: not newline-terminated lines", a.f.Name())
	}
	if err := a.o.appendWhole(a.f, lines, size); err != nil {
		return unix.Stat_t{}, fmt.Errorf("append %s: %w", a.f.Name(), err)
	}
	return fstat(a.f)
}

// appendWhole writes lines to f, opened for appending, whose length before
// was size: a write that fails part way is cut back to it, so that no torn
// line is left (appendLines, Appender.Append).
func (o Ops) appendWhole(f *os.File, lines []byte, size int64) error {
	if n, err := o.writeAll(f, lines); err != nil {
		if n > 0 {
			_ = unix.Ftruncate(int(f.Fd()), size)
		}
		return err
	}
	return nil
}

// Sync fsyncs the file (nothing with DeferSync).
func (a *Appender) Sync() error {
	Failpoint(fpBeforeSync)
	if err := a.o.sync(a.f); err != nil {
		return fmt.Errorf("append %s: %w", a.f.Name(), err)
	}
	return nil
}

// Close closes the file.
func (a *Appender) Close() error { return a.f.Close() }
