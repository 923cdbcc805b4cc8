package upgrade

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"pisess/writers/durable"
)

// The failpoints of an upgrade, in the order they are passed.
var (
	FailpointBeforeQuarantine = durable.Register("upgrade.before-quarantine") // pass 1 done; nothing written yet
	FailpointAfterQuarantine  = durable.Register("upgrade.after-quarantine")  // original durable in the quarantine, temp sealed
	FailpointBeforeJournal    = durable.Register("upgrade.before-journal")    // fingerprint checked, note not yet recorded
	FailpointAfterJournal     = durable.Register("upgrade.after-journal")     // note recorded, original still in place
	FailpointBeforeRename     = durable.Register("upgrade.before-rename")     // about to rename the temp over the original
	FailpointAfterRename      = durable.Register("upgrade.after-rename")      // renamed and directory fsynced
)

// TempInfix and TempSuffix name the temp file an upgrade writes beside
// the session: <file>.upgrade.<32 hex>.tmp. A leftover (a run killed
// before its rename) is never a session (discovery looks at .jsonl only)
// and holds nothing the original does not.
const (
	TempInfix  = ".upgrade."
	TempSuffix = ".tmp"
)

// RestoreInfix names the temp a restore writes (see Upgrade):
// <file>.restore.<32 hex>.tmp. Unlike an upgrade's temp it may hold the
// only copy of a concurrent writer's bytes, so it is never removed
// automatically.
const RestoreInfix = ".restore."

// TempPath returns the temp file of an upgrade of path.
func TempPath(path, id string) string { return path + TempInfix + id + TempSuffix }

// IsTemp reports whether name (a base name) is the temp file of an upgrade
// of the file named session.
func IsTemp(session, name string) bool {
	id, ok := strings.CutPrefix(name, session+TempInfix)
	if !ok {
		return false
	}
	id, ok = strings.CutSuffix(id, TempSuffix)
	if !ok || len(id) != 32 {
		return false
	}
	for _, c := range id {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// removeLeftovers removes the temps of earlier upgrades of path that were
// killed before their rename (regular files only). Such a temp is never a
// session's only copy of anything: until the rename the original is in
// place, and the rename consumes the name. It returns how many it removed.
func removeLeftovers(ops durable.Ops, path string) (int, error) {
	dir, base := filepath.Split(path)
	entries, err := os.ReadDir(filepath.Clean(dir))
	if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range entries {
		if !e.Type().IsRegular() || !IsTemp(base, e.Name()) {
			continue
		}
		if err := removeFile(ops, filepath.Join(dir, e.Name())); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// The helpers below do, with durable's exported operations, what
// durable's own WriteFileAtomic does for a whole []byte, for files that
// are streamed: durable.File has no Sync (a staging store is sealed once
// by SyncTree), so a streamed file is closed, reopened and fsynced; fsync
// on any descriptor of an inode makes its data durable on Linux.

// sealFile gives the closed file path the owner uid:gid (when root) and
// then the mode perm (after the chown, which may clear set-id bits), and
// fsyncs it.
func sealFile(ops durable.Ops, path string, perm os.FileMode, uid, gid int) error {
	if err := ops.ChownIfRoot(path, uid, gid); err != nil {
		return err
	}
	f, err := ops.OpenNoFollow(path, unix.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Chmod(perm); err != nil {
		return err
	}
	if err := syncOf(ops)(f); err != nil {
		return fmt.Errorf("fsync %s: %w", path, err)
	}
	return f.Close()
}

func syncOf(ops durable.Ops) func(*os.File) error {
	if ops.Sync != nil {
		return ops.Sync
	}
	return durable.OS.Sync
}

func removeFile(ops durable.Ops, path string) error {
	if ops.Remove != nil {
		return ops.Remove(path)
	}
	return durable.OS.Remove(path)
}

// mkdirBelow makes every missing directory from base (which exists) down
// to dir, each 0700 (durable.MkdirPrivate). The first level below base
// (the tree's .pisess/) is owned like base, as the journal leaves it;
// deeper directories it creates are given to uid:gid (the session's owner)
// when running as root.
func mkdirBelow(ops durable.Ops, base, dir string, uid, gid int) error {
	rel, err := filepath.Rel(base, dir)
	if err != nil || !filepath.IsLocal(rel) {
		return fmt.Errorf("mkdir %s: not below %s", dir, base)
	}
	p := base
	for i, c := range strings.Split(rel, string(filepath.Separator)) {
		p = filepath.Join(p, c)
		_, err := os.Lstat(p)
		created := errors.Is(err, fs.ErrNotExist)
		if err != nil && !created {
			return err
		}
		if !created {
			continue
		}
		if err := ops.MkdirPrivate(p); err != nil {
			return err
		}
		if i > 0 {
			if err := ops.ChownIfRoot(p, uid, gid); err != nil {
				return err
			}
		}
	}
	return nil
}
