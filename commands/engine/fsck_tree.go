package engine

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"

	"pisess/ledger"
	"pisess/readers/discover"
	"pisess/writers/durable"
)

// TreeLockPath returns <tree>/.pisess/lock, the lock that keeps two pisess
// runs out of one tree.
func TreeLockPath(tree string) string { return filepath.Join(tree, ledger.PisessDir, "lock") }

// treeLocked wraps a *durable.TreeLockedError so that it maps to exit 32
// and names the holder.
func treeLocked(err error) error {
	return fmt.Errorf("%w: %w", ErrTreeLocked, err)
}

// checkPisessDir refuses a tree whose .pisess is not a real directory: a
// symlink there would carry the journal, the lock and the quarantine out
// of the tree (pisess never follows one), and anything else is not
// pisess's. The message says what to do.
func checkPisessDir(tree string) error {
	dir := filepath.Join(tree, ledger.PisessDir)
	fi, err := os.Lstat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("tree %s: %w", tree, err)
	case fi.Mode()&fs.ModeSymlink != 0:
		target, _ := os.Readlink(dir)
		return fmt.Errorf("%s is a symlink (to %s), not pisess's directory: pisess never follows a symlink in a tree, "+
			"so it keeps no journal, lock or quarantine there. Look at what it points to, then move the link aside "+
			"(mv %s %s.link) and run again", dir, target, dir, dir)
	case !fi.IsDir():
		return fmt.Errorf("%s is not a directory: pisess keeps its journal, lock and quarantine there; move it aside and run again", dir)
	}
	return nil
}

// lockTreeForRepair takes the tree lock the way every changing pisess run
// does (durable's TryLockTree, which records this run as the holder),
// creating .pisess/ when missing. The holder text it found is non-empty
// only when an earlier run died holding the lock: that is the stale-lock
// finding, mended by this very takeover (the text is replaced now and
// cleared at unlock).
func lockTreeForRepair(ops durable.Ops, tree string) (*durable.Lock, string, error) {
	dir := filepath.Join(tree, ledger.PisessDir)
	if err := checkPisessDir(tree); err != nil {
		return nil, "", err
	}
	if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
		uid, gid, err := ops.Owner(tree)
		if err != nil {
			return nil, "", fmt.Errorf("tree lock: %w", err)
		}
		if err := ops.MkdirPrivate(dir); err != nil {
			return nil, "", fmt.Errorf("tree lock: %w", err)
		}
		if err := ops.ChownIfRoot(dir, uid, gid); err != nil {
			return nil, "", fmt.Errorf("tree lock: %w", err)
		}
	}
	l, prev, err := ops.TryLockTree(TreeLockPath(tree))
	var held *durable.TreeLockedError
	if errors.As(err, &held) {
		return nil, "", treeLocked(err)
	}
	if err != nil {
		return nil, "", err
	}
	return l, prev, nil
}

// lockTreeForCheck keeps other pisess runs out while a read-only fsck
// looks, without writing anything: when the lock file exists it is
// flocked (durable's LockFile, which records no holder, so a stale
// holder's text stays for the finding and for --repair). A tree without
// the lock file is read unlocked: a run that starts meanwhile creates it,
// and a read-only check of a moving tree can only report too much, never
// change it. stale is the dead holder's text when the lock is stale.
func lockTreeForCheck(ctx context.Context, ops durable.Ops, tree string) (l *durable.Lock, stale string, err error) {
	path := TreeLockPath(tree)
	if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
		return nil, "", nil
	}
	holder, isStale, err := ops.StaleTreeLock(path)
	if err != nil {
		return nil, "", err
	}
	if !isStale && holder != "" {
		return nil, "", treeLocked(&durable.TreeLockedError{Path: path, Holder: holder})
	}
	l, err = ops.LockFile(ctx, path, 0)
	if errors.Is(err, durable.ErrLockTimeout) {
		return nil, "", treeLocked(&durable.TreeLockedError{Path: path, Holder: holder})
	}
	if err != nil {
		return nil, "", err
	}
	if isStale {
		stale = holder
	}
	return l, stale, nil
}

func staleLockFinding(tree, holder string) FsckFinding {
	return FsckFinding{
		Code:   CodeTreeStaleLock,
		Path:   TreeLockPath(tree),
		Detail: "the tree lock names a holder that died holding it (" + holder + ")",
		Action: ActionClearLock,
		Repair: repairClearLock,
	}
}

// journalFindings reports every journal line that does not parse and has
// not been acknowledged by an earlier fsck --repair (a repair note naming
// the journal and the line's digest). The journal is append-only evidence:
// fsck never rewrites it.
func journalFindings(j *ledger.Journal) ([]FsckFinding, error) {
	acked := map[string]bool{}
	var linked []ledger.BadLine
	bad, err := j.Scan(func(r ledger.Record) error {
		if n := r.Note; n != nil && n.Kind == ledger.NoteRepair && n.Path == j.Path() && n.SHA256 != "" {
			acked[n.SHA256] = true
		}
		if link, found := ledger.SymlinkOnTheWay(j.Tree(), r); found {
			linked = append(linked, ledger.BadLine{Line: r.Line, Forged: true, CorrelationID: r.CorrelationID(),
				Detail: fmt.Sprintf("the record names a path through the symlink %s, which pisess never follows", link)})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	bad = append(bad, linked...)
	sort.Slice(bad, func(a, b int) bool { return bad[a].Line < bad[b].Line })
	if len(bad) == 0 {
		return nil, nil
	}
	want := map[int64]bool{}
	for _, b := range bad {
		want[b.Line] = true
	}
	lines, err := readLines(j.Path(), want)
	if err != nil {
		return nil, err
	}
	var out []FsckFinding
	for _, b := range bad {
		if acked[lineDigest(lines[b.Line])] {
			continue
		}
		detail := "journal line does not parse: " + b.Detail
		if b.Forged {
			detail = "journal record refused (no pisess command acts on it): " + b.Detail
		}
		out = append(out, FsckFinding{
			Code:   CodeTreeJournal,
			Path:   j.Path(),
			Line:   b.Line,
			Detail: detail,
			Action: ActionAcknowledge,
			Repair: repairAcknowledge,
		})
	}
	return out, nil
}

// lineDigest is the digest a journal line is acknowledged by: of its bytes
// without the newline, so that a torn last line is still recognised after
// the next append has terminated it.
func lineDigest(line []byte) string {
	if n := len(line); n > 0 && line[n-1] == '\n' {
		line = line[:n-1]
	}
	sum := sha256.Sum256(line)
	return hex.EncodeToString(sum[:])
}

// readLines returns the wanted 1-based lines of path (each with its
// newline, when it has one), numbered as ledger.Journal.Scan numbers them.
func readLines(path string, want map[int64]bool) (map[int64][]byte, error) {
	f, err := durable.OS.OpenNoFollow(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 64<<10)
	out := map[int64][]byte{}
	for n := int64(1); len(out) < len(want); n++ {
		line, err := r.ReadBytes('\n')
		if len(line) > 0 && want[n] {
			out[n] = line
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", path, err)
		}
	}
	return out, nil
}

// acknowledgeJournalLine copies the line to the quarantine and appends the
// repair note that acknowledges it.
func acknowledgeJournalLine(q *quarantine, f FsckFinding) error {
	lines, err := readLines(f.Path, map[int64]bool{f.Line: true})
	if err != nil {
		return err
	}
	line := lines[f.Line]
	dst, _, err := q.keep(f.Path, fmt.Sprintf("line-%d", f.Line), line)
	if err != nil {
		return err
	}
	return q.note(ledger.Note{
		Kind:           ledger.NoteRepair,
		Path:           f.Path,
		QuarantinePath: dst,
		SHA256:         lineDigest(line),
		Detail:         fmt.Sprintf("journal line %d does not parse; a copy is in the quarantine and this note acknowledges it (the journal is never rewritten)", f.Line),
	})
}

// orphanFindings reports staging, backup and sidecar directories whose
// session file is gone: pi can never use them, nothing will clear them.
func orphanFindings(t discover.Tree) []FsckFinding {
	var out []FsckFinding
	for _, l := range t.Leftovers {
		out = append(out, FsckFinding{
			Code:   CodeTreeOrphan,
			Path:   l.Path,
			Detail: fmt.Sprintf("a %s directory of %q, whose session file is gone", l.Kind, l.Stem),
			Action: ActionQuarantine,
			Repair: repairQuarantine,
		})
	}
	return out
}
