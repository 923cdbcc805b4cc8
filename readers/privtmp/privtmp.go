package privtmp

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"pisess/writers/durable"
)

// Prefixes of the directories pisess makes with Make: only names that
// start with one of them are ever swept.
const (
	PrefixSQLite = "pisess-sqlite-"
	PrefixDryRun = "pisess-dry-run-"
)

// LockName is the lock file inside each directory.
const LockName = ".pisess-owner"

// lockless is how long a directory without a lock file (made by a pisess
// from before the lock file, or killed between its mkdir and its lock)
// must have been left unchanged before Sweep takes it as dead.
const lockless = 24 * time.Hour

// Dir is a private temporary directory this process holds.
type Dir struct {
	// Path is the directory.
	Path string
	lock *os.File
}

// sweepOnce runs Sweep once per process and temporary directory, before
// the first directory Make makes there.
var sweepOnce = struct {
	sync.Mutex
	done map[string]bool
}{done: map[string]bool{}}

// Make creates a new private directory <tmpRoot>/<prefix><random> (tmpRoot
// "" is os.TempDir()) and takes its lock. The first Make of a process in a
// temporary directory first removes the dead directories of earlier
// processes there (Sweep); a failed sweep is not Make's failure.
func Make(tmpRoot, prefix string) (*Dir, error) {
	if !strings.HasPrefix(prefix, "pisess-") {
		return nil, fmt.Errorf("privtmp: prefix %q does not start with pisess-", prefix)
	}
	if tmpRoot == "" {
		tmpRoot = os.TempDir()
	}
	sweepOnce.Lock()
	if !sweepOnce.done[tmpRoot] {
		sweepOnce.done[tmpRoot] = true
		_, _ = Sweep(tmpRoot, PrefixSQLite, PrefixDryRun)
	}
	sweepOnce.Unlock()
	for try := 0; ; try++ {
		d, err := make1(tmpRoot, prefix)
		if !errors.Is(err, errSwept) || try == 2 {
			return d, err
		}
	}
}

// errSwept says another process's Sweep took a directory Make had just
// created, before its lock was taken: Make makes another.
var errSwept = errors.New("privtmp: swept before it was locked")

func make1(tmpRoot, prefix string) (*Dir, error) {
	dir, err := os.MkdirTemp(tmpRoot, prefix)
	if err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(dir, LockName), os.O_RDWR|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		durable.OS.RemoveAll(dir)
		return nil, fmt.Errorf("lock %s: %w", dir, err)
	}
	// A sweep that found the lock file before this flock may hold it and
	// be removing the directory: wait for it, then look whether the lock
	// file is still there.
	var st unix.Stat_t
	if err = unix.Flock(int(f.Fd()), unix.LOCK_EX); err == nil {
		if err = unix.Fstat(int(f.Fd()), &st); err == nil && st.Nlink == 0 {
			err = errSwept
		}
	}
	if err != nil {
		f.Close()
		if !errors.Is(err, errSwept) {
			durable.OS.RemoveAll(dir)
			err = fmt.Errorf("lock %s: %w", dir, err)
		}
		return nil, err
	}
	return &Dir{Path: dir, lock: f}, nil
}

// Remove removes the directory and lets its lock go.
func (d *Dir) Remove() error {
	if d == nil || d.lock == nil {
		return nil
	}
	err := durable.OS.RemoveAll(d.Path)
	d.lock.Close() // after the removal: a sweep never sees it unlocked
	d.lock = nil
	return err
}

// Sweep removes the dead directories of the given prefixes in tmpRoot
// ("" is os.TempDir()): those of the running user, real directories, whose
// lock no process holds (or that have no lock file and were left unchanged
// for a day). It returns what it removed; an error is the first it met,
// the sweep goes on past it.
func Sweep(tmpRoot string, prefixes ...string) ([]string, error) {
	if tmpRoot == "" {
		tmpRoot = os.TempDir()
	}
	root, err := os.OpenFile(tmpRoot, os.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	var removed []string
	var first error
	for {
		names, err := root.Readdirnames(256)
		for _, name := range names {
			if !hasPrefix(name, prefixes) {
				continue
			}
			ok, err := sweepOne(int(root.Fd()), name)
			if err != nil && first == nil {
				first = fmt.Errorf("sweep %s: %w", filepath.Join(tmpRoot, name), err)
			}
			if ok {
				removed = append(removed, filepath.Join(tmpRoot, name))
			}
		}
		if errors.Is(err, io.EOF) || len(names) == 0 {
			break
		}
		if err != nil {
			return removed, err
		}
	}
	return removed, first
}

func hasPrefix(name string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(name, p) && strings.HasPrefix(p, "pisess-") {
			return true
		}
	}
	return false
}

// sweepOne removes the directory name of the directory open at parent when
// it is dead; it reports whether it did.
func sweepOne(parent int, name string) (bool, error) {
	fd, err := unix.Openat(parent, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EACCES) {
			return false, nil // a symlink, a file, gone, another user's: not ours
		}
		return false, err
	}
	d := os.NewFile(uintptr(fd), name) // closed once, by d
	defer d.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return false, err
	}
	if int(st.Uid) != os.Geteuid() {
		return false, nil
	}
	lock, err := unix.Openat(fd, LockName, unix.O_RDWR|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	switch {
	case errors.Is(err, unix.ENOENT):
		if time.Since(time.Unix(st.Mtim.Unix())) < lockless {
			return false, nil
		}
	case err != nil:
		return false, err
	default:
		defer unix.Close(lock)
		if err := unix.Flock(lock, unix.LOCK_EX|unix.LOCK_NB); err != nil {
			if errors.Is(err, unix.EWOULDBLOCK) {
				return false, nil // its holder is alive
			}
			return false, err
		}
		// Held now by this sweep: no other sweep removes it meanwhile,
		// and a holder never comes back to a directory it let go.
	}
	// Relative to the descriptor: a name swapped for a symlink meanwhile
	// is unlinked, never followed.
	if err := durable.RemoveContents(d); err != nil {
		return false, err
	}
	if err := unix.Unlinkat(parent, name, unix.AT_REMOVEDIR); err != nil && !errors.Is(err, unix.ENOENT) {
		return false, err
	}
	return true, nil
}
