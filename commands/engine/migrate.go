package engine

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
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

// PlanAction is what migrate plans for one session.
type PlanAction string

const (
	PlanMigrate     PlanAction = "migrate"      // no sidecar yet
	PlanRefresh     PlanAction = "refresh"      // the sidecar is stale (pi wrote the session since)
	PlanSkip        PlanAction = "skip"         // the sidecar is fresh
	PlanNeedsRepair PlanAction = "needs_repair" // corrupt or partial sidecar, or leftovers: fsck's
	PlanRefuse      PlanAction = "refuse"       // the session cannot be migrated
)

// Outcome is what happened to one session.
type Outcome string

const (
	OutcomeDone    Outcome = "done"     // migrated or refreshed, verified, installed
	OutcomeChecked Outcome = "verified" // dry run: built and verified outside the tree
	OutcomeSkipped Outcome = "skipped"  // nothing to do
	OutcomeLeft    Outcome = "left"     // needs repair: reported, left for fsck
	OutcomeRefused Outcome = "refused"
	OutcomeBusy    Outcome = "busy"   // the session lock stayed held
	OutcomeFailed  Outcome = "failed" // an error; nothing installed
	// An interrupted run (issue 34 §3): a session it was working on
	// stopped with nothing installed (its records say how far it got); one
	// it never began has no record at all. Neither is a failure of the
	// session: the next run does it.
	OutcomeInterrupted Outcome = "interrupted"
	OutcomeNotStarted  Outcome = "not_started"
)

// ErrorInfo is a session's error, for --json.
type ErrorInfo struct {
	Class   string `json:"class"`
	Message string `json:"message"`
	Line    int64  `json:"line,omitempty"`
}

// VerificationInfo is the three verification flags, for --json.
type VerificationInfo struct {
	EntryCountMatch bool `json:"entryCountMatch"`
	HashChainMatch  bool `json:"hashChainMatch"`
	IndexConsistent bool `json:"indexConsistent"`
}

// SessionResult is one session of a migrate run.
type SessionResult struct {
	Path         string     `json:"path"`
	SourceFormat string     `json:"sourceFormat"`
	Action       PlanAction `json:"action"`
	// Class is the sidecar's status class as the run found it, when the
	// plan read it (the metrics count sessions by class).
	Class        verify.Class      `json:"class,omitempty"`
	Reason       string            `json:"reason"`
	Outcome      Outcome           `json:"outcome"`
	Entries      uint64            `json:"entries"`
	Bytes        uint64            `json:"bytes"`
	SourceBytes  int64             `json:"sourceBytes"`
	Verification *VerificationInfo `json:"verification,omitempty"`
	Sidecar      string            `json:"sidecar,omitempty"`
	Displaced    string            `json:"displaced,omitempty"`
	Notes        []string          `json:"notes,omitempty"`
	Error        *ErrorInfo        `json:"error,omitempty"`
	// Incremental: the sidecar was refreshed in place, only the entries
	// the source gained appended (refresh.go).
	Incremental bool `json:"incremental,omitempty"`
	// Healed: the sidecar was damaged (Class corrupt or partial) and the
	// run rebuilt it from the source, keeping the damaged one in the
	// quarantine (Displaced) and journaling a repair (issue 34 §2).
	Healed bool `json:"healed,omitempty"`
	// heal is the plan's (plan.heal).
	heal bool
	// prefixEntries and prefixChain describe the sidecar a SQLite
	// session's build replaces (its entry count, read before staging) and
	// the new build's chain after as many entries; headerID is the
	// session's (rollback.Displaced's Database rule).
	prefixEntries         uint64
	prefixChain, headerID string
	// syncDirs are the directories the move of the displaced sidecar into
	// the quarantine changed, synced once at the end of the run if the
	// copy is kept (rollback.CutoverSpec.DeferQuarantineSync).
	syncDirs []string
}

// Problem reports whether the session counts against a clean exit.
//
// A session the reference's model refuses is a problem only when strict:
// real trees always hold some (the TypeScript pi writes entries the Rust
// model rejects), and pi keeps using them as JSONL, so a cron run must not
// fail on them forever. They are listed as notices.
func (s SessionResult) Problem(strict bool) bool {
	switch s.Outcome {
	case OutcomeFailed, OutcomeBusy, OutcomeLeft:
		return true
	case OutcomeRefused:
		return strict
	}
	return false
}

// MigrateTotals counts sessions by outcome and action.
type MigrateTotals struct {
	Sessions  int `json:"sessions"`
	Migrated  int `json:"migrated"`
	Refreshed int `json:"refreshed"`
	// Healed counts the refreshed sidecars that were damaged (Healed).
	Healed      int    `json:"healed"`
	Verified    int    `json:"verified"` // dry run
	Skipped     int    `json:"skipped"`
	NeedsRepair int    `json:"needsRepair"`
	Refused     int    `json:"refused"`
	Busy        int    `json:"busy"`
	Failed      int    `json:"failed"`
	Interrupted int    `json:"interrupted"`
	NotStarted  int    `json:"notStarted"`
	Entries     uint64 `json:"entries"`
	Bytes       uint64 `json:"bytes"`
	SourceBytes int64  `json:"sourceBytes"`
}

// MigrateReport is the result of Migrate.
type MigrateReport struct {
	CorrelationID string          `json:"correlationId"`
	DryRun        bool            `json:"dryRun"`
	Trees         []string        `json:"trees"`
	Sessions      []SessionResult `json:"sessions"`
	Totals        MigrateTotals   `json:"totals"`
	// Skipped are entries discovery did not take as sessions.
	Skipped []discover.Skipped `json:"skippedEntries,omitempty"`
	// Strict: sessions the reference refuses count as problems (exit 4);
	// without it they are notices (pi keeps reading them as JSONL).
	Strict bool `json:"strict"`
	// Healed is what the run repaired of an interrupted run's leftovers
	// before planning, one per tree that had any.
	Healed []HealReport `json:"healed,omitempty"`
}

// Tally implements Report: refused, failed, busy and needs-repair sessions
// are problems left.
func (r MigrateReport) Tally() Tally {
	n := 0
	for _, s := range r.Sessions {
		if s.Problem(r.Strict) {
			n++
		}
	}
	return Tally{Problems: n}
}

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

// Env is what the per-session pipeline needs from its run.
type Env struct {
	Clock           func() time.Time
	Ops             durable.Ops
	MaxSegmentBytes int64
	LockTimeout     time.Duration
	DryRun          bool
	Force           bool
	// Journal is the session's tree journal (nil in a dry run, which
	// writes nothing in the tree).
	Journal *ledger.Journal
	Log     zerolog.Logger
	// Refresh is the session's tree's refresh record (nil: every refresh
	// is a full rebuild, and nothing is recorded).
	Refresh *ledger.RefreshRecords
	// Fresh is the session's tree's fresh cache (nil: a sidecar written is
	// judged by a status next run).
	Fresh *verify.FreshCache
	// InPlace lets a refresh continue the sidecar where it lies
	// (refreshInPlace) instead of rebuilding it from the whole source
	// (KeepDisplaced turns it off: a sidecar continued in place displaces
	// nothing to keep).
	InPlace bool
	// slot, when set, is the session's place in runJobs' pipeline.
	slot *buildSlot
	// waitAside, when set (fsck's rebuilds), runs a wait for a lock
	// without the session's place in its caller's pool.
	waitAside func(wait func())
	// sessionLocked says the caller holds the session lock for the whole
	// build (fsck --repair holds it from its check to its rebuild): the
	// build takes none.
	sessionLocked bool
	// onOpened, when set (a test's seams.opened), is called with the
	// session's path when its source has had its first pass.
	onOpened func(path string)
	// leftovers, when set, holds the staging directories a session could
	// not remove (EMFILE, EIO): the run tries again once every session
	// has ended (retryRemovals).
	leftovers *leftovers
}

// leftovers are directories of pisess's own (staging stores) that a
// session failed to remove.
type leftovers struct {
	ops   durable.Ops
	mu    sync.Mutex
	paths []string
}

// removeStaging removes a staging directory of the session's; one that
// cannot be removed now is left for the end of the run (Env.leftovers),
// and, failing that, for the next run's heal (rollback.StagingPath names
// it after a migration the journal planned).
func (e Env) removeStaging(path string) {
	// By descriptor: a parent swapped for a symlink is never followed.
	err := e.Ops.RemoveAll(path)
	if err == nil {
		return
	}
	e.Log.Debug().Err(err).Str("staging", path).Msg("staging directory not removed: tried again at the end of the run")
	if e.leftovers != nil {
		e.leftovers.mu.Lock()
		e.leftovers.paths = append(e.leftovers.paths, path)
		e.leftovers.mu.Unlock()
	}
}

// retry removes the directories left, once the sessions that held the
// run's descriptors have ended; what still cannot be removed is logged
// and left for the next run's heal.
func (l *leftovers) retry(log zerolog.Logger) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, p := range l.paths {
		if err := l.ops.RemoveAll(p); err != nil {
			log.Warn().Err(err).Str("staging", p).Msg("staging directory left: the next run's heal quarantines it")
		}
	}
	l.paths = nil
}

// opened tells runJobs the session's source has had its first pass: it
// waits for a staging slot and frees its reading slot for the next session.
func (e Env) opened() {
	if e.slot != nil {
		e.slot.staged()
	}
}

// fullPass tells runJobs the session's source is about to have a full
// first pass: a session that was given a small refresh's reading place
// (lightRefresh) and must be rebuilt from its whole source trades it for
// a full one first.
func (e Env) fullPass() {
	if e.slot != nil {
		e.slot.full()
	}
}

// yield tells runJobs the session's store is written: it frees its slot,
// and the session's verification and install (mostly waits on the disk)
// overlap the next session's staging.
func (e Env) yield() {
	if e.slot != nil {
		e.slot.release()
	}
}

// aside runs wait (for pi to let go of the session's lock) without the
// session's reading place, so that the sessions planned after it are read
// meanwhile instead of waiting up to --lock-timeout behind it, then takes
// a place of the same kind again.
func (e Env) aside(wait func()) {
	switch {
	case e.slot != nil:
		e.slot.aside(wait)
	case e.waitAside != nil:
		e.waitAside(wait)
	default:
		wait()
	}
}

// buildSlot is one session's place in runJobs' pipeline. With --jobs n,
// n sessions have their source read (the first pass: links and
// fingerprint), n are staged, and the rest are verified and installed:
// the three overlap, so that even --jobs 1 keeps both cores of a small
// machine busy (issue 14). A session holds its reading slot until it has
// a staging slot, so at most n first passes are held in memory. n more
// reading places are for small refreshes in place (lightRefresh), whose
// reading holds a few megabytes at most: the steady refresh of cron is
// mostly their reading (the record's prefix read and hashed, the rows).
type buildSlot struct {
	// reading is the reading place taken for the session (a full one,
	// or a light one); fullReading are the full ones (full).
	reading, fullReading, staging chan struct{}
	holds                         chan struct{} // the slot held: reading, staging or nil
}

func (b *buildSlot) staged() {
	if b.holds != b.reading {
		return
	}
	b.staging <- struct{}{}
	<-b.reading
	b.holds = b.staging
	handOver()
}

// full trades a light reading place still held for a full one.
func (b *buildSlot) full() {
	if b.holds != b.reading || b.reading == b.fullReading {
		return
	}
	b.fullReading <- struct{}{}
	<-b.reading
	b.reading, b.holds = b.fullReading, b.fullReading
}

func (b *buildSlot) aside(wait func()) {
	if b.holds == nil || b.holds != b.reading {
		wait()
		return
	}
	// Back in the queue for a place after it: the lock is held meanwhile,
	// as it is while the source is read (pi's next write waits for it).
	waitWithout(b.holds, wait)
}

func (b *buildSlot) release() {
	if b.holds != nil {
		<-b.holds
		b.holds = nil
		handOver()
	}
}

// handOver lets the goroutine a freed place woke (runJobs' loop, the next
// session's worker) run now: woken on this CPU, it would wait for this
// session to block, while the other CPU plans or spins looking for work
// (issue 14: a steady refresh, median of 15 alternating runs, 0.78 -> 0.70
// s of CPU at the same wall time).
func handOver() { runtime.Gosched() }

func (e Env) now() time.Time {
	if e.Clock != nil {
		return e.Clock()
	}
	return time.Now()
}

// Migrate migrates every session under opts.Paths (FORMAT.md §1, §8, §11;
// issue "pisess migrate"): discover, plan, then per session — under the
// session lock — build a staging store, verify it against the source,
// write the clean source state and cut it over. Every phase is a ledger
// event carrying the run's correlation id, in the tree journal and in the
// store's own ledger. A dry run builds and verifies outside the tree and
// writes nothing in it.
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
		locks, healed, err := r.lockAndHeal(ctx, trees)
		defer unlockAll(locks)
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
	// each tree; generations are the trees' ledger.Generation, taken just
	// before.
	cachesOf    map[string]*treeCaches
	generations map[string]string
	// journals are the trees' journals, by root (none in a dry run).
	journals map[string]*ledger.Journal
	// listed are the sessions the walk found, by tree (for the caches'
	// saves, which drop the entries of sessions that are gone).
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
	// startedAt is when the run began (its start records); staleOf the
	// holder text of each tree's dead run whose lock it took over;
	// healedTree the trees where it healed a killed run's leftovers.
	startedAt  string
	staleOf    map[string]string
	healedTree map[string]bool
	// lockOf are the tree locks held, by root.
	lockOf map[string]*durable.Lock
}

func (r *migrateRun) now() time.Time {
	if r.opt.Clock != nil {
		return r.opt.Clock()
	}
	return time.Now()
}

// walk discovers the run's trees. Each tree's caches are read on
// goroutines of their own from when the walk meets the tree, while it is
// listed; the walk then takes from the fresh cache the headers of the
// session files unchanged since a run judged them (a steady tree is
// walked without opening its sessions). Each tree's generation is taken
// before its caches are read: the run compares it once it holds the tree
// lock (lockAndHeal). A walk again reads the caches again.
func (r *migrateRun) walk(ctx context.Context) ([]discover.Tree, error) {
	r.cachesOf, r.generations = map[string]*treeCaches{}, map[string]string{}
	trees, err := walkRootsWith(ctx, r.opt.Paths, discover.Options{Headers: func(root string) discover.Headers {
		if r.cachesOf[root] == nil {
			r.generations[root] = ledger.Generation(root)
			r.cachesOf[root] = loadTreeCaches(root, r.judges)
		}
		return r.cachesOf[root]
	}})
	if f := r.opt.seams.walkedHook(); f != nil {
		f()
	}
	return trees, err
}

// lockAndHeal takes every tree's lock (the caller releases the locks
// returned, whatever the error) and heals: what an interrupted run left
// is finished or undone before planning (issue 12, item 9), so that the
// next cron run converges with no operator. It returns the trees as they
// are then.
//
// A run plans only from what it sees while it holds the tree locks (issue
// 34 §1: a run that waited for the lock planned from the walk it made
// before, refreshed the sidecars the run ahead of it had installed and
// took that run's staging for leftovers): the trees are walked, and their
// state files read, again when another run may have worked on one since
// the walk — its generation moved, or its lock was waited for — and after
// a heal. A run with nothing to do walks once.
func (r *migrateRun) lockAndHeal(ctx context.Context, trees []discover.Tree) (map[string]*durable.Lock, []discover.Tree, error) {
	locks, stale, waited, err := lockTrees(ctx, r.log, r.opt.Ops, trees, r.opt.LockWait)
	if err != nil {
		return nil, nil, err
	}
	r.staleOf, r.lockOf = stale, locks
	if r.changedSinceWalk(trees, waited) {
		if trees, err = r.walk(ctx); err != nil {
			return locks, nil, err
		}
	}
	healed := false
	for _, t := range trees {
		h, err := heal(ctx, r.log, r.opt, t, stale[t.Root], ledger.Hold(r.lockOf[t.Root], r.opt.CorrelationID))
		if h != nil {
			r.rep.Healed = append(r.rep.Healed, *h)
			healed, r.healedTree[t.Root] = true, true
		}
		if err != nil {
			return locks, nil, fmt.Errorf("repair the leftovers of an interrupted run in %s: %w", t.Root, err)
		}
	}
	if healed {
		if trees, err = r.walk(ctx); err != nil {
			return locks, nil, err
		}
	}
	return locks, trees, nil
}

// changedSinceWalk reports whether another run may have worked on one of
// trees (all locked) since the walk: its lock was waited for, or its
// generation is not the one taken before its caches were read.
func (r *migrateRun) changedSinceWalk(trees []discover.Tree, waited map[string]bool) bool {
	for _, t := range trees {
		if t.SymlinkAncestor != "" {
			continue // neither locked nor written
		}
		if g, ok := r.generations[t.Root]; waited[t.Root] || !ok || g != ledger.Generation(t.Root) {
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
// and state files. The jobs are made first, then planned on goroutines of
// their own while the first planned are already run (issue 14: the
// planning of a steady tree is mostly system calls, the runs of its few
// stale sessions leave a core idle). A job is large: made once, in place.
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
				Command: "migrate", PID: os.Getpid()}, ledger.Hold(r.lockOf[t.Root], r.opt.CorrelationID))
			r.journals[t.Root] = j
		}
		var cache *ledger.RefusalCache
		var fc *verify.FreshCache
		tc := r.cachesOf[t.Root]
		if tc == nil && t.SymlinkAncestor == "" {
			tc = loadTreeCaches(t.Root, r.judges) // the walk meets every tree: not reached
		}
		if t.SymlinkAncestor == "" {
			cache, fc = tc.refusals.get(), tc.fresh.get()
			r.refusals, r.fresh = append(r.refusals, cache), append(r.fresh, fc)
		}
		var rec *ledger.RefreshRecords
		if j != nil {
			rec = tc.records.get()
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
				// What the record said before the session's run replaces
				// it: the evidence about the sidecar a refresh displaces
				// (read for the sessions that run only: the records are
				// decoded when first asked for).
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
	// Sessions not finished yet: a seal lingers only while another one
	// may come to share it.
	var unfinished atomic.Int64
	unfinished.Store(int64(len(r.jobs)))
	if ops.Seals == nil {
		ops.Seals = &durable.SyncGroup{Linger: opt.seams.linger(), // the jobs share their seals
			Others: func() bool { return unfinished.Load() > 1 }}
	}
	r.env = Env{Clock: opt.Clock, Ops: ops, MaxSegmentBytes: opt.MaxSegmentBytes,
		LockTimeout: opt.LockTimeout, DryRun: opt.DryRun, Force: opt.Force, Log: r.log,
		InPlace: !opt.KeepDisplaced && !opt.seams.fullRefreshes(), onOpened: opt.seams.openedHook(),
		leftovers: &leftovers{ops: ops}}
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
		// Only the bytes the plan counted: a skipped or refused
		// session's would take the progress past its total.
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
	r.env.leftovers.retry(r.log)
	<-planReported
	if dq == nil {
		return rollback.DiscardResults{}
	}
	return dq.Wait()
}

// sessionReporter reports each session's end once the plan is reported
// (OnPlan first, as a progress bar or a JSON progress stream needs it),
// never two at once.
type sessionReporter struct {
	mu       sync.Mutex
	sessions int
	report   func(i int, res SessionResult)
	onPlan   func(sessions int, bytes int64)
	reported bool
	held     []endedSession // while the plan is not reported
}

type endedSession struct {
	i   int
	res SessionResult
}

func newSessionReporter(sessions int, report func(i int, res SessionResult), onPlan func(sessions int, bytes int64)) *sessionReporter {
	return &sessionReporter{sessions: sessions, report: report, onPlan: onPlan}
}

// plan reports the plan (the bytes it will read), then the sessions that
// ended before it.
func (p *sessionReporter) plan(bytes int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.onPlan != nil {
		p.onPlan(p.sessions, bytes)
	}
	p.reported = true
	for _, e := range p.held {
		p.report(e.i, e.res)
	}
	p.held = nil
}

// ended reports session i's end, or holds it until the plan is reported.
func (p *sessionReporter) ended(i int, res SessionResult) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.reported {
		p.held = append(p.held, endedSession{i, res})
		return
	}
	p.report(i, res)
}

// endRuns appends each tree's end record (ledger.RunEnd) to the journal
// the run wrote to: its summary for that tree, whether it was
// interrupted, and the dead runs it healed (their leftovers, or their
// tree lock taken over). A run that wrote nothing writes no end, unless
// it took over a dead run's lock, which it then records as healed.
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
		stale := r.staleOf[root] != ""
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

// counts are t by name, as the run's end record keeps them: installed is
// what `pisess runs` lists as the sidecars a run installed.
func (t MigrateTotals) counts() map[string]int64 {
	return map[string]int64{"sessions": int64(t.Sessions), "installed": int64(t.Migrated + t.Refreshed),
		"migrated": int64(t.Migrated), "refreshed": int64(t.Refreshed), "healed": int64(t.Healed),
		"skipped": int64(t.Skipped), "needsRepair": int64(t.NeedsRepair), "refused": int64(t.Refused),
		"busy": int64(t.Busy), "failed": int64(t.Failed), "interrupted": int64(t.Interrupted), "notStarted": int64(t.NotStarted)}
}

// syncJournals makes durable the sessions' progress records, appended
// without their own fsync (ledger.Journal.AppendUnsynced), before the run
// reports.
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

// saveCaches saves the trees' state files. Only work saved is lost when
// one cannot be: the next refresh is a full one, the next run reads the
// refused sessions or judges every sidecar again. The refresh records are
// saved while the caches are: separate files, each a megabyte or two of a
// large tree to encode and write, at the end of the run (issue 14).
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
			// verdicts wait for the next run that writes anyway (in a
			// tree pi uses, the next refresh).
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
		opt.LockTimeout = DefaultLockTimeout
	}
	if opt.Jobs < 0 {
		return Usagef("--jobs %d: want a positive number", opt.Jobs)
	}
	return nil
}

// walkRoots discovers the trees under paths (the default tree when none).
func walkRoots(ctx context.Context, paths []string) ([]discover.Tree, error) {
	return walkRootsWith(ctx, paths, discover.Options{})
}

// walkRootsWith is walkRoots with discovery's options. The walk stops
// when ctx is done (issue 34 §4: an interrupt went on listing the tree).
func walkRootsWith(ctx context.Context, paths []string, opt discover.Options) ([]discover.Tree, error) {
	if len(paths) == 0 {
		roots, err := discover.DefaultRoots()
		if err != nil {
			return nil, fmt.Errorf("default session tree: %w", err)
		}
		paths = roots
	}
	for _, p := range paths {
		if _, err := os.Lstat(p); err != nil {
			return nil, fmt.Errorf("session tree %s: %w", p, err)
		}
	}
	trees, err := discover.WalkContext(ctx, paths, opt)
	if err != nil {
		return nil, fmt.Errorf("discover sessions: %w", err)
	}
	return trees, nil
}

// lockTrees takes every tree's lock, or none: a run never works on a tree
// another run holds (exit 32, naming the holder). It takes each lock the
// way every changing run does (lockTreeForRepair); a lock left by a run
// that died is taken over, and logged. waited names the trees whose lock
// another run held when first tried.
func lockTrees(ctx context.Context, log zerolog.Logger, ops durable.Ops, trees []discover.Tree, wait time.Duration) (locks map[string]*durable.Lock, staleOf map[string]string, waited map[string]bool, _ error) {
	locks, staleOf, waited = map[string]*durable.Lock{}, map[string]string{}, map[string]bool{}
	for _, t := range trees {
		if t.SymlinkAncestor != "" {
			continue // nothing will be written there
		}
		if len(t.Sessions) == 0 && len(t.Leftovers) == 0 {
			if _, err := os.Lstat(filepath.Join(t.Root, ledger.PisessDir)); err != nil {
				// Nothing to do in a tree pisess never wrote (an empty or
				// mistyped directory): leave no .pisess behind.
				continue
			}
		}
		l, stale, err := ledger.LockTreeWait(ctx, ops, t.Root, 0)
		if err != nil && wait > 0 && IsTreeLocked(err) {
			waited[t.Root] = true
			l, stale, err = ledger.LockTreeWait(ctx, ops, t.Root, wait)
		}
		if err != nil {
			unlockAll(locks)
			return nil, nil, nil, fmt.Errorf("lock tree %s: %w", t.Root, err)
		}
		if stale != "" {
			log.Warn().Str("tree", t.Root).Str("holder", stale).Msg("took over the tree lock of a run that died holding it")
			staleOf[t.Root] = stale
		}
		locks[t.Root] = l
	}
	return locks, staleOf, waited, nil
}

func unlockAll(locks map[string]*durable.Lock) {
	for _, l := range locks {
		_ = l.Unlock()
	}
}

type job struct {
	session discover.Session
	plan    plan
	journal *ledger.Journal
	refresh *ledger.RefreshRecords
	// fresh is the tree's fresh cache: it stands in for statuses in the
	// planning, and is told of the sidecars the run writes.
	fresh *verify.FreshCache
	// prior is the session's refresh record as the run found it (valid
	// when hasPrior).
	prior    ledger.RefreshRecord
	hasPrior bool
	// cache is the tree's refusal cache; identity the session file's
	// identity taken before anything read it (valid when hasIdentity).
	cache       *ledger.RefusalCache
	identity    ledger.FileIdentity
	hasIdentity bool
	fromCache   bool
}

// planAll plans sessions on as many goroutines as there are CPUs, and
// returns the jobs in the sessions' order. Planning is mostly system calls
// (a status read, or the fresh cache's lstats of every sidecar file): on a
// steady tree of thousands of sessions it was most of a no-op run.
func planAll(sessions []discover.Session, plan func(discover.Session) job) []job {
	jobs := make([]job, len(sessions))
	planInto(context.Background(), jobs, nil, nil, func(i int) { jobs[i] = plan(sessions[i]) })
	return jobs
}

// planInto calls plan(i), which plans jobs[i], for every job, on as many
// goroutines as there are CPUs, taking the jobs in order, and closes
// ready[i] (when ready is not nil) once jobs[i] is planned. Once busy is
// closed (the run's first session has started), one goroutine plans the
// rest: planning is far ahead of the sessions, and its system calls on
// every CPU kept the sessions waiting for one (issue 14: a steady refresh
// 0.71 → 0.52 s, and 0.25 s less CPU, in alternating runs; a run with
// nothing to do keeps every planner). Once ctx is done the jobs not
// planned yet are left unplanned (their plan's action is ""), each ready[i]
// closed all the same: an interrupt stops the planning at once (issue 34
// §4), and the run reports those sessions as not started.
func planInto(ctx context.Context, jobs []job, ready []chan struct{}, busy <-chan struct{}, plan func(i int)) {
	workers := min(max(tune.CPUs(), 2), len(jobs))
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for w == 0 || !isClosed(busy) {
				i := int(next.Add(1) - 1)
				if i >= len(jobs) {
					return
				}
				if ctx.Err() != nil {
					if ready != nil {
						close(ready[i])
					}
					continue
				}
				plan(i)
				if ready != nil {
					close(ready[i])
					if jobs[i].plan.runs() {
						// The run's loop waits for it: it is woken on this
						// CPU, where it would wait for this planner's time
						// slice (~10 ms) to end while the other CPU plans
						// too (issue 14: the first session of a steady
						// refresh started 13-27 ms after its plan).
						handOver()
					}
				}
			}
		}()
	}
	wg.Wait()
}

// isClosed reports whether c (nil: never) is closed.
func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// sealLinger is how long a session's seal waits for others to share its
// syncfs (durable.SyncGroup.Linger); sealWorkers bounds the sessions that
// can wait so, each holding its session lock (pi waits that long at most
// to write it).
const (
	sealLinger  = 3 * time.Millisecond
	sealWorkers = 8
)

// runJobs runs the per-session pipeline on up to n sessions at once and
// returns the results in the order of jobs. It closes busy (when not nil)
// as the first session starts.
func runJobs(ctx context.Context, env Env, jobs []job, ready []chan struct{}, busy chan struct{}, n int, correlationID string, finished func(i int, res SessionResult)) []SessionResult {
	if n <= 0 {
		n = defaultJobs()
	}
	results := make([]SessionResult, len(jobs))
	type started struct {
		i       int
		reading chan struct{} // the reading place taken for it
		heavy   bool          // its reading and staging are work for the CPUs (tune.HeavyStart)
	}
	next := make(chan started)
	reading, light, staging := make(chan struct{}, n), make(chan struct{}, n), make(chan struct{}, n)
	var wg sync.WaitGroup
	// Besides a reader, a stager and a third worker per job, sealWorkers
	// more let sessions wait for a shared seal (SyncGroup.Linger) while
	// the next ones are read and staged.
	for w := 0; w < 3*n+sealWorkers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for st := range next {
				// The reading slot was taken for i by the loop below.
				i := st.i
				slot := &buildSlot{reading: st.reading, fullReading: reading, staging: staging, holds: st.reading}
				e := env
				e.Journal, e.Refresh, e.Fresh, e.slot = jobs[i].journal, jobs[i].refresh, jobs[i].fresh, slot
				if st.heavy {
					tune.HeavyStart()
				}
				results[i] = runSession(ctx, e, jobs[i].session, jobs[i].plan, correlationID)
				if st.heavy {
					tune.HeavyEnd()
				}
				slot.release()
				if finished != nil {
					finished(i, results[i])
				}
			}
		}()
	}
	// notStarted reports job i, which the run never began (issue 34 §3:
	// not a failure, nothing of it read or written).
	notStarted := func(i int) {
		results[i] = planned(jobs[i].session, jobs[i].plan)
		results[i].Outcome = OutcomeNotStarted
		results[i].Reason = "not started: the run was interrupted"
		if finished != nil {
			finished(i, results[i])
		}
	}
	for i := range jobs {
		if ready != nil {
			<-ready[i] // planned, or left unplanned by an interrupt (planInto)
		}
		if jobs[i].plan.action == "" || ctx.Err() != nil && jobs[i].plan.runs() {
			notStarted(i)
			continue
		}
		if res, ok := decided(jobs[i].session, jobs[i].plan); ok {
			// Nothing to read or write: its result is the plan's, without
			// the two goroutine switches of a worker (issue 14: 1,800 of
			// the 2,000 sessions of a steady refresh).
			results[i] = res
			if finished != nil {
				finished(i, results[i])
			}
			continue
		}
		// Reading slots are taken here, in the order of jobs, not by
		// the workers that race for them: a session that waits for its
		// lock (pi is writing it) must not start before, and hold up,
		// the sessions planned ahead of it.
		place, small := reading, lightRefresh(env, jobs[i])
		if small {
			// Its own kind of place first, a full one if that is free.
			select {
			case light <- struct{}{}:
				place = light
			default:
				select {
				case light <- struct{}{}:
					place = light
				case reading <- struct{}{}:
				case <-ctx.Done():
					place = nil
				}
			}
		} else {
			select {
			case reading <- struct{}{}:
			case <-ctx.Done():
				place = nil
			}
		}
		if place == nil {
			notStarted(i) // interrupted while it waited for a place
			continue
		}
		if busy != nil {
			close(busy)
			busy = nil
		}
		next <- started{i, place, jobs[i].session.Size >= tune.HeavySessionBytes && !small}
	}
	close(next)
	wg.Wait()
	return results
}

// A refresh in place reads little besides its source's recorded prefix
// (hashed as it is read) and its store's index rows: what it holds is its
// base's ids (~25 bytes an entry, idgraph) and the appended entries. One
// of at most lightEntries entries that gained at most lightAppended bytes
// may take a light reading place (buildSlot): each holds under 8 MB.
const (
	lightEntries  = 1 << 17
	lightAppended = 4 << 20
)

// lightRefresh reports whether jb's reading is expected to be a small
// refresh in place: a refresh of a JSONL session whose record (taken at
// planning) allows the in-place continuation, of a small base, by a few
// appended bytes. A guess from the plan: a session that turns out to need
// a full rebuild trades its light place for a full one (Env.fullPass).
func lightRefresh(env Env, jb job) bool {
	s := jb.session
	if !env.InPlace || env.DryRun || env.Force || jb.plan.action != PlanRefresh || s.Format != readers.FormatJSONLv3 || !jb.hasPrior {
		return false
	}
	grown := s.Size - jb.prior.SourceBytes
	return jb.prior.Entries <= lightEntries && grown > 0 && grown <= lightAppended
}

func totals(list []SessionResult) MigrateTotals {
	var t MigrateTotals
	t.Sessions = len(list)
	for _, s := range list {
		t.Entries += s.Entries
		t.Bytes += s.Bytes
		t.SourceBytes += s.SourceBytes
		switch s.Outcome {
		case OutcomeDone:
			if s.Action == PlanRefresh || s.Displaced != "" {
				t.Refreshed++
				if s.Healed {
					t.Healed++
				}
			} else {
				t.Migrated++
			}
		case OutcomeChecked:
			t.Verified++
		case OutcomeSkipped:
			t.Skipped++
		case OutcomeLeft:
			t.NeedsRepair++
		case OutcomeRefused:
			t.Refused++
		case OutcomeBusy:
			t.Busy++
		case OutcomeFailed:
			t.Failed++
		case OutcomeInterrupted:
			t.Interrupted++
		case OutcomeNotStarted:
			t.NotStarted++
		}
	}
	return t
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
// kept durable: each directory they changed is synced once, however many
// sessions share it (a discarded copy needs none: a crash that undoes its
// move leaves it at its backup name, which fsck quarantines).
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
