package engine

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
var procs procState

// procState is what decides the number of Ps of the runs under way.
type procState struct {
	sync.Mutex
	base  int  // the runtime's default, taken when the first run began
	extra bool // GOMAXPROCS is not set: the extra P may be used
	runs  int  // migrations under way (tests run several at once)
	heavy int  // large sessions being read or staged, over all runs
}

// heavySessionBytes is the size from which a session's reading and
// staging are work for the CPUs rather than for system calls.
const heavySessionBytes = 16 << 20

// enterRun raises GOMAXPROCS by one for a migration; exitRun, called once
// for each enterRun, puts the default back after the last.
func enterRun() {
	procs.Lock()
	defer procs.Unlock()
	if procs.runs == 0 {
		procs.base, procs.extra, procs.heavy = runtime.GOMAXPROCS(0), os.Getenv("GOMAXPROCS") == "", 0
	}
	procs.runs++
	procs.apply()
}

func exitRun() {
	procs.Lock()
	defer procs.Unlock()
	procs.runs--
	if procs.runs == 0 {
		runtime.GOMAXPROCS(procs.base)
		return
	}
	procs.apply()
}

// heavyStart and heavyEnd bracket the reading and staging of a large
// session: the default number of Ps holds meanwhile.
func heavyStart() {
	procs.Lock()
	defer procs.Unlock()
	procs.heavy++
	procs.apply()
}

func heavyEnd() {
	procs.Lock()
	defer procs.Unlock()
	procs.heavy--
	procs.apply()
}

// apply sets GOMAXPROCS for the runs under way; p is locked. Setting the
// value it already has costs nothing (no stop of the world).
func (p *procState) apply() {
	want := p.base
	if p.extra && p.heavy == 0 {
		want++
	}
	runtime.GOMAXPROCS(want)
}
