package rollback

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"pisess/ledger"
	"pisess/writers/durable"
)

// SidecarPath returns the V2 sidecar of a session file: <dir>/<stem>.v2,
// the stem being the file name without its last extension (FORMAT.md §1).
func SidecarPath(sessionPath string) string {
	dir, name := filepath.Split(filepath.Clean(sessionPath))
	if i := strings.LastIndexByte(name, '.'); i > 0 {
		name = name[:i]
	}
	return filepath.Join(dir, name+".v2")
}

// BackupPath returns the name Cutover gives the sidecar it displaces:
// <sidecar>.backup.<32 hex>, the sibling name FORMAT.md §1 gives a
// displaced store. The 32 hex digits are derived from the correlation id
// and the sidecar path instead of drawn at random, so that a rollback of
// the run (and fsck) can find a backup a crash left before the journal
// could name it.
func BackupPath(sidecarDir, correlationID string) string {
	sum := sha256.Sum256([]byte("pisess.cutover-backup.v1\x00" + correlationID + "\x00" + filepath.Clean(sidecarDir)))
	return filepath.Clean(sidecarDir) + ".backup." + hex.EncodeToString(sum[:16])
}

// StagingPath returns the staging directory a migration builds the
// sidecar in: <sidecar>.staging.<32 hex>, the sibling name FORMAT.md §1
// gives a staging store, the hex digits being the migration id (a UUID)
// its journal's planned event carries. A staging directory the run could
// not remove (EMFILE, EIO) is so known as pisess's by the next run's heal,
// whatever the store in it holds (NeedsHeal).
func StagingPath(sidecarDir, migrationID string) string {
	return filepath.Clean(sidecarDir) + ".staging." + strings.ReplaceAll(migrationID, "-", "")
}

// sourceOfSidecar returns the session file beside a store directory named
// <stem>.v2: <stem>.jsonl, else <stem>.sqlite. ok is false when storeDir is
// not so named or no such regular file exists: the store is not a sidecar.
func sourceOfSidecar(storeDir string) (string, bool) {
	clean := filepath.Clean(storeDir)
	stem, found := strings.CutSuffix(clean, ".v2")
	if !found || filepath.Base(stem) == "" {
		return "", false
	}
	for _, ext := range []string{".jsonl", ".sqlite"} {
		if fi, err := os.Lstat(stem + ext); err == nil && fi.Mode().IsRegular() {
			return stem + ext, true
		}
	}
	return "", false
}

// kind is what a path names, without following a final symlink.
type kind int

const (
	kindMissing kind = iota
	kindDir
	kindFile
	kindOther // a symlink or special file: never ours to move
)

// lstatKind looks at path without following a symlink anywhere on the way
// (a path from the journal is data: a planted symlink must not lead a
// rollback out of the tree).
func lstatKind(path string) (kind, error) {
	st, err := durable.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return kindMissing, nil
	case err != nil:
		return kindMissing, err
	case st.Mode&unix.S_IFMT == unix.S_IFDIR:
		return kindDir, nil
	case st.Mode&unix.S_IFMT == unix.S_IFREG:
		return kindFile, nil
	}
	return kindOther, nil
}

// mkdirQuarantine makes dir, which lies under <tree>/.pisess, with every
// missing directory between, each 0700 and given to uid:gid when pisess
// runs as root (pi's user must be able to read back what pisess kept). The
// tree itself and anything outside .pisess is never created or chmod-ed.
func mkdirQuarantine(ops durable.Ops, tree, dir string, uid, gid int) error {
	base := filepath.Join(tree, ledger.PisessDir)
	rel, err := filepath.Rel(base, dir)
	if err != nil || !filepath.IsLocal(rel) && rel != "." {
		return fmt.Errorf("quarantine directory %s is not under %s", dir, base)
	}
	cur := tree
	parts := append([]string{ledger.PisessDir}, strings.Split(rel, string(filepath.Separator))...)
	for _, part := range parts {
		if part == "." || part == "" {
			continue
		}
		cur = filepath.Join(cur, part)
		k, err := lstatKind(cur)
		if err != nil {
			return fmt.Errorf("quarantine: %w", err)
		}
		switch k {
		case kindDir:
			continue
		case kindMissing:
			if err := ops.MkdirPrivate(cur); err != nil {
				return fmt.Errorf("quarantine: %w", err)
			}
			if err := ops.ChownIfRoot(cur, uid, gid); err != nil {
				return fmt.Errorf("quarantine: %w", err)
			}
		default:
			return fmt.Errorf("quarantine: %s is not a directory", cur)
		}
	}
	return nil
}

// setAsideName returns the first free "<path>.bak", "<path>.bak.1", …
// (the reference's names for a segment or checkpoint that a rollback sets
// aside; readers ignore them).
func setAsideName(path string) (string, error) {
	for n := 0; n < 10000; n++ {
		name := path + ".bak"
		if n > 0 {
			name = fmt.Sprintf("%s.bak.%d", path, n)
		}
		k, err := lstatKind(name)
		if err != nil {
			return "", err
		}
		if k == kindMissing {
			return name, nil
		}
	}
	return "", fmt.Errorf("set aside %s: every .bak name up to .bak.9999 is taken", path)
}
