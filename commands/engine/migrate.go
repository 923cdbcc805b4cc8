package engine

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"pisess/commands/tune"
	"pisess/ledger"
	"pisess/readers"
	"pisess/readers/discover"
	"pisess/rollback"
	"pisess/verify"
	"pisess/writers/durable"
	"pisess/writers/wire"
)

// MigrateOptions configure Migrate.
type MigrateOptions struct {
	Paths           []string // session files or trees; none: the default tree
	DryRun          bool
	Jobs            int // parallel sessions; 0: the CPUs the process may use (tune.CPUs)
	CorrelationID   string
	Force           bool
	Strict          bool // refused sessions are problems (exit 4)
	MaxSegmentBytes int64
	LockTimeout     time.Duration
	// KeepDisplaced keeps every sidecar a refresh displaces in the
	// quarantine, reproducible ones included (--keep-displaced).
	KeepDisplaced bool
	// LockWait is how long to wait for a tree lock another run holds
	// (--lock-wait); 0: exit 32 at once.
	LockWait time.Duration
	Clock    func() time.Time
	Ops      durable.Ops
	// Progress is called with the source bytes of each session the plan
	// counted (one it migrates or refreshes) as it ends.
	Progress func(n int64)
	// OnSession is called with each session's result as it ends (from the
	// worker goroutines: it must be safe for concurrent use).
	OnSession func(SessionResult)
	// OnPlan is called once the plan is known, with the bytes it will read.
	OnPlan func(sessions int, bytes int64)
	// seams are what a test replaces (nil: nothing).
	seams *seams
}

// Migrate migrates every session under opt.Paths (FORMAT.md §1, §8, §11):
// walk, lock and heal, plan, and per session — under its lock — stage,
// verify, write the clean source state and cut over, every phase a ledger
// event with the run's correlation id. A dry run builds and verifies
// outside the tree and writes nothing in it.
func Migrate(ctx context.Context, opt MigrateOptions) (MigrateReport, error) {
	if err := checkMigrateOptions(&opt); err != nil {
		return MigrateReport{}, err
	}
	r := &migrateRun{opt: opt, log: zerolog.Ctx(ctx).With().Str("correlationId", opt.CorrelationID).Logger(),
		rep:      MigrateReport{CorrelationID: opt.CorrelationID, DryRun: opt.DryRun, Strict: opt.Strict},
		judges:   opt.seams.freshJudges(),
		journals: map[string]*ledger.Journal{}, listed: map[string]map[string]bool{}, healedTree: map[string]bool{}}
	r.startedAt = wire.FormatTimestamp(r.now())
	tune.EnterRun() // one P more while the work is system calls (commands/tune)
	defer tune.ExitRun()
	trees, err := r.walk(ctx)
	if err != nil {
		return r.rep, err
	}
	if !opt.DryRun {
		healed, err := r.lockAndHeal(ctx, trees)
		defer r.locks.Unlock()
		if err != nil {
			return r.rep, err
		}
		trees = healed
	}
	defer r.closeJournals()
	if err := r.makeJobs(trees); err != nil {
		return r.rep, err
	}
	discarded := r.planAndRun(ctx)
	r.rep.Totals = totals(r.rep.Sessions)
	r.endRuns(ctx.Err() != nil)
	r.syncJournals()
	if !opt.DryRun {
		r.recordRefusals()
		r.settleDisplaced(discarded)
		durable.Failpoint(fpAfterDiscards)
		r.saveCaches()
	}
	if err := ctx.Err(); err != nil {
		return r.rep, fmt.Errorf("migrate interrupted: %w", err)
	}
	return r.rep, nil
}

// migrateRun is one Migrate call: its options and report, and what its
// steps hand on to each other.
type migrateRun struct {
	opt    MigrateOptions
	log    zerolog.Logger
	rep    MigrateReport
	judges verify.FreshJudges
	// cachesOf are the trees' state files, read from when the walk meets
	// each tree; generations their ledger.Generation, taken just before.
	cachesOf    map[string]*treeCaches
	generations map[string]string
	// journals are the trees' journals, by root (none in a dry run).
	journals map[string]*ledger.Journal
	// listed are the sessions the walk found, by tree (the caches drop
	// the others as they are saved).
	listed map[string]map[string]bool
	// jobs are the run's sessions, planned into place; ready[i] is closed
	// once jobs[i] is planned.
	jobs  []job
	ready []chan struct{}
	// The trees' state files the run uses, to save at its end.
	refusals []*ledger.RefusalCache
	fresh    []*verify.FreshCache
	records  []*ledger.RefreshRecords
	// env is what the run gives each session's pipeline.
	env Env
	// startedAt is when the run began (its start records); healedTree
	// the trees where it healed a killed run's leftovers.
	startedAt  string
	healedTree map[string]bool
	// locks are the tree locks held.
	locks ledger.TreeLocks
}

func (r *migrateRun) now() time.Time {
	if r.opt.Clock != nil {
		return r.opt.Clock()
	}
	return time.Now()
}

// walk discovers the run's trees, reading each tree's state files on
// goroutines of their own from when the walk meets it; the fresh cache
// gives the headers of session files unchanged since a run judged them.
// Each tree's generation is taken before its caches are read, for
// changedSinceWalk.
func (r *migrateRun) walk(ctx context.Context) ([]discover.Tree, error) {
	r.cachesOf, r.generations = map[string]*treeCaches{}, map[string]string{}
	trees, err := discover.WalkPaths(ctx, r.opt.Paths, discover.Options{Headers: func(root string) discover.Headers {
		if r.cachesOf[root] == nil {
			r.generations[root] = ledger.Generation(root)
			r.cachesOf[root] = loadTreeCaches(root, r.judges)
		}
		return r.cachesOf[root]
	}})
	if r.opt.seams.walked != nil {
		r.opt.seams.walked()
	}
	return trees, err
}

// lockAndHeal takes every tree's lock (r.locks: the caller releases them,
// whatever the error) and heals what an interrupted run left, so that the
// next cron run converges with no operator. A run plans only from what it
// sees under the locks (issue 34 §1): it walks again when another run may
// have worked on a tree since the walk, and after a heal. It returns the
// trees as they are then.
func (r *migrateRun) lockAndHeal(ctx context.Context, trees []discover.Tree) ([]discover.Tree, error) {
	var lt []ledger.LockTree
	for _, t := range trees {
		if t.SymlinkAncestor == "" { // else nothing will be written there
			lt = append(lt, ledger.LockTree{Root: t.Root, Idle: len(t.Sessions) == 0 && len(t.Leftovers) == 0})
		}
	}
	var err error
	if r.locks, err = ledger.LockTrees(ctx, r.log, r.opt.Ops, lt, r.opt.LockWait); err != nil {
		return nil, err
	}
	if r.changedSinceWalk(trees) {
		if trees, err = r.walk(ctx); err != nil {
			return nil, err
		}
	}
	healed := false
	for _, t := range trees {
		h, err := heal(ctx, r.log, r.opt, t, r.locks.StaleOf[t.Root], ledger.Hold(r.locks.Of[t.Root], r.opt.CorrelationID))
		if h != nil {
			r.rep.Healed = append(r.rep.Healed, *h)
			healed, r.healedTree[t.Root] = true, true
		}
		if err != nil {
			return nil, fmt.Errorf("repair the leftovers of an interrupted run in %s: %w", t.Root, err)
		}
	}
	if healed {
		if trees, err = r.walk(ctx); err != nil {
			return nil, err
		}
	}
	return trees, nil
}

// changedSinceWalk reports whether another run may have worked on one of
// trees (all locked) since the walk: its lock was waited for, or its
// generation is not the one taken before its caches were read.
func (r *migrateRun) changedSinceWalk(trees []discover.Tree) bool {
	for _, t := range trees {
		if t.SymlinkAncestor != "" {
			continue // neither locked nor written
		}
		if g, ok := r.generations[t.Root]; r.locks.Waited[t.Root] || !ok || g != ledger.Generation(t.Root) {
			return true
		}
	}
	return false
}

func (r *migrateRun) closeJournals() {
	for _, j := range r.journals {
		_ = j.Close() // what an append held open
	}
}

// makeJobs makes a job of every session of trees, with its tree's journal
// and state files, before any is planned: the jobs are planned while the
// first planned already run (issue 14). A job is large: made in place.
func (r *migrateRun) makeJobs(trees []discover.Tree) error {
	total := 0
	for _, t := range trees {
		total += len(t.Sessions)
	}
	r.jobs = make([]job, 0, total)
	r.ready = make([]chan struct{}, 0, total)
	for _, t := range trees {
		r.rep.Trees = append(r.rep.Trees, t.Root)
		r.listed[t.Root] = make(map[string]bool, len(t.Sessions))
		for _, s := range t.Sessions {
			r.listed[t.Root][s.Rel] = true
		}
		r.rep.Skipped = append(r.rep.Skipped, t.Skipped...)
		var j *ledger.Journal
		// A tree under a symlink gets no journal, as it gets no lock:
		// every session in it is refused and nothing is written there.
		if !r.opt.DryRun && len(t.Sessions) > 0 && t.SymlinkAncestor == "" {
			var err error
			if j, err = ledger.OpenJournalWith(r.opt.Ops, t.Root); err != nil {
				return fmt.Errorf("open journal of %s: %w", t.Root, err)
			}
			// Written with the run's first record in the tree, if any.
			j.BeginRun(ledger.RunRecord{CorrelationID: r.opt.CorrelationID, At: r.startedAt, Phase: ledger.RunStart,
				Command: "migrate", PID: os.Getpid()}, ledger.Hold(r.locks.Of[t.Root], r.opt.CorrelationID))
			r.journals[t.Root] = j
		}
		var cache *ledger.RefusalCache
		var fc *verify.FreshCache
		tc := r.cachesOf[t.Root]
		if tc == nil && t.SymlinkAncestor == "" {
			tc = loadTreeCaches(t.Root, r.judges) // the walk meets every tree: not reached
		}
		if t.SymlinkAncestor == "" {
			cache, fc = tc.refusals(), tc.fresh()
			r.refusals, r.fresh = append(r.refusals, cache), append(r.fresh, fc)
		}
		var rec *ledger.RefreshRecords
		if j != nil {
			rec = tc.records()
			r.records = append(r.records, rec)
		}
		for _, s := range t.Sessions {
			r.jobs = append(r.jobs, job{session: s, journal: j, refresh: rec, fresh: fc, cache: cache})
			r.ready = append(r.ready, make(chan struct{}))
		}
	}
	return nil
}

// plan plans every job on goroutines of its own (planInto) and sends the
// bytes the plan will read once it is known; busy is closed when the
// first session starts.
func (r *migrateRun) plan(ctx context.Context, busy <-chan struct{}) <-chan int64 {
	planned := make(chan int64, 1)
	go func() {
		planInto(ctx, r.jobs, r.ready, busy, func(i int) {
			jb := &r.jobs[i]
			planWithCache(jb, r.opt.Force)
			if a := jb.plan.action; jb.refresh != nil && jb.session.Rel != "" && (a == PlanRefresh || a == PlanMigrate) {
				// The record as it was: the evidence about the sidecar a
				// refresh displaces (decoded only for sessions that run).
				jb.prior, jb.hasPrior = jb.refresh.Get(jb.session.Rel)
			}
		})
		var bytes int64
		for _, jb := range r.jobs {
			if jb.plan.action == PlanMigrate || jb.plan.action == PlanRefresh {
				bytes += jb.session.Size
			}
		}
		planned <- bytes
	}()
	return planned
}

// planAndRun plans the jobs and runs them as they are planned (runJobs),
// reporting each session as it ends (the discarder, Progress, OnSession),
// and returns once every session and every discard offered is done.
func (r *migrateRun) planAndRun(ctx context.Context) rollback.DiscardResults {
	opt := r.opt
	busy := make(chan struct{}) // closed when the first session starts
	planned := r.plan(ctx, busy)
	ops := opt.Ops
	// A seal lingers only while another session may come to share it.
	var unfinished atomic.Int64
	unfinished.Store(int64(len(r.jobs)))
	if ops.Seals == nil {
		ops.Seals = &durable.SyncGroup{Linger: opt.seams.linger(), // the jobs share their seals
			Others: func() bool { return unfinished.Load() > 1 }}
	}
	r.env = Env{Clock: opt.Clock, Ops: ops, MaxSegmentBytes: opt.MaxSegmentBytes,
		LockTimeout: opt.LockTimeout, DryRun: opt.DryRun, Force: opt.Force, Log: r.log,
		InPlace: !opt.KeepDisplaced && !opt.seams.fullRefresh, onOpened: opt.seams.opened,
		leftovers: &rollback.Leftovers{Ops: ops}}
	var dq *rollback.Discarder
	if !opt.DryRun && !opt.KeepDisplaced {
		dq = rollback.NewDiscarder(ctx, opt.CorrelationID, func() string { return wire.FormatTimestamp(r.env.now()) })
	}
	rep := newSessionReporter(len(r.jobs), func(i int, res SessionResult) {
		if dq != nil {
			if err := dq.Offer(i, displacedOf(r.jobs[i], res)); err != nil {
				r.log.Warn().Err(err).Str("session", res.Path).Msg("displaced sidecar kept")
			}
		}
		// Only the bytes the plan counted (its total).
		if a := r.jobs[i].plan.action; opt.Progress != nil && (a == PlanMigrate || a == PlanRefresh) {
			opt.Progress(r.jobs[i].session.Size)
		}
		if opt.OnSession != nil {
			opt.OnSession(res)
		}
	}, opt.OnPlan)
	planReported := make(chan struct{})
	go func() {
		rep.plan(<-planned)
		close(planReported)
	}()
	r.rep.Sessions = runJobs(ctx, r.env, r.jobs, r.ready, busy, opt.Jobs, opt.CorrelationID, func(i int, res SessionResult) {
		unfinished.Add(-1)
		rep.ended(i, res)
	})
	r.env.leftovers.Retry(r.log)
	<-planReported
	if dq == nil {
		return rollback.DiscardResults{}
	}
	return dq.Wait()
}

// endRuns appends each tree's end record (ledger.RunEnd) to the journal
// the run wrote to: its totals there, whether it was interrupted, and the
// dead runs it healed (their leftovers, or their lock taken over, which a
// run that wrote nothing records too).
func (r *migrateRun) endRuns(interrupted bool) {
	for root, j := range r.journals {
		var sessions []SessionResult
		for i, jb := range r.jobs {
			if jb.session.Tree == root {
				sessions = append(sessions, r.rep.Sessions[i])
			}
		}
		end := ledger.RunRecord{CorrelationID: r.opt.CorrelationID, At: wire.FormatTimestamp(r.now()), Phase: ledger.RunEnd,
			Command: "migrate", Totals: totals(sessions).counts(), Interrupted: interrupted}
		stale := r.locks.StaleOf[root] != ""
		if stale || r.healedTree[root] {
			for _, id := range ledger.UnendedRuns(j) {
				if id != r.opt.CorrelationID {
					end.Healed = append(end.Healed, id)
				}
			}
		}
		if err := j.EndRun(end, stale); err != nil {
			r.log.Warn().Err(err).Str("tree", root).Msg("end of the run not journaled")
		}
	}
}

// syncJournals makes the sessions' unsynced progress records durable
// before the run reports.
func (r *migrateRun) syncJournals() {
	for root, j := range r.journals {
		if err := j.Sync(); err != nil {
			r.log.Warn().Err(err).Str("tree", root).Msg("journal not synced")
		}
	}
}

// recordRefusals tells the refusal caches what the run found.
func (r *migrateRun) recordRefusals() {
	for i, jb := range r.jobs {
		if jb.cache != nil {
			recordRefusal(jb.cache, jb, r.rep.Sessions[i])
		}
	}
}

// settleDisplaced reports the displaced sidecars the discarder removed
// and those it kept, removes the quarantine directories the removals
// emptied and makes the moves of the kept ones durable.
func (r *migrateRun) settleDisplaced(discarded rollback.DiscardResults) {
	for i, err := range discarded.Kept {
		r.log.Warn().Err(err).Str("session", r.jobs[i].session.Path).Msg("displaced sidecar kept")
	}
	// The emptied quarantine directories are removed once, after the
	// run's last discard: a refresh in the same project would create and
	// sync them again.
	emptied := map[string]string{}
	for _, d := range discarded.Done {
		r.rep.Sessions[d.Job].Displaced = ""
		r.rep.Sessions[d.Job].Notes = append(r.rep.Sessions[d.Job].Notes, rollback.DiscardedNote)
		emptied[filepath.Dir(d.Path)] = ledger.Quarantine(r.jobs[d.Job].session.Tree, r.opt.CorrelationID)
	}
	for dir, stop := range emptied {
		rollback.RemoveEmptyParents(dir, stop)
	}
	syncKeptDisplaced(r.env.Ops, r.rep.Sessions, r.log)
}

// saveCaches saves the trees' state files, the refresh records beside the
// caches (issue 14: each a megabyte or two of a large tree). A file not
// saved loses only work saved: the next run does it again.
func (r *migrateRun) saveCaches() {
	var recordsSaved sync.WaitGroup
	recordsSaved.Go(func() {
		for _, rec := range r.records {
			if err := rec.Save(r.opt.Ops, r.listed[rec.Tree()]); err != nil {
				r.log.Warn().Err(err).Str("tree", rec.Tree()).Msg("refresh record not saved")
			}
		}
	})
	for _, c := range r.refusals {
		if err := c.Save(r.opt.Ops, r.listed[c.Tree()]); err != nil {
			r.log.Warn().Err(err).Str("tree", c.Tree()).Msg("refusal cache not saved")
		}
	}
	wrote := map[string]bool{}
	for i, jb := range r.jobs {
		if o := r.rep.Sessions[i].Outcome; o == OutcomeDone || o == OutcomeFailed || o == OutcomeInterrupted {
			wrote[jb.session.Tree] = true
		}
	}
	for _, c := range r.fresh {
		if !wrote[c.Tree()] {
			// A run that changed nothing writes nothing (issue 12): the
			// verdicts wait for the next run that writes.
			continue
		}
		c.Settle()
		if err := c.Save(r.opt.Ops, r.listed[c.Tree()]); err != nil {
			r.log.Warn().Err(err).Str("tree", c.Tree()).Msg("fresh cache not saved")
		}
	}
	recordsSaved.Wait()
}

func checkMigrateOptions(opt *MigrateOptions) error {
	if opt.seams == nil {
		opt.seams = &seams{}
	}
	switch {
	case opt.MaxSegmentBytes == 0:
		opt.MaxSegmentBytes = wire.MaxSegmentBytes
	case opt.MaxSegmentBytes < 0 || opt.MaxSegmentBytes > wire.MaxSegmentBytes:
		return Usagef("--max-segment-bytes %d: want 1 to %d (pi reads stores with a 64 MiB limit)", opt.MaxSegmentBytes, int64(wire.MaxSegmentBytes))
	}
	if opt.CorrelationID == "" {
		opt.CorrelationID = ledger.NewCorrelationID()
	} else if !ledger.ValidCorrelationID(opt.CorrelationID) {
		return Usagef("--correlation-id %q: want 8 to 128 characters of A-Z a-z 0-9 . _ : -", opt.CorrelationID)
	}
	if opt.LockWait < 0 {
		return Usagef("--lock-wait %s: want a positive duration such as 5m", opt.LockWait)
	}
	if opt.LockTimeout < 0 {
		return Usagef("--lock-timeout %s: want a positive duration", opt.LockTimeout)
	}
	if opt.LockTimeout == 0 {
		opt.LockTimeout = rollback.DefaultLockTimeout
	}
	if opt.Jobs < 0 {
		return Usagef("--jobs %d: want a positive number", opt.Jobs)
	}
	return nil
}

// displacedOf is what rollback.Discarder judges a finished session by.
func displacedOf(jb job, res SessionResult) rollback.Displaced {
	class := jb.plan.class
	if res.Healed {
		class = res.Class // found damaged while refreshing (session.damagedBase)
	}
	return rollback.Displaced{Journal: jb.journal, Tree: jb.session.Tree, Rel: jb.session.Rel, Session: jb.session.Path,
		Sidecar: res.Sidecar, Class: class, Installed: res.Outcome == OutcomeDone, Path: res.Displaced,
		Prior: jb.prior, HasPrior: jb.hasPrior,
		Database: jb.session.Format == readers.FormatSQLitev1, HeaderID: res.headerID, PrefixEntries: res.prefixEntries, PrefixChain: res.prefixChain}
}

// syncKeptDisplaced makes the moves of the displaced sidecars the run
// kept durable, each directory once (a discarded copy needs none: a crash
// that undoes its move leaves a backup, which fsck quarantines).
func syncKeptDisplaced(ops durable.Ops, sessions []SessionResult, log zerolog.Logger) {
	synced := map[string]bool{}
	for _, s := range sessions {
		if s.Displaced == "" {
			continue
		}
		for _, dir := range s.syncDirs {
			if synced[dir] {
				continue
			}
			synced[dir] = true
			if err := ops.SyncDir(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
				log.Warn().Err(err).Str("session", s.Path).Msg("the move of the displaced sidecar into the quarantine may not survive a crash")
			}
		}
	}
}
