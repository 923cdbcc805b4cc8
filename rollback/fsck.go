package rollback

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"pisess/ledger"
	"pisess/readers/discover"
	"pisess/verify"
	"pisess/writers/durable"
	"pisess/writers/wire"
)

// Fsck is one run of fsck over session trees (fsck, fsck --repair, or a
// migration's self-healing, [Heal]). For each tree, under its tree lock,
// it classifies every session with the reference's five status classes
// and lists the finer findings beneath them (verify.CheckSession:
// acceptance, store integrity, freshness, leftovers), plus the tree's own
// (a stale tree lock, journal lines that do not parse, directories whose
// session is gone). Every finding names the file, the check and the repair
// that applies. Without Repair it writes nothing at all.
//
// With Repair it then mends what can be mended without losing data
// ([Repairer]), moving whatever it removes into
// <tree>/.pisess/quarantine/<run id>/ and recording each step in the tree
// journal under CorrelationID, and checks again: a finding is Repaired
// only when the re-check no longer finds it. A second run then finds
// nothing.
//
// Class is the reference's verdict (verify.Status). fsck's findings go
// further: a sidecar the reference would call migrated is also verified
// against its whole source, so a store that pi would accept but that no
// longer holds the source's entries is found (as corrupt findings beneath
// the class migrated).
//
// The caller (package commands' fsck) fills it in and calls [Fsck.Run].
type Fsck struct {
	// Repair mends what can be mended (check → repair → re-check).
	Repair bool
	// Jobs is how many sessions of a tree are checked (and repaired) at
	// once (at least 1).
	Jobs int
	// CorrelationID is the run's id with Repair (journal notes, run
	// records, the quarantine directory).
	CorrelationID string
	// LockTimeout bounds the wait for a session or store mutation lock
	// (Run sets 0 to DefaultLockTimeout); LockWait the wait for a tree
	// lock another run holds (0: none).
	LockTimeout time.Duration
	LockWait    time.Duration
	// Clock stamps journal notes and run records; Run sets nil to the
	// wall clock.
	Clock func() time.Time
	// Ops performs the file operations of the repairs.
	Ops durable.Ops
	Log *zerolog.Logger
	// Progress, when set, is called after each session with the number
	// done and Total, never concurrently.
	Progress func(done, total int)
	Total    int
	// Rebuild rebuilds the sidecar of s from its source through the
	// migrate pipeline (Repairer.Rebuild), journaling in j, the tree's
	// journal of this run, under the session lock the caller holds; aside
	// runs a wait for a lock without the session's place among the Jobs
	// checked at once.
	Rebuild func(ctx context.Context, s discover.Session, reason string, j *ledger.Journal, aside func(wait func())) (displaced string, err error)

	mu   sync.Mutex
	done int
}

// Run checks (and repairs) trees in order and returns what it found in
// each, up to the first error (the trees done before, and the one it
// stopped in).
func (r *Fsck) Run(ctx context.Context, trees []discover.Tree) ([]verify.FsckTree, error) {
	if r.LockTimeout <= 0 {
		r.LockTimeout = DefaultLockTimeout
	}
	if r.Clock == nil {
		r.Clock = func() time.Time { return time.Now().UTC() }
	}
	for _, t := range trees {
		r.Total += len(t.Sessions)
	}
	out := []verify.FsckTree{}
	for _, t := range trees {
		tr, err := r.Tree(ctx, t)
		out = append(out, tr)
		if err != nil {
			return out, err
		}
	}
	return out, nil
}

func (r *Fsck) progress() {
	if r.Progress == nil {
		return
	}
	// Calls are serialised: the caller's bar need not be safe for
	// concurrent use.
	r.mu.Lock()
	defer r.mu.Unlock()
	r.done++
	r.Progress(r.done, r.Total)
}

// treeRun is the state of one tree: its journal and, with --repair, its
// quarantine.
type treeRun struct {
	*Fsck
	tree    discover.Tree
	journal *ledger.Journal
	repairs *Repairer // nil without --repair
	// places are the sessions checked at once (Jobs): a session waiting
	// for a lock pi holds gives its place up meanwhile (aside).
	places chan struct{}
}

// Tree checks (and repairs) one session tree under its tree lock.
func (r *Fsck) Tree(ctx context.Context, t discover.Tree) (verify.FsckTree, error) {
	out := verify.FsckTree{Root: t.Root, Findings: []verify.FsckFinding{}, Sessions: []verify.FsckSession{}, Skipped: append([]discover.Skipped{}, t.Skipped...)}
	if t.SymlinkAncestor != "" {
		// pi can open nothing here and pisess follows no symlink: not
		// even the tree lock or the journal can be reached. Each session
		// is reported (acceptance.symlink-ancestor) and nothing repaired.
		tr := &treeRun{Fsck: r, tree: t}
		out.Sessions = tr.sessions(ctx)
		return out, ctx.Err()
	}
	var mended []ledger.Mended
	if r.Repair {
		// Before the lock, which an object of the wrong type keeps
		// anyone from taking (and so, no other run holds it).
		mended = ledger.MendPisess(r.Ops, t.Root, r.CorrelationID)
		if n := len(mended); n > 0 && mended[n-1].Err != nil {
			out.Findings = append(out.Findings, verify.MendedFindings(mended)...)
			return out, nil
		}
	}
	if err := ledger.CheckPisessObjects(t.Root); err != nil {
		return out, err
	}
	var (
		lock  *durable.Lock
		stale string
		err   error
	)
	if r.Repair {
		lock, stale, err = ledger.LockTreeWait(ctx, r.Ops, t.Root, r.LockWait)
	} else {
		lock, stale, err = ledger.LockTreeForCheck(ctx, r.Ops, t.Root)
	}
	if err != nil {
		return out, fmt.Errorf("fsck %s: %w", t.Root, err)
	}
	defer lock.Unlock()
	var hold func() error
	if r.Repair {
		hold = ledger.Hold(lock, r.CorrelationID)
	}
	return r.TreeLocked(ctx, t, stale, mended, hold)
}

// TreeLocked checks (and repairs) tree t, whose lock the caller holds;
// stale is the holder text of a dead run whose lock was taken over,
// mended the objects of .pisess/ that fsck --repair moved aside before it
// took the lock, and hold (nil: none) records the run as the lock's
// holder before its first change. The self-healing of migrate calls it
// too ([Heal]), under migrate's lock.
func (r *Fsck) TreeLocked(ctx context.Context, t discover.Tree, stale string, mended []ledger.Mended, hold func() error) (verify.FsckTree, error) {
	out := verify.FsckTree{Root: t.Root, Findings: []verify.FsckFinding{}, Sessions: []verify.FsckSession{}, Skipped: append([]discover.Skipped{}, t.Skipped...)}
	j, err := ledger.OpenJournalWith(r.Ops, t.Root)
	if err != nil {
		return out, fmt.Errorf("fsck %s: %w", t.Root, err)
	}
	defer j.Close()
	tr := &treeRun{Fsck: r, tree: t, journal: j}
	if r.Repair {
		// Its run records (ledger.RunRecord), written with its first
		// repair: a check that repairs nothing writes nothing.
		j.BeginRun(ledger.RunRecord{CorrelationID: r.CorrelationID, At: wire.FormatTimestamp(r.Clock()), Phase: ledger.RunStart,
			Command: "fsck --repair", PID: os.Getpid()}, hold)
		defer func() { r.endRun(j, out, stale != "", ctx.Err() != nil) }()
	}
	if r.Repair {
		q, err := ledger.NewQuarantiner(r.Ops, t.Root, r.CorrelationID, j, r.Clock)
		if err != nil {
			return out, fmt.Errorf("fsck %s: %w", t.Root, err)
		}
		tr.repairs = &Repairer{Ops: r.Ops, Clock: r.Clock, LockTimeout: r.LockTimeout, Log: r.Log,
			Root: t.Root, Journal: j, Q: q, Lock: tr.lock, Rebuild: tr.rebuild}
	}

	if len(mended) > 0 {
		found := verify.MendedFindings(mended)
		tr.repairs.Mended(mended, found)
		out.Findings = append(out.Findings, found...)
	}
	if stale != "" {
		f := verify.StaleLockFinding(t.Root, stale)
		if tr.repairs != nil {
			tr.repairs.TookOverLock(&f, stale)
		}
		out.Findings = append(out.Findings, f)
	}
	jf, err := verify.JournalFindings(j)
	if err != nil {
		return out, fmt.Errorf("fsck %s: %w", t.Root, err)
	}
	out.Findings = append(out.Findings, jf...)
	out.Findings = append(out.Findings, verify.OrphanFindings(t)...)

	out.Sessions = tr.sessions(ctx)
	if err := ctx.Err(); err != nil {
		return out, err
	}
	if tr.repairs != nil {
		tr.repairs.Tree(out.Findings)
	}
	return out, nil
}

// endRun appends the repair run's end record for tree out to j (written
// when it repaired anything, or took over the lock of a dead run, which
// then counts among the runs it healed).
func (r *Fsck) endRun(j *ledger.Journal, out verify.FsckTree, stale, interrupted bool) {
	end := ledger.RunRecord{CorrelationID: r.CorrelationID, At: wire.FormatTimestamp(r.Clock()), Phase: ledger.RunEnd,
		Command: "fsck --repair", Interrupted: interrupted, Totals: verify.SumFsck([]verify.FsckTree{out}).RunTotals()}
	if stale || j.RunStarted() {
		for _, id := range ledger.UnendedRuns(j) {
			if id != r.CorrelationID {
				end.Healed = append(end.Healed, id)
			}
		}
	}
	err := j.EndRun(end, stale)
	if err == nil {
		err = j.Sync()
	}
	if err != nil {
		r.Log.Warn().Err(err).Str("tree", out.Root).Msg("end of the repair run not journaled")
	}
}

// sessions checks (and repairs) every session of the tree, Jobs at a
// time, and returns them in the tree's order.
func (tr *treeRun) sessions(ctx context.Context) []verify.FsckSession {
	out := make([]verify.FsckSession, len(tr.tree.Sessions))
	tr.places = make(chan struct{}, max(tr.Jobs, 1))
	var wg sync.WaitGroup
	for i := range out {
		if ctx.Err() != nil {
			break
		}
		tr.places <- struct{}{} // in the tree's order
		wg.Go(func() {
			out[i] = tr.session(ctx, tr.tree.Sessions[i])
			<-tr.places
			tr.progress()
		})
	}
	wg.Wait()
	return out
}

// aside runs wait (for a lock pi holds) without the session's place, so
// that the sessions after it are checked meanwhile, then takes a place
// again.
func (tr *treeRun) aside(wait func()) {
	if tr.places == nil {
		wait()
		return
	}
	WaitWithout(tr.places, wait)
}

// lock takes a session's lock or its store's mutation lock: one try, then
// a wait of up to --lock-timeout aside.
func (tr *treeRun) lock(ctx context.Context, path string) (*durable.Lock, error) {
	return LockAside(ctx, tr.Ops, path, tr.LockTimeout, tr.aside)
}

// rebuild is Repairer.Rebuild: the caller's Rebuild in this tree's
// journal and pool.
func (tr *treeRun) rebuild(ctx context.Context, s discover.Session, reason string) (string, error) {
	return tr.Rebuild(ctx, s, reason, tr.journal, tr.aside)
}

// session checks one session and, with --repair, repairs and re-checks it.
func (tr *treeRun) session(ctx context.Context, s discover.Session) verify.FsckSession {
	out := verify.FsckSession{Path: s.Path, Format: string(s.Format), Version: s.Version}
	class, findings := verify.CheckSession(ctx, tr.Ops, s)
	out.Class, out.Findings = class, findings
	if tr.repairs == nil || !verify.HasProblems(findings) {
		return out
	}
	tr.repairs.Session(ctx, s, &out)
	return out
}

// LockAside takes the lock at path: one try, and when another process (pi)
// holds it, a wait of up to timeout run through aside, which gives up the
// caller's place in its pool meanwhile (engine's Env.aside, fsck's
// treeRun.aside), so that the sessions queued behind this one are not held
// up by it.
func LockAside(ctx context.Context, ops durable.Ops, path string, timeout time.Duration, aside func(wait func())) (*durable.Lock, error) {
	l, err := ops.LockFile(ctx, path, 0)
	if errors.Is(err, durable.ErrLockTimeout) && timeout > 0 {
		aside(func() { l, err = ops.LockFile(ctx, path, timeout) })
	}
	return l, err
}

// WaitWithout runs wait with one of places given up meanwhile, and takes a
// place again after it (queued behind those who asked first). The yield
// lets the goroutine the freed place woke run now, as engine's handOver
// does (issue 14).
func WaitWithout(places chan struct{}, wait func()) {
	<-places
	runtime.Gosched()
	wait()
	places <- struct{}{}
}
