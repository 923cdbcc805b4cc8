package engine

import (
	"context"
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
)

// The schedule of a migrate run (docs/design.md, "The schedule").

// Env is what the per-session pipeline needs from its run.
type Env struct {
	Clock           func() time.Time
	Ops             durable.Ops
	MaxSegmentBytes int64
	LockTimeout     time.Duration
	DryRun          bool
	Force           bool
	Log             zerolog.Logger
	// The session's tree's journal (nil in a dry run), refresh records
	// (nil: every refresh a full one, nothing recorded) and fresh cache
	// (nil: a sidecar written is judged by next run's status).
	Journal *ledger.Journal
	Refresh *ledger.RefreshRecords
	Fresh   *verify.FreshCache
	// InPlace lets a refresh continue the sidecar where it lies (off with
	// --keep-displaced: that displaces nothing to keep).
	InPlace bool
	// slot is the session's place in runJobs' pipeline; waitAside (fsck's
	// rebuilds) runs a lock wait without the place in its caller's pool.
	slot      *buildSlot
	waitAside func(wait func())
	// sessionLocked: the caller holds the session lock for the whole build
	// (fsck --repair, from its check to its rebuild).
	sessionLocked bool
	// onOpened is seams.opened; leftovers keeps the staging directories a
	// session could not remove, for the end of the run.
	onOpened  func(path string)
	leftovers *rollback.Leftovers
}

// opened tells runJobs the session's source has had its first pass: it
// waits for a staging slot and frees its reading slot for the next session.
func (e Env) opened() {
	if e.slot != nil {
		e.slot.staged()
	}
}

// fullPass tells runJobs the session's whole source is about to be read:
// a light reading place (lightRefresh) is traded for a full one first.
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
// session's reading place, so the sessions after it are read meanwhile,
// then takes a place of the same kind again.
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

// buildSlot is one session's place in runJobs' pipeline: a reading place
// (full, or light for a small refresh in place), held until it has a
// staging place, so at most n first passes are held in memory; then the
// staging place, freed once the store is written (docs/design.md).
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
	rollback.WaitWithout(b.holds, wait)
}

func (b *buildSlot) release() {
	if b.holds != nil {
		<-b.holds
		b.holds = nil
		handOver()
	}
}

// handOver lets the goroutine a freed place woke run now, rather than
// after this session blocks while the other CPU spins (issue 14: a steady
// refresh 0.78 -> 0.70 s of CPU, median of 15 alternating runs).
func handOver() { runtime.Gosched() }

func (e Env) now() time.Time {
	if e.Clock != nil {
		return e.Clock()
	}
	return time.Now()
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

// planInto plans every job (plan(i)) on as many goroutines as there are
// CPUs, in order, closing ready[i] (if ready is not nil) once jobs[i] is
// planned. Once busy is closed (the first session started), one goroutine
// plans the rest: planners on every CPU kept the sessions waiting (issue
// 14: a steady refresh 0.71 → 0.52 s). Once ctx is done the rest are left
// unplanned (action ""), each ready[i] closed all the same: the run
// reports them as not started (issue 34 §4).
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
						// The run's loop waits for it, else until this
						// planner's time slice ends (issue 14: 13-27 ms).
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
	// A reader, a stager and an installer per job, and sealWorkers more
	// to wait for a shared seal while the next ones are read and staged.
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
			// Its result is the plan's, without a worker's two goroutine
			// switches (issue 14: 1,800 of 2,000 sessions of a refresh).
			results[i] = res
			if finished != nil {
				finished(i, results[i])
			}
			continue
		}
		// Reading places are taken here, in the order of jobs: a session
		// waiting for its lock must not hold up those planned before it.
		small := lightRefresh(env, jobs[i])
		place := takePlace(ctx, reading, light, small)
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

// takePlace takes a reading place for a session, in the order of the
// jobs: a full one, or for a small refresh (small) its own kind first and
// a full one if that is free. nil: ctx ended while it waited.
func takePlace(ctx context.Context, reading, light chan struct{}, small bool) chan struct{} {
	place := reading
	if small {
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
	return place
}

// A refresh in place holds its base's ids (~25 bytes an entry) and the
// appended entries: one of at most lightEntries entries that gained at
// most lightAppended bytes holds under 8 MB and may take a light place.
const (
	lightEntries  = 1 << 17
	lightAppended = 4 << 20
)

// lightRefresh guesses from the plan whether jb is a small refresh in
// place (its record allows one, of a small base, by a few appended
// bytes); one that turns out a full rebuild trades places (Env.fullPass).
func lightRefresh(env Env, jb job) bool {
	s := jb.session
	if !env.InPlace || env.DryRun || env.Force || jb.plan.action != PlanRefresh || s.Format != readers.FormatJSONLv3 || !jb.hasPrior {
		return false
	}
	grown := s.Size - jb.prior.SourceBytes
	return jb.prior.Entries <= lightEntries && grown > 0 && grown <= lightAppended
}

// defaultJobs is --jobs when not given: the CPUs the process may use
// (tune.CPUs: a container's CPU quota, not the host's CPUs).
func defaultJobs() int { return tune.CPUs() }
