package tune

import (
	"os"
	"runtime"
	"sync"
)

// A migration runs with one P more than the runtime's default while its
// sessions are small (GOMAXPROCS from the environment still wins). A
// goroutine in a system call keeps its P until the runtime's monitor hands
// it on, and the work of small sessions is mostly system calls that block
// briefly and often (a syncfs, an unlink on a file system mounted with
// discard): an execution trace of a steady refresh had its sessions wait
// for a P four times as long as they ran, while the CPUs had room. A large
// session is work for the CPUs themselves, and a third P on two CPUs only
// makes the kernel share them: while one is read or staged, the default
// holds (issue 14: a steady refresh 0.40 -> 0.37 s, ten 60 MB sessions
// 4.5 -> 5.4 s with the extra P throughout).
//
// The default is the runtime's own (Go 1.25 and later): the CPUs the
// process may use, its cgroup's CPU quota included, followed as it
// changes. Raising GOMAXPROCS stops that following while a run lasts;
// putting the default back (runtime.SetDefaultGOMAXPROCS) starts it again,
// where setting the old number would have kept it stopped for the life of
// the process.
var procs = procState{get: func() int { return runtime.GOMAXPROCS(0) },
	set: func(n int) { runtime.GOMAXPROCS(n) }, setDefault: runtime.SetDefaultGOMAXPROCS}

// procState is what decides the number of Ps of the runs under way.
type procState struct {
	sync.Mutex
	base   int  // the runtime's default, taken when the first run began
	extra  bool // GOMAXPROCS is not set: the extra P may be used
	raised bool // GOMAXPROCS is base+1 now
	runs   int  // migrations under way (tests run several at once)
	heavy  int  // large sessions being read or staged, over all runs
	// get reads GOMAXPROCS, set sets it, setDefault puts the runtime's
	// default back (the runtime's functions; a test's records).
	get        func() int
	set        func(n int)
	setDefault func()
}

// HeavySessionBytes is the size from which a session's reading and
// staging are work for the CPUs rather than for system calls.
const HeavySessionBytes = 16 << 20

// EnterRun raises GOMAXPROCS by one for a migration; ExitRun, called once
// for each EnterRun, puts the default back after the last.
func EnterRun() { procs.enterRun() }

// ExitRun ends what EnterRun began.
func ExitRun() { procs.exitRun() }

// HeavyStart and HeavyEnd bracket the reading and staging of a large
// session: the default number of Ps holds meanwhile.
func HeavyStart() { procs.heavyStart() }

// HeavyEnd ends what HeavyStart began.
func HeavyEnd() { procs.heavyEnd() }

// CPUs is how many CPUs the process may use: GOMAXPROCS as the runtime
// sets it by default (its cgroup's CPU quota, or GOMAXPROCS from the
// environment), not runtime.NumCPU, which counts the host's CPUs whatever
// the quota; during a run, the number as the run found it, without its
// extra P.
func CPUs() int { return procs.cpus() }

func (p *procState) enterRun() {
	p.Lock()
	defer p.Unlock()
	if p.runs == 0 {
		p.base, p.extra, p.heavy = p.get(), os.Getenv("GOMAXPROCS") == "", 0
	}
	p.runs++
	p.apply()
}

func (p *procState) exitRun() {
	p.Lock()
	defer p.Unlock()
	p.runs--
	p.apply()
}

func (p *procState) heavyStart() {
	p.Lock()
	defer p.Unlock()
	p.heavy++
	p.apply()
}

func (p *procState) heavyEnd() {
	p.Lock()
	defer p.Unlock()
	p.heavy--
	p.apply()
}

func (p *procState) cpus() int {
	p.Lock()
	defer p.Unlock()
	if p.runs > 0 {
		return p.base
	}
	return p.get()
}

// apply raises GOMAXPROCS, or puts the default back, for the runs under
// way; p is locked. Nothing is done when nothing changes: a GOMAXPROCS
// from the environment is never touched, and the default is not set again
// (each change stops the world).
func (p *procState) apply() {
	want := p.extra && p.runs > 0 && p.heavy == 0
	if want == p.raised {
		return
	}
	p.raised = want
	if want {
		p.set(p.base + 1)
	} else {
		p.setDefault()
	}
}
