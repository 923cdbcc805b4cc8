package ledger

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"pisess/writers/durable"
	"pisess/writers/wire"
)

// Quarantiner moves what fsck removes from a tree into
// <tree>/.pisess/quarantine/<run id>/ (never deletes it) and writes the
// journal note that says where each thing went.
type Quarantiner struct {
	ops           durable.Ops
	tree          string
	correlationID string
	journal       *Journal
	clock         func() time.Time
	uid, gid      int // the tree's owner: who gets what root creates here
}

func NewQuarantiner(ops durable.Ops, tree, correlationID string, journal *Journal, clock func() time.Time) (*Quarantiner, error) {
	uid, gid, err := ops.Owner(tree)
	if err != nil {
		return nil, fmt.Errorf("quarantine: %w", err)
	}
	return &Quarantiner{ops: ops, tree: tree, correlationID: correlationID, journal: journal, clock: clock, uid: uid, gid: gid}, nil
}

// rel returns path relative to the tree, for QuarantinePath.
func (q *Quarantiner) rel(path string) string {
	r, err := filepath.Rel(q.tree, path)
	if err != nil {
		return path
	}
	return r
}

// target returns a free quarantine path for path with kind: the pure
// QuarantinePath, or that with ".N" when a re-run with the same id
// already put something there (never overwritten).
func (q *Quarantiner) target(path, kind string) (string, error) {
	base := QuarantinePath(q.tree, q.correlationID, q.rel(path), kind)
	for n := 0; n < 1000; n++ {
		p := base
		if n > 0 {
			p = base + "." + strconv.Itoa(n)
		}
		if _, err := os.Lstat(p); errors.Is(err, fs.ErrNotExist) {
			return p, nil
		} else if err != nil {
			return "", err
		}
	}
	return "", fmt.Errorf("quarantine %s: every name is taken", base)
}

// mkdirs makes dir and every missing directory up to .pisess/, each 0700
// and, as root, given to the tree's owner.
func (q *Quarantiner) mkdirs(dir string) error {
	base := filepath.Join(q.tree, PisessDir)
	rel, err := filepath.Rel(base, dir)
	if err != nil || !filepath.IsLocal(rel) && rel != "." {
		return fmt.Errorf("quarantine directory %s is not under %s", dir, base)
	}
	cur := q.tree
	for _, part := range append([]string{PisessDir}, strings.Split(rel, string(filepath.Separator))...) {
		if part == "" || part == "." {
			continue
		}
		cur = filepath.Join(cur, part)
		fi, err := os.Lstat(cur)
		switch {
		case err == nil && fi.IsDir():
			continue
		case err == nil:
			return fmt.Errorf("quarantine: %s is not a directory", cur)
		case !errors.Is(err, fs.ErrNotExist):
			return fmt.Errorf("quarantine: %w", err)
		}
		if err := q.ops.MkdirPrivate(cur); err != nil {
			return fmt.Errorf("quarantine: %w", err)
		}
		if err := q.ops.ChownIfRoot(cur, q.uid, q.gid); err != nil {
			return fmt.Errorf("quarantine: %w", err)
		}
	}
	return nil
}

// Move renames path (a file or directory, or a symlink itself) into the
// quarantine and records a quarantined note; it returns where it went.
func (q *Quarantiner) Move(session, path, kind, detail string) (string, error) {
	dst, err := q.target(path, kind)
	if err != nil {
		return "", err
	}
	if err := q.mkdirs(filepath.Dir(dst)); err != nil {
		return "", err
	}
	if err := q.ops.RenameNoReplace(path, dst); err != nil {
		return "", fmt.Errorf("quarantine %s: %w", path, err)
	}
	err = q.Note(Note{Session: session, Kind: NoteQuarantined, Path: path, QuarantinePath: dst, Detail: detail})
	return dst, err
}

// Keep writes a copy of bytes about to be removed from path (a torn tail,
// an index or manifest about to be rewritten, a journal line) into the
// quarantine, durably, before the caller removes them: they are then
// never the only copy. It returns the copy's path and digest.
func (q *Quarantiner) Keep(path, kind string, data []byte) (string, string, error) {
	dst, err := q.target(path, kind)
	if err != nil {
		return "", "", err
	}
	dir := filepath.Dir(dst)
	if err := q.mkdirs(dir); err != nil {
		return "", "", err
	}
	if err := q.ops.CreateNoReplace(dir, dir, filepath.Base(dst), data); err != nil {
		return "", "", fmt.Errorf("quarantine copy of %s: %w", path, err)
	}
	sum := sha256.Sum256(data)
	return dst, hex.EncodeToString(sum[:]), nil
}

// Note appends n, stamped with the run's id and time, to the journal.
func (q *Quarantiner) Note(n Note) error {
	n.CorrelationID = q.correlationID
	n.At = wire.FormatTimestamp(q.clock())
	if n.Session == "" {
		n.Session = q.tree
	}
	if err := q.journal.Append(NoteRecord(n)); err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	return nil
}
