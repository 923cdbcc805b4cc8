//go:build failpoints

package durable

import (
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// FailpointsEnabled reports whether this binary was built with
// -tags failpoints, so crash tests can skip themselves otherwise.
const FailpointsEnabled = true

// armed is the crash plan read from the environment on first use. It is
// mutable state, but exists only in failpoints builds.
var armed struct {
	once    sync.Once
	mu      sync.Mutex
	at      map[string]int // name → hit that kills
	hits    map[string]int
	limit   int64 // PISESS_KILL_AFTER_BYTES, 0 = none
	written atomic.Int64
}

func loadArmed() {
	armed.once.Do(func() {
		at, err := parseFailpoints(os.Getenv("PISESS_FAILPOINT"))
		if err != nil {
			panic(err)
		}
		for name := range at {
			if !isRegistered(name) {
				panic(fmt.Sprintf("PISESS_FAILPOINT: unknown failpoint %q", name))
			}
		}
		armed.at, armed.hits = at, map[string]int{}
		if s := os.Getenv("PISESS_KILL_AFTER_BYTES"); s != "" {
			n, err := strconv.ParseInt(s, 10, 64)
			if err != nil || n < 0 {
				panic(fmt.Sprintf("PISESS_KILL_AFTER_BYTES: bad byte count %q", s))
			}
			armed.limit = n
		}
	})
}

// Failpoint kills the process with SIGKILL when PISESS_FAILPOINT arms name
// and this is the armed hit: no deferred function, no buffered output, no
// unlock runs, as in a real crash (the page cache survives, so a crash test
// proves the order of steps, not the placement of fsyncs). A name never
// passed to [Register] panics: the harness could not know to test it.
func Failpoint(name string) {
	if !isRegistered(name) {
		panic(fmt.Sprintf("durable: failpoint %q hit but never registered", name))
	}
	loadArmed()
	armed.mu.Lock()
	armed.hits[name]++
	hit := armed.at[name] != 0 && armed.hits[name] == armed.at[name]
	armed.mu.Unlock()
	if hit {
		killSelf("failpoint " + name)
	}
}

// writeBudget counts bytes written through the Ops write primitive against
// PISESS_KILL_AFTER_BYTES: it returns how many of the next n bytes may be
// written and whether the process must then die, leaving a torn write of
// exactly the limit in total.
func writeBudget(n int) (allow int, kill bool) {
	loadArmed()
	if armed.limit == 0 {
		return n, false
	}
	after := armed.written.Add(int64(n))
	if after < armed.limit {
		return n, false
	}
	allow = n - int(after-armed.limit)
	return max(allow, 0), true
}

func killSelf(reason string) {
	fmt.Fprintf(os.Stderr, "pisess: %s: SIGKILL\n", reason)
	unix.Kill(unix.Getpid(), unix.SIGKILL)
	for {
		time.Sleep(time.Hour) // the signal is on its way
	}
}

// isRegistered reports whether name was registered (only armed builds ask).
func isRegistered(name string) bool {
	registry.Lock()
	defer registry.Unlock()
	return registry.names[name]
}
