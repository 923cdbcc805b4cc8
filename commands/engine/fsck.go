package engine

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"pisess/commands/tune"
	"pisess/ledger"
	"pisess/readers/discover"
	"pisess/rollback"
	"pisess/verify"
	"pisess/writers/durable"
	"pisess/writers/wire"
)

// DefaultLockTimeout is how long fsck --repair waits for a session lock or
// a store mutation lock that pi holds before it reports the session busy.
const DefaultLockTimeout = 30 * time.Second

// FsckOptions configure Fsck.
type FsckOptions struct {
	// Paths are session files or trees; none means discover.DefaultRoots.
	Paths []string
	// Repair mends what can be mended (check → repair → re-check);
	// without it Fsck writes nothing at all.
	Repair bool
	// Jobs is how many sessions are checked (and repaired) at once; 0
	// means the number of CPUs the process may use (tune.CPUs).
	Jobs int
	// CorrelationID is the run's id for --repair (journal notes, the
	// quarantine directory); "" generates one.
	CorrelationID string
	// LockTimeout bounds the wait for a session or store mutation lock; 0
	// means DefaultLockTimeout.
	LockTimeout time.Duration
	// LockWait is how long --repair waits for a tree lock another run
	// holds (--lock-wait); 0: exit 32 at once.
	LockWait time.Duration
	// Clock stamps journal notes; nil means the wall clock.
	Clock func() time.Time
	// Ops performs the file operations of the repairs; the zero value is
	// the operating system's.
	Ops durable.Ops
	// Progress, when set, is called after each session with the number
	// done and the total, never concurrently.
	Progress func(done, total int)
}

// Fsck checks every session under opt.Paths the way e2fsck checks a file
// system: for each session tree, under its tree lock, it classifies every
// session with the reference's five status classes and lists the finer
// findings beneath them (acceptance, store integrity, freshness, leftovers),
// plus the tree's own (a stale tree lock, journal lines that do not parse,
// directories whose session is gone). Every finding names the file, the
// check and the repair that applies.
//
// With opt.Repair it then mends what can be mended without losing data,
// moving whatever it removes into <tree>/.pisess/quarantine/<run id>/ and
// recording each step in the tree journal, and checks again: a finding is
// Repaired only when the re-check no longer finds it. A second Fsck then
// finds nothing.
//
// The report's Tally gives the exit status (package commands, exit.go):
// 0 clean, 1 problems found and all repaired, 4 problems left. An error
// means fsck could not run: ErrTreeLocked in its chain (exit 32) when
// another pisess run holds a tree's lock, anything else exit 8. The values
// are e2fsck's, but they never combine as bits: a run that repaired some
// problems and left others exits 4, not 5 (the most urgent condition wins,
// so scripts compare with ==). Notices (a source the reference refuses,
// which pi keeps using as JSONL) do not count; a stale sidecar does (pi
// will not use it until it is refreshed).
//
// Class is the reference's verdict (verify.Status). fsck's findings go
// further: a sidecar the reference would call migrated is also verified
// against its whole source, so a store that pi would accept but that no
// longer holds the source's entries is found (as corrupt findings beneath
// the class migrated).
func Fsck(ctx context.Context, opt FsckOptions) (FsckReport, error) {
	roots := opt.Paths
	if len(roots) == 0 {
		var err error
		if roots, err = discover.DefaultRoots(); err != nil {
			return FsckReport{}, err
		}
	}
	trees, err := discover.Walk(roots)
	if err != nil {
		return FsckReport{}, fmt.Errorf("fsck: %w", err)
	}
	r := &fsckRun{opt: opt, log: zerolog.Ctx(ctx)}
	if r.opt.Jobs <= 0 {
		r.opt.Jobs = tune.CPUs()
	}
	if r.opt.LockTimeout <= 0 {
		r.opt.LockTimeout = DefaultLockTimeout
	}
	if r.opt.Clock == nil {
		r.opt.Clock = func() time.Time { return time.Now().UTC() }
	}
	rep := FsckReport{Repair: opt.Repair, Trees: []verify.FsckTree{}}
	if opt.Repair {
		rep.CorrelationID = opt.CorrelationID
		if rep.CorrelationID == "" {
			rep.CorrelationID = ledger.NewCorrelationID()
		} else if !ledger.ValidCorrelationID(rep.CorrelationID) {
			return FsckReport{}, Usagef("correlation id %q does not match ^[A-Za-z0-9._:-]{8,128}$", rep.CorrelationID)
		}
		r.cid = rep.CorrelationID
	}
	for _, t := range trees {
		r.total += len(t.Sessions)
	}
	for _, t := range trees {
		tr, err := r.tree(ctx, t)
		rep.Trees = append(rep.Trees, tr)
		if err != nil {
			rep.Totals = verify.SumFsck(rep.Trees)
			return rep, err
		}
	}
	rep.Totals = verify.SumFsck(rep.Trees)
	return rep, nil
}

// fsckRun is one Fsck call.
type fsckRun struct {
	opt   FsckOptions
	log   *zerolog.Logger
	cid   string
	mu    sync.Mutex
	done  int
	total int
}

func (r *fsckRun) progress() {
	if r.opt.Progress == nil {
		return
	}
	// Calls are serialised: the caller's bar need not be safe for
	// concurrent use.
	r.mu.Lock()
	defer r.mu.Unlock()
	r.done++
	r.opt.Progress(r.done, r.total)
}

// treeRun is the state of one tree: its journal and, with --repair, its
// quarantine.
type treeRun struct {
	*fsckRun
	tree    discover.Tree
	journal *ledger.Journal
	repairs *rollback.Repairer // nil without --repair
	// places are the sessions checked at once (opt.Jobs): a session
	// waiting for a lock pi holds gives its place up meanwhile (aside).
	places chan struct{}
}

// tree checks (and repairs) one session tree under its tree lock.
func (r *fsckRun) tree(ctx context.Context, t discover.Tree) (verify.FsckTree, error) {
	out := verify.FsckTree{Root: t.Root, Findings: []verify.FsckFinding{}, Sessions: []verify.FsckSession{}, Skipped: append([]discover.Skipped{}, t.Skipped...)}
	if t.SymlinkAncestor != "" {
		// pi can open nothing here and pisess follows no symlink: not
		// even the tree lock or the journal can be reached. Each session
		// is reported (acceptance.symlink-ancestor) and nothing repaired.
		tr := &treeRun{fsckRun: r, tree: t}
		out.Sessions = tr.sessions(ctx)
		return out, ctx.Err()
	}
	var mended []ledger.Mended
	if r.opt.Repair {
		// Before the lock, which an object of the wrong type keeps
		// anyone from taking (and so, no other run holds it).
		mended = ledger.MendPisess(r.opt.Ops, t.Root, r.cid)
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
	if r.opt.Repair {
		lock, stale, err = ledger.LockTreeWait(ctx, r.opt.Ops, t.Root, r.opt.LockWait)
	} else {
		lock, stale, err = ledger.LockTreeForCheck(ctx, r.opt.Ops, t.Root)
	}
	if err != nil {
		return out, fmt.Errorf("fsck %s: %w", t.Root, err)
	}
	defer lock.Unlock()
	var hold func() error
	if r.opt.Repair {
		hold = ledger.Hold(lock, r.cid)
	}
	return r.treeLocked(ctx, t, stale, mended, hold)
}

// treeLocked checks (and repairs) tree t, whose lock the caller holds;
// stale is the holder text of a dead run whose lock was taken over,
// mended the objects of .pisess/ that fsck --repair moved aside before it
// took the lock, and hold (nil: none) records the run as the lock's
// holder before its first change. The self-healing of migrate calls it
// too, under migrate's lock.
func (r *fsckRun) treeLocked(ctx context.Context, t discover.Tree, stale string, mended []ledger.Mended, hold func() error) (verify.FsckTree, error) {
	out := verify.FsckTree{Root: t.Root, Findings: []verify.FsckFinding{}, Sessions: []verify.FsckSession{}, Skipped: append([]discover.Skipped{}, t.Skipped...)}
	j, err := ledger.OpenJournalWith(r.opt.Ops, t.Root)
	if err != nil {
		return out, fmt.Errorf("fsck %s: %w", t.Root, err)
	}
	defer j.Close()
	tr := &treeRun{fsckRun: r, tree: t, journal: j}
	if r.opt.Repair {
		// Its run records (ledger.RunRecord), written with its first
		// repair: a check that repairs nothing writes nothing.
		j.BeginRun(ledger.RunRecord{CorrelationID: r.cid, At: wire.FormatTimestamp(r.opt.Clock()), Phase: ledger.RunStart,
			Command: "fsck --repair", PID: os.Getpid()}, hold)
		defer func() { r.endRun(j, out, stale != "", ctx.Err() != nil) }()
	}
	if r.opt.Repair {
		q, err := ledger.NewQuarantiner(r.opt.Ops, t.Root, r.cid, j, r.opt.Clock)
		if err != nil {
			return out, fmt.Errorf("fsck %s: %w", t.Root, err)
		}
		tr.repairs = &rollback.Repairer{Ops: r.opt.Ops, Clock: r.opt.Clock, LockTimeout: r.opt.LockTimeout, Log: r.log,
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
func (r *fsckRun) endRun(j *ledger.Journal, out verify.FsckTree, stale, interrupted bool) {
	end := ledger.RunRecord{CorrelationID: r.cid, At: wire.FormatTimestamp(r.opt.Clock()), Phase: ledger.RunEnd,
		Command: "fsck --repair", Interrupted: interrupted, Totals: verify.SumFsck([]verify.FsckTree{out}).RunTotals()}
	if stale || j.RunStarted() {
		for _, id := range ledger.UnendedRuns(j) {
			if id != r.cid {
				end.Healed = append(end.Healed, id)
			}
		}
	}
	err := j.EndRun(end, stale)
	if err == nil {
		err = j.Sync()
	}
	if err != nil {
		r.log.Warn().Err(err).Str("tree", out.Root).Msg("end of the repair run not journaled")
	}
}

// sessions checks (and repairs) every session of the tree, opt.Jobs at a
// time, and returns them in the tree's order.
func (tr *treeRun) sessions(ctx context.Context) []verify.FsckSession {
	out := make([]verify.FsckSession, len(tr.tree.Sessions))
	tr.places = make(chan struct{}, max(tr.opt.Jobs, 1))
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
	waitWithout(tr.places, wait)
}

// lock takes a session's lock or its store's mutation lock: one try, then
// a wait of up to --lock-timeout aside.
func (tr *treeRun) lock(ctx context.Context, path string) (*durable.Lock, error) {
	return lockAside(ctx, tr.opt.Ops, path, tr.opt.LockTimeout, tr.aside)
}

// session checks one session and, with --repair, repairs and re-checks it.
func (tr *treeRun) session(ctx context.Context, s discover.Session) verify.FsckSession {
	out := verify.FsckSession{Path: s.Path, Format: string(s.Format), Version: s.Version}
	class, findings := verify.CheckSession(ctx, tr.opt.Ops, s)
	out.Class, out.Findings = class, findings
	if tr.repairs == nil || !verify.HasProblems(findings) {
		return out
	}
	tr.repairs.Session(ctx, s, &out)
	return out
}

// FsckReport is what Fsck found and, with Repair, did.
type FsckReport struct {
	// CorrelationID is the run's id, which every journal note of its
	// repairs carries and the quarantine directory is named after; "" for
	// a check without --repair (which writes nothing).
	CorrelationID string            `json:"correlationId,omitempty"`
	Repair        bool              `json:"repair"`
	Trees         []verify.FsckTree `json:"trees"`
	Totals        verify.FsckTotals `json:"totals"`
}

// Tally counts the problems (notices excluded) and those repaired.
func (r FsckReport) Tally() Tally {
	return Tally{Problems: r.Totals.Problems, Repaired: r.Totals.Repaired}
}
