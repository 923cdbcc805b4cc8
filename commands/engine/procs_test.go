package engine

import (
	"runtime"
	"testing"
)

// TestRunProcs: a migration runs with one P more than the default, the
// default while a large session is read or staged, and puts the default
// back when the last run ends; GOMAXPROCS in the environment is left as
// it is.
func TestRunProcs(t *testing.T) {
	t.Setenv("GOMAXPROCS", "")
	def := runtime.GOMAXPROCS(0)
	defer runtime.GOMAXPROCS(def)
	check := func(when string, want int) {
		t.Helper()
		if got := runtime.GOMAXPROCS(0); got != want {
			t.Errorf("%s: GOMAXPROCS %d, want %d", when, got, want)
		}
	}
	enterRun()
	check("a run", def+1)
	heavyStart()
	check("a large session", def)
	enterRun()
	check("a second run beside a large session", def)
	heavyEnd()
	check("two runs, no large session", def+1)
	exitRun()
	check("one run left", def+1)
	exitRun()
	check("no run", def)

	t.Setenv("GOMAXPROCS", "1")
	enterRun()
	check("a run with GOMAXPROCS set", def)
	exitRun()
	check("after it", def)
}
