package ledger

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/rs/zerolog"

	"pisess/writers/durable"
)

// lockPollInterval is how often a run waiting for a tree lock (--lock-wait)
// tries again. flock(2) has no timed wait; a short poll keeps the waiting
// run interruptible by its context.
const lockPollInterval = 100 * time.Millisecond

// LockTreeWait is [LockTreeForRepair], trying again for up to wait while
// another run holds the lock (--lock-wait): a cron run that overlaps a
// person's run then goes on after it instead of exiting 32 at once. wait
// 0 tries once.
func LockTreeWait(ctx context.Context, ops durable.Ops, tree string, wait time.Duration) (*durable.Lock, string, error) {
	deadline := time.Now().Add(wait)
	for {
		l, stale, err := LockTreeForRepair(ops, tree)
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

// TreeLockPath returns <tree>/.pisess/lock, the lock that keeps two pisess
// runs out of one tree.
func TreeLockPath(tree string) string { return filepath.Join(tree, PisessDir, "lock") }

// treeLocked wraps a *durable.TreeLockedError so that it maps to exit 32
// and names the holder.
func treeLocked(err error) error {
	return fmt.Errorf("%w: %w", ErrTreeLocked, err)
}

// LockTreeForRepair takes the tree lock the way every changing pisess run
// does (durable's TryLockTree), creating .pisess/ when missing. The run
// records itself as the holder (Hold) just before it first changes the
// tree, so that a run with nothing to do leaves the lock file as it was.
// The holder text it found is non-empty only when an earlier run died
// holding the lock: that is the stale-lock finding, mended by this very
// takeover (the text is replaced now and cleared at unlock).
func LockTreeForRepair(ops durable.Ops, tree string) (*durable.Lock, string, error) {
	dir := filepath.Join(tree, PisessDir)
	if err := CheckPisessObjects(tree); err != nil {
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

// LockTreeForCheck keeps other pisess runs out while a read-only fsck
// looks, without writing anything: when the lock file exists it is
// flocked (durable's LockFile, which records no holder, so a stale
// holder's text stays for the finding and for --repair). A tree without
// the lock file is read unlocked: a run that starts meanwhile creates it,
// and a read-only check of a moving tree can only report too much, never
// change it. stale is the dead holder's text when the lock is stale.
func LockTreeForCheck(ctx context.Context, ops durable.Ops, tree string) (l *durable.Lock, stale string, err error) {
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

// Hold returns what records run (a correlation id, or "") as the holder
// of the tree lock l (nil: nothing to record) before the run's first
// change to the tree: a Journal's BeginRun calls it with the run's first
// record. A run that dies after it leaves a stale holder naming it.
func Hold(l *durable.Lock, run string) func() error {
	if l == nil {
		return nil
	}
	return func() error { return l.RecordHolder(run) }
}

// ErrTreeLocked may be wrapped by an error that means "another pisess run
// holds the tree lock" (so may a *durable.TreeLockedError: see
// IsTreeLocked): it maps to exit status 32, not 8, so that cron can tell
// "try later" from "broken".
var ErrTreeLocked = errors.New("session tree is locked by another pisess run")

// LockTree is a tree a run is to lock. Idle: the run has nothing to do in
// it, so it is locked only when pisess wrote there before (an empty or
// mistyped directory is left without a .pisess/).
type LockTree struct {
	Root string
	Idle bool
}

// TreeLocks are the tree locks a run holds, by root. StaleOf is the
// holder text of each dead run whose lock it took over; Waited names the
// trees whose lock another run held when first tried.
type TreeLocks struct {
	Of      map[string]*durable.Lock
	StaleOf map[string]string
	Waited  map[string]bool
}

// LockTrees takes every tree's lock, or none: a run never works on a tree
// another run holds (ErrTreeLocked, naming the holder). Each lock is taken
// the way every changing run does (LockTreeForRepair), waiting up to wait
// for another run to let go; a lock left by a run that died is taken
// over, and logged.
func LockTrees(ctx context.Context, log zerolog.Logger, ops durable.Ops, trees []LockTree, wait time.Duration) (TreeLocks, error) {
	tl := TreeLocks{Of: map[string]*durable.Lock{}, StaleOf: map[string]string{}, Waited: map[string]bool{}}
	for _, t := range trees {
		if t.Idle {
			if _, err := os.Lstat(filepath.Join(t.Root, PisessDir)); err != nil {
				continue
			}
		}
		l, stale, err := LockTreeWait(ctx, ops, t.Root, 0)
		if err != nil && wait > 0 && errors.Is(err, ErrTreeLocked) {
			tl.Waited[t.Root] = true
			l, stale, err = LockTreeWait(ctx, ops, t.Root, wait)
		}
		if err != nil {
			tl.Unlock()
			return TreeLocks{}, fmt.Errorf("lock tree %s: %w", t.Root, err)
		}
		if stale != "" {
			log.Warn().Str("tree", t.Root).Str("holder", stale).Msg("took over the tree lock of a run that died holding it")
			tl.StaleOf[t.Root] = stale
		}
		tl.Of[t.Root] = l
	}
	return tl, nil
}

// Unlock lets every tree go.
func (tl TreeLocks) Unlock() {
	for _, l := range tl.Of {
		_ = l.Unlock()
	}
}
