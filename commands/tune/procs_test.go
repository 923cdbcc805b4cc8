package tune

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// TestRunProcs: a migration runs with one P more than the default, the
// default while a large session is read or staged, and puts the default
// back when the last run ends; GOMAXPROCS in the environment is left as
// it is.
func TestRunProcs(t *testing.T) {
	t.Setenv("GOMAXPROCS", "")
	// The runtime's default, as a run without GOMAXPROCS puts it back
	// (were the test's own process started with GOMAXPROCS set).
	runtime.SetDefaultGOMAXPROCS()
	def := runtime.GOMAXPROCS(0)
	check := func(when string, want int) {
		t.Helper()
		if got := runtime.GOMAXPROCS(0); got != want {
			t.Errorf("%s: GOMAXPROCS %d, want %d", when, got, want)
		}
	}
	EnterRun()
	check("a run", def+1)
	HeavyStart()
	check("a large session", def)
	EnterRun()
	check("a second run beside a large session", def)
	HeavyEnd()
	check("two runs, no large session", def+1)
	ExitRun()
	check("one run left", def+1)
	ExitRun()
	check("no run", def)

	t.Setenv("GOMAXPROCS", "1")
	EnterRun()
	check("a run with GOMAXPROCS set", def)
	ExitRun()
	check("after it", def)
}

// TestRunProcsRestoresDefault: the end of the last run, and a large
// session, put the runtime's default back (runtime.SetDefaultGOMAXPROCS,
// which follows the cgroup's CPU quota again), never the number the run
// found (runtime.GOMAXPROCS(n), which would stop that following for the
// life of the process); nothing is set twice; with GOMAXPROCS in the
// environment nothing is set at all.
func TestRunProcsRestoresDefault(t *testing.T) {
	var calls []string
	p := &procState{get: func() int { return 2 },
		set:        func(n int) { calls = append(calls, fmt.Sprintf("set %d", n)) },
		setDefault: func() { calls = append(calls, "default") }}
	t.Setenv("GOMAXPROCS", "")
	p.enterRun()
	p.heavyStart()
	p.enterRun()
	if got := p.cpus(); got != 2 {
		t.Errorf("CPUs during a run: %d, want the 2 it found", got)
	}
	p.heavyEnd()
	p.exitRun()
	p.exitRun()
	if want := []string{"set 3", "default", "set 3", "default"}; !slices.Equal(calls, want) {
		t.Errorf("calls %q, want %q", calls, want)
	}
	calls = nil
	t.Setenv("GOMAXPROCS", "2")
	p.enterRun()
	p.heavyStart()
	p.heavyEnd()
	p.exitRun()
	if len(calls) != 0 {
		t.Errorf("with GOMAXPROCS set: calls %q, want none", calls)
	}
}

// TestCPUsFollowGOMAXPROCS: CPUs is the runtime's GOMAXPROCS (here set by
// the environment, as a cgroup's CPU quota sets the default), not the
// host's CPUs: a child with GOMAXPROCS = NumCPU+3 counts NumCPU+3, and so
// during a run.
func TestCPUsFollowGOMAXPROCS(t *testing.T) {
	if os.Getenv("PISESS_TEST_CPUS_CHILD") == "1" {
		before := CPUs()
		EnterRun()
		during := CPUs()
		ExitRun()
		fmt.Printf("cpus=%d,%d\n", before, during)
		return
	}
	want := runtime.NumCPU() + 3
	cmd := exec.Command(os.Args[0], "-test.run=^TestCPUsFollowGOMAXPROCS$", "-test.count=1")
	cmd.Env = append(os.Environ(), "PISESS_TEST_CPUS_CHILD=1", fmt.Sprintf("GOMAXPROCS=%d", want))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if w := fmt.Sprintf("cpus=%d,%d\n", want, want); !strings.Contains(string(out), w) {
		t.Fatalf("child with GOMAXPROCS=%d (NumCPU %d): %q, want %q", want, runtime.NumCPU(), out, w)
	}
}
