package ledger

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/rs/zerolog"

	"pisess/writers/durable"
)

// The failpoints of prune, in the order they are met: the crash harness
// kills pisess at each (commands/crash_test.go, TestCrashPrune).
var (
	fpPruneAfterMove     = durable.Register("engine.after-prune-move")     // one quarantine entry moved to .pisess/pruning/
	fpPruneBeforeRewrite = durable.Register("engine.before-prune-rewrite") // every entry moved, journal not yet rewritten
	fpPruneAfterRewrite  = durable.Register("engine.after-prune-rewrite")  // journal rewritten, .pisess/pruning/ not yet removed
)

// PruningDir is where prune moves what it is about to delete: a run killed
// midway leaves only this directory, which the next prune removes first.
const PruningDir = "pruning"

// PruneTree is what prune did (or would do) in one tree.
type PruneTree struct {
	Root string `json:"root"`
	// Runs are the runs removed from the journal, oldest first.
	Runs []string `json:"runs"`
	// Quarantine are the quarantine entries removed (relative to .pisess/).
	Quarantine []string `json:"quarantine"`
	// Bytes is what the removed quarantine entries held.
	Bytes int64 `json:"bytes"`
	// JournalLines is how many journal lines were removed.
	JournalLines int `json:"journalLines"`
	// KeptRuns is how many runs stay (inside the window, or undated).
	KeptRuns int `json:"keptRuns"`
}

// PruneOptions configure Prune.
type PruneOptions struct {
	DryRun   bool
	LockWait time.Duration // for the tree lock another run holds
	Ops      durable.Ops
}

// PruneTrees prunes each tree at roots (Prune), in order; a tree without
// a .pisess/ directory has nothing pisess made, and nothing is created
// there either. It stops at the first tree it could not prune.
func PruneTrees(ctx context.Context, log zerolog.Logger, opt PruneOptions, roots []string, cutoff time.Time) ([]PruneTree, error) {
	out := []PruneTree{}
	for _, root := range roots {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		if fi, err := os.Lstat(filepath.Join(root, PisessDir)); err != nil || !fi.IsDir() {
			out = append(out, PruneTree{Root: root, Runs: []string{}, Quarantine: []string{}})
			continue // nothing pisess made here; nothing to create either
		}
		pt, err := Prune(ctx, log, opt, root, cutoff)
		out = append(out, pt)
		if err != nil {
			return out, err
		}
	}
	return out, nil
}

// Prune removes from the tree at root the quarantine entries and journal
// records of the runs whose last record is older than cutoff, under the
// tree lock (none in a dry run, which only reports): the runs with a
// record inside the window or without a readable time are kept whole, the
// journal keeps its other lines byte for byte and is replaced atomically,
// and quarantine entries no record names go when their own time is older
// than cutoff. Each removal is logged.
func Prune(ctx context.Context, log zerolog.Logger, opt PruneOptions, root string, cutoff time.Time) (PruneTree, error) {
	pt := PruneTree{Root: root, Runs: []string{}, Quarantine: []string{}}
	pisess := filepath.Join(root, PisessDir)
	trash := filepath.Join(pisess, PruningDir)
	hold := func() error { return nil }
	if !opt.DryRun {
		l, _, err := LockTreeWait(ctx, opt.Ops, root, opt.LockWait)
		if err != nil {
			return pt, fmt.Errorf("prune %s: %w", root, err)
		}
		defer l.Unlock()
		hold = Hold(l, "")
		// A prune killed midway: finish it.
		if err := removeTrash(opt.Ops, trash); err != nil {
			return pt, fmt.Errorf("prune %s: %w", root, err)
		}
	}
	accs, order, _, err := scanRuns(root)
	if err != nil {
		return pt, err
	}
	prunable := map[string]bool{}
	for _, id := range order {
		a := accs[id]
		if !a.badTime && !a.lastAny.IsZero() && a.lastAny.Before(cutoff) {
			prunable[id] = true
			pt.Runs = append(pt.Runs, id)
		} else {
			pt.KeptRuns++
		}
	}
	// The quarantine entries to remove: those of pruned runs, and those no
	// record names that are themselves older than the window.
	qdir := filepath.Join(pisess, QuarantineDir)
	entries, err := os.ReadDir(qdir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return pt, fmt.Errorf("prune %s: %w", root, err)
	}
	var remove []string
	for _, e := range entries {
		name := e.Name()
		if !prunable[name] {
			if accs[name] != nil {
				continue
			}
			fi, err := e.Info()
			if err != nil || !fi.ModTime().Before(cutoff) {
				continue
			}
		}
		remove = append(remove, name)
		pt.Quarantine = append(pt.Quarantine, filepath.Join(QuarantineDir, name))
		pt.Bytes += DirBytes(filepath.Join(qdir, name))
	}
	sort.Strings(pt.Quarantine)
	drop := map[int64]bool{}
	if len(prunable) > 0 {
		j, err := OpenJournal(root)
		if err != nil {
			return pt, err
		}
		if _, err := j.Scan(func(r Record) error {
			if prunable[r.CorrelationID()] {
				drop[r.Line] = true
			}
			return nil
		}); err != nil {
			return pt, fmt.Errorf("prune %s: %w", root, err)
		}
	}
	pt.JournalLines = len(drop)
	if opt.DryRun {
		return pt, nil
	}

	if len(remove) > 0 || len(drop) > 0 {
		// Something to change: this run is the lock's holder now.
		if err := hold(); err != nil {
			return pt, fmt.Errorf("prune %s: %w", root, err)
		}
	}
	// Move first, rewrite the journal, then delete: a kill at any point
	// leaves at most .pisess/pruning/ (removed by the next prune) and
	// never a journal naming quarantine entries of a run inside the window
	// that are gone.
	if len(remove) > 0 {
		if err := opt.Ops.MkdirPrivate(trash); err != nil && !errors.Is(err, fs.ErrExist) {
			return pt, fmt.Errorf("prune %s: %w", root, err)
		}
	}
	for _, name := range remove {
		if err := opt.Ops.Rename(filepath.Join(qdir, name), filepath.Join(trash, name)); err != nil {
			return pt, fmt.Errorf("prune %s: %w", root, err)
		}
		durable.Failpoint(fpPruneAfterMove)
		log.Info().Str("tree", root).Str("entry", filepath.Join(QuarantineDir, name)).Msg("prune: quarantine entry removed")
	}
	durable.Failpoint(fpPruneBeforeRewrite)
	if len(drop) > 0 {
		if err := rewriteJournal(opt.Ops, root, drop); err != nil {
			return pt, fmt.Errorf("prune %s: %w", root, err)
		}
		for _, id := range pt.Runs {
			log.Info().Str("tree", root).Str("run", id).Msg("prune: run removed from the journal")
		}
	}
	durable.Failpoint(fpPruneAfterRewrite)
	if err := removeTrash(opt.Ops, trash); err != nil {
		return pt, fmt.Errorf("prune %s: %w", root, err)
	}
	return pt, nil
}

// removeTrash deletes .pisess/pruning/: only prune puts anything there.
// A symlink in its place, or anywhere in it or on the way to it, is
// removed or refused, never followed (durable.Ops.RemoveAll).
func removeTrash(ops durable.Ops, trash string) error {
	return ops.RemoveAll(trash)
}

// rewriteJournal replaces the journal by its lines minus the numbered ones
// in drop (numbered as ledger's Scan numbers them: one per newline), every
// other line byte for byte, atomically.
func rewriteJournal(ops durable.Ops, root string, drop map[int64]bool) error {
	path := JournalPath(root)
	f, err := ops.OpenNoFollow(path, os.O_RDONLY, 0)
	if err != nil {
		return fmt.Errorf("rewrite journal: %w", err)
	}
	defer f.Close()
	var out bytes.Buffer
	r := bufio.NewReaderSize(f, 64<<10)
	var n int64
	for {
		line, err := r.ReadBytes('\n')
		if len(line) > 0 {
			n++
			if !drop[n] {
				out.Write(line)
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("rewrite journal: %w", err)
		}
	}
	dir := filepath.Dir(path)
	if err := ops.WriteFileAtomic(dir, dir, JournalName, out.Bytes(), 0o600); err != nil {
		return fmt.Errorf("rewrite journal: %w", err)
	}
	return nil
}
