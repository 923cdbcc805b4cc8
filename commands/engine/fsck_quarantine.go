package engine

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

	"pisess/ledger"
	"pisess/writers/durable"
	"pisess/writers/wire"
)

// quarantine moves what fsck removes from a tree into
// <tree>/.pisess/quarantine/<run id>/ (never deletes it) and writes the
// journal note that says where each thing went.
type quarantine struct {
	ops           durable.Ops
	tree          string
	correlationID string
	journal       *ledger.Journal
	clock         func() time.Time
	uid, gid      int // the tree's owner: who gets what root creates here
}

func newQuarantine(ops durable.Ops, tree, correlationID string, journal *ledger.Journal, clock func() time.Time) (*quarantine, error) {
	uid, gid, err := ops.Owner(tree)
	if err != nil {
		return nil, fmt.Errorf("quarantine: %w", err)
	}
	return &quarantine{ops: ops, tree: tree, correlationID: correlationID, journal: journal, clock: clock, uid: uid, gid: gid}, nil
}

// rel returns path relative to the tree, for QuarantinePath.
func (q *quarantine) rel(path string) string {
	r, err := filepath.Rel(q.tree, path)
	if err != nil {
		return path
	}
	return r
}

// target returns a free quarantine path for path with kind: the pure
// ledger.QuarantinePath, or that with ".N" when a re-run with the same id
// already put something there (never overwritten).
func (q *quarantine) target(path, kind string) (string, error) {
	base := ledger.QuarantinePath(q.tree, q.correlationID, q.rel(path), kind)
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
func (q *quarantine) mkdirs(dir string) error {
	base := filepath.Join(q.tree, ledger.PisessDir)
	rel, err := filepath.Rel(base, dir)
	if err != nil || !filepath.IsLocal(rel) && rel != "." {
		return fmt.Errorf("quarantine directory %s is not under %s", dir, base)
	}
	cur := q.tree
	for _, part := range append([]string{ledger.PisessDir}, strings.Split(rel, string(filepath.Separator))...) {
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

// move renames path (a file or directory, or a symlink itself) into the
// quarantine and records a quarantined note; it returns where it went.
func (q *quarantine) move(session, path, kind, detail string) (string, error) {
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
	err = q.note(ledger.Note{Session: session, Kind: ledger.NoteQuarantined, Path: path, QuarantinePath: dst, Detail: detail})
	return dst, err
}

// keep writes a copy of bytes about to be removed from path (a torn tail,
// an index or manifest about to be rewritten, a journal line) into the
// quarantine, durably, before the caller removes them: they are then
// never the only copy. It returns the copy's path and digest.
func (q *quarantine) keep(path, kind string, data []byte) (string, string, error) {
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

// note appends n, stamped with the run's id and time, to the journal.
func (q *quarantine) note(n ledger.Note) error {
	n.CorrelationID = q.correlationID
	n.At = wire.FormatTimestamp(q.clock())
	if n.Session == "" {
		n.Session = q.tree
	}
	if err := q.journal.Append(ledger.NoteRecord(n)); err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	return nil
}
