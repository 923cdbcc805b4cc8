package engine

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"time"

	"pisess/readers/discover"
	"pisess/writers/durable"
)

// lockPollInterval is how often a run waiting for a tree lock (--lock-wait)
// tries again. flock(2) has no timed wait; a short poll keeps the waiting
// run interruptible by its context.
const lockPollInterval = 100 * time.Millisecond

// lockTreeWait is [lockTreeForRepair], trying again for up to wait while
// another run holds the lock (--lock-wait): a cron run that overlaps a
// person's run then goes on after it instead of exiting 32 at once. wait
// 0 tries once.
func lockTreeWait(ctx context.Context, ops durable.Ops, tree string, wait time.Duration) (*durable.Lock, string, error) {
	deadline := time.Now().Add(wait)
	for {
		l, stale, err := lockTreeForRepair(ops, tree)
		if err == nil || !errors.Is(err, ErrTreeLocked) || !time.Now().Before(deadline) {
			return l, stale, err
		}
		t := time.NewTimer(min(lockPollInterval, time.Until(deadline)))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, "", err
		case <-t.C:
		}
	}
}

// isDefaultTree reports whether tree is the default session tree, which
// commands use when given no path.
func isDefaultTree(tree string) bool {
	roots, err := discover.DefaultRoots()
	if err != nil {
		return false
	}
	for _, r := range roots {
		if abs, err := filepath.Abs(r); err == nil && abs == tree {
			return true
		}
	}
	return false
}

// treeArgs is the --tree flags a command needs to reach trees: none for
// the default tree alone.
func treeArgs(trees []string) string {
	var b strings.Builder
	for _, t := range trees {
		if len(trees) == 1 && isDefaultTree(t) {
			return ""
		}
		b.WriteString(" --tree ")
		b.WriteString(shellQuote(t))
	}
	return b.String()
}

// RollbackHint is the command that undoes run id over trees, with the
// --tree flags it needs to find their journals (issue 12: a printed hint
// must work as printed).
func RollbackHint(id string, trees []string) string {
	return "pisess rollback" + treeArgs(trees) + " " + id
}

// RepairHint is the fsck --repair command line for trees.
func RepairHint(trees []string) string {
	if len(trees) == 1 && isDefaultTree(trees[0]) {
		return "pisess fsck --repair"
	}
	var b strings.Builder
	b.WriteString("pisess fsck --repair")
	for _, t := range trees {
		b.WriteString(" ")
		b.WriteString(shellQuote(t))
	}
	return b.String()
}

// shellQuote quotes s for a POSIX shell when it holds anything but the
// characters paths usually have.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-+:@,=") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
