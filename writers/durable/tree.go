package durable

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// SyncDir fsyncs the directory path, making the creation, removal or
// renaming of its entries durable. path is opened without following
// symlinks.
func (o Ops) SyncDir(path string) error {
	if o.DeferSync {
		return nil // nothing to sync: the caller seals (and saves the open)
	}
	d, err := o.openFile(path, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return fmt.Errorf("sync dir: %w", err)
	}
	defer d.Close()
	if err := o.sync(d); err != nil {
		return fmt.Errorf("sync dir %s: %w", path, err)
	}
	return nil
}

// SealTree makes everything written under root durable with one call:
// syncfs(2) on root's filesystem, which writes back every dirty file and
// directory of it (and reports their writeback errors, Linux 5.8 and
// later). It is how a staging store written with DeferSync is sealed:
// one call in place of an fsync per file and directory, at the price of
// also flushing whatever else is dirty on that filesystem. Where the
// system has no syncfs (macOS, FreeBSD: sys.go) it falls back to SyncTree,
// an fsync of every file and directory under root (each an F_FULLFSYNC on
// macOS); as with SyncTree, root's own entry in its parent is made durable
// by the rename that installs root, which fsyncs the parent.
func (o Ops) SealTree(root string) error {
	_, _, err := o.SealFilesystem(root)
	return err
}

// SealFilesystem is SealTree that also tells what it made durable: with
// whole set, every file of the filesystem dev as it was when the call
// began (syncfs), so that a caller need not fsync another file of that
// filesystem written before; else only root's tree (the fallback).
func (o Ops) SealFilesystem(root string) (dev uint64, whole bool, err error) {
	// A seal opened now covers what was written before only while no one
	// else has seen a writeback error of it (seal.go): callers that can
	// open their Seal before writing do, and call SealWith.
	s, err := o.OpenSeal(root)
	if err != nil {
		return 0, false, err
	}
	defer s.Close()
	return o.SealWith(s, root)
}

// SyncTree fsyncs every regular file and directory under root, each
// directory after everything in it and root last: the one durable seal of a
// staging store, written without per-file fsyncs, before the rename that
// installs it (STYLE.md §5). It walks by descriptor without following
// symlinks and refuses a symlink or special file anywhere, since a store
// never holds one. The parent of root is not synced: the rename that
// follows syncs it.
func (o Ops) SyncTree(root string) error {
	d, err := o.openFile(root, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return fmt.Errorf("sync tree: %w", err)
	}
	defer d.Close()
	if err := o.syncTree(d); err != nil {
		return fmt.Errorf("sync tree %s: %w", root, err)
	}
	return nil
}

func (o Ops) syncTree(d *os.File) error {
	names, err := d.Readdirnames(-1)
	if err != nil {
		return err
	}
	sort.Strings(names)
	dfd := int(d.Fd())
	for _, name := range names {
		p := filepath.Join(d.Name(), name)
		var st unix.Stat_t
		if err := unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return &os.PathError{Op: "lstat", Path: p, Err: err}
		}
		var flags int
		switch {
		case isDir(st):
			flags = unix.O_RDONLY | unix.O_DIRECTORY
		case isRegular(st):
			flags = unix.O_RDONLY | unix.O_NONBLOCK
		default:
			return &os.PathError{Op: "sync", Path: p, Err: errNotRegular}
		}
		fd, err := unix.Openat(dfd, name, flags|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return &os.PathError{Op: "open", Path: p, Err: err}
		}
		child := os.NewFile(uintptr(fd), p)
		if isDir(st) {
			err = o.syncTree(child)
		} else if err = requireRegular(child); err == nil {
			err = o.sync(child)
		}
		child.Close()
		if err != nil {
			return err
		}
	}
	return o.sync(d)
}

// Rename renames oldpath to newpath (a file, or a directory over an absent
// or empty one) and then fsyncs the parent of newpath and, when different,
// that of oldpath: a rename is durable only once both directories are.
// Parents are resolved without following symlinks. Like rename(2) it
// replaces an existing file at newpath; use [Ops.RenameNoReplace] where
// something there must be kept.
func (o Ops) Rename(oldpath, newpath string) error {
	return o.rename(oldpath, newpath, false)
}

// RenameNoReplace is [Ops.Rename] with renameat2(RENAME_NOREPLACE): it
// fails with an error matching os.ErrExist rather than replace newpath. The
// cutover and the displacement of a sidecar into a backup use it, so that
// an unexpected sibling is never silently destroyed.
func (o Ops) RenameNoReplace(oldpath, newpath string) error {
	return o.rename(oldpath, newpath, true)
}

func (o Ops) rename(oldpath, newpath string, noReplace bool) error {
	oldDir, _, err := splitPath(oldpath)
	if err != nil {
		return err
	}
	newDir, _, err := splitPath(newpath)
	if err != nil {
		return err
	}
	Failpoint(fpBeforeRename)
	if err := o.renameAt(oldpath, newpath, noReplace); err != nil {
		return err
	}
	Failpoint(fpAfterRename)
	if err := o.SyncDir(newDir); err != nil {
		return fmt.Errorf("rename %s: %w", newpath, err)
	}
	if filepath.Clean(oldDir) != filepath.Clean(newDir) {
		if err := o.SyncDir(oldDir); err != nil {
			return fmt.Errorf("rename %s: %w", oldpath, err)
		}
	}
	return nil
}

// MkdirPrivate makes the directory path with mode 0700, chmod-ed explicitly
// whatever the umask (pi refuses a store directory with any group or other
// bit), and fsyncs its parent when it created it so that files later made
// durable inside it cannot lose their directory. An existing real
// directory is accepted and set to 0700; a symlink anywhere is refused.
// Only the last component is created. Running as root, a directory it
// creates belongs to the owner of its parent from the start (see
// inheritOwner in owner.go).
func (o Ops) MkdirPrivate(path string) error {
	dir, name, err := splitPath(path)
	if err != nil {
		return fmt.Errorf("mkdir: %w", err)
	}
	return o.MkdirPrivateIn(dir, name)
}

// MkdirPrivateIn is MkdirPrivate for each of names inside the directory
// dir, opened once for all of them (a store's five directories are made
// in its root: issue 14, fewer path walks per session), and synced once
// when any was created.
func (o Ops) MkdirPrivateIn(dir string, names ...string) error {
	parent, err := o.openFile(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return fmt.Errorf("mkdir in %s: %w", dir, err)
	}
	defer parent.Close()
	createdAny := false
	for _, name := range names {
		created, err := mkdirPrivateAt(parent, filepath.Join(dir, name), name)
		if err != nil {
			return err
		}
		createdAny = createdAny || created
	}
	if createdAny {
		if err := o.sync(parent); err != nil {
			return fmt.Errorf("mkdir in %s: %w", dir, err)
		}
	}
	return nil
}

// mkdirPrivateAt makes name (path, for errors) in the open directory
// parent, or accepts the real directory there, with mode 0700 and, running
// as root, parent's owner when it made it.
func mkdirPrivateAt(parent *os.File, path, name string) (created bool, err error) {
	if name == "" || name == "." || name == ".." || strings.Contains(name, "/") {
		return false, &os.PathError{Op: "mkdir", Path: path, Err: unix.EINVAL}
	}
	pfd := int(parent.Fd())
	err = unix.Mkdirat(pfd, name, 0o700)
	created = err == nil
	if err != nil && err != unix.EEXIST {
		return false, &os.PathError{Op: "mkdir", Path: path, Err: err}
	}
	fd, err := unix.Openat(pfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return false, &os.PathError{Op: "mkdir", Path: path, Err: err}
	}
	d := os.NewFile(uintptr(fd), path)
	defer d.Close()
	if err := fchmod(d, 0o700); err != nil {
		return false, err
	}
	if created {
		if err := inheritOwnerAt(parent, d); err != nil {
			return false, err
		}
	}
	return created, nil
}

// HasSymlinkAncestor reports the first directory on the way to path that
// is a symlink, checking every component but the last (lstat the last
// yourself, or let [Ops.OpenNoFollow] refuse it). pi opens sidecars with no
// symlink in any component, so a session under a symlinked directory (a
// symlinked ~/.pi, say) can never use one: discovery refuses it with this
// component as the reason. The path is not cleaned first: "a/b/../c" checks
// a/b, as the kernel would resolve it. Components are checked until one
// does not exist; a relative path is checked from the working directory on.
func (o Ops) HasSymlinkAncestor(path string) (string, bool, error) {
	var parts []string
	for _, c := range strings.Split(path, "/") {
		if c != "" && c != "." {
			parts = append(parts, c)
		}
	}
	if len(parts) == 0 {
		return "", false, nil
	}
	cur := ""
	if filepath.IsAbs(path) {
		cur = "/"
	}
	for _, c := range parts[:len(parts)-1] {
		if cur == "" || cur == "/" {
			cur += c
		} else {
			cur += "/" + c
		}
		fi, err := os.Lstat(cur)
		if os.IsNotExist(err) {
			return "", false, nil
		}
		if err != nil {
			return "", false, err
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			return cur, true, nil
		}
	}
	return "", false, nil
}

// SyncGroup lets the concurrent jobs of a run share their seals (group
// commit): a syncfs that starts after a job's writes covers them, so a
// job that finds one running waits for the next, which one job runs for
// every job waiting. Put one in Ops.Seals for a run; the zero value is
// ready.
type SyncGroup struct {
	// Linger is how long a job that would start a syncfs first waits for
	// others to join it (PostgreSQL's commit_delay): fewer syncs, each
	// covering more jobs, and fewer journal commits in the way of the
	// jobs still writing. Zero starts at once.
	Linger time.Duration
	// Others, when set, tells whether another job may still come to
	// share the sync: without one, nothing is worth waiting for.
	Others func() bool

	mu   sync.Mutex
	devs map[uint64]*devSyncs
}

// devSyncs counts the syncs of one filesystem.
type devSyncs struct {
	cond      *sync.Cond
	gathering bool // a job lingers before it starts the next sync
	running   bool
	started   uint64 // syncs begun
	done      uint64 // the last sync finished
	failed    uint64 // the last sync that failed, with err
	err       error
	// unsupported: the sync said ENOSYS (no syncfs on this system), so
	// the callers seal on their own at once rather than linger for it.
	unsupported bool
	// waiting are the seals of the callers of syncSeal, each with the
	// sync that covers it: one whose sync is done may return, and its
	// descriptor be closed, before it leaves the map.
	waiting map[*Seal]uint64
}

// sync returns once a call of fn that began after sync was called has
// finished, running it itself when no other caller does; its error is that
// of any such call that failed (conservatively: a later success may have
// written back what a failure could not).
func (g *SyncGroup) sync(dev uint64, fn func() error) error {
	return g.syncWith(dev, nil, func(*devSyncs) func() error { return fn })
}

// syncSeal is sync for the seal s: the syncfs that covers the callers
// waiting is made on the oldest of their seals (oldest), whose descriptor
// was opened before any of their writes, so that it reports the writeback
// error of any of them (Seal). A seal that an earlier sync covered is not
// a candidate: its caller may be returning, and closing it, meanwhile
// (the sync failed with EBADF on another session's seal under --jobs 2).
func (g *SyncGroup) syncSeal(dev uint64, s *Seal, syncfs func(*os.File) error) error {
	return g.syncWith(dev, s, func(d *devSyncs) func() error {
		first := s
		for w, need := range d.waiting {
			if need > d.done && w.seq < first.seq {
				first = w
			}
		}
		return func() error { return syncfs(first.f) }
	})
}

// syncWith is sync with the function run chosen by pick when a sync
// starts (g.mu held); s, when set, waits in d.waiting until covered.
func (g *SyncGroup) syncWith(dev uint64, s *Seal, pick func(d *devSyncs) func() error) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.devs == nil {
		g.devs = map[uint64]*devSyncs{}
	}
	d := g.devs[dev]
	if d == nil {
		d = &devSyncs{cond: sync.NewCond(&g.mu), waiting: map[*Seal]uint64{}}
		g.devs[dev] = d
	}
	if d.unsupported {
		return d.err // the system has no such sync: nothing to wait for
	}
	need := d.started + 1 // one running now began before this call
	if s != nil {
		// Its descriptor stays open while it waits: a sync started
		// meanwhile may be made on it.
		d.waiting[s] = need
		defer delete(d.waiting, s)
	}
	for d.done < need {
		if d.running || d.gathering {
			d.cond.Wait()
			continue
		}
		if g.Linger > 0 && (g.Others == nil || g.Others()) {
			d.gathering = true
			g.mu.Unlock()
			time.Sleep(g.Linger)
			g.mu.Lock()
			d.gathering = false
		}
		d.running = true
		d.started++
		n := d.started
		fn := pick(d)
		g.mu.Unlock()
		err := fn()
		g.mu.Lock()
		d.running, d.done = false, n
		if err != nil {
			d.failed, d.err = n, err
			d.unsupported = errors.Is(err, unix.ENOSYS)
		}
		d.cond.Broadcast()
	}
	if d.failed >= need {
		return d.err
	}
	return nil
}
