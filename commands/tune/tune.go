package tune

import (
	"os"
	"runtime/debug"
)

// Start turns the knobs and returns what ends them: GOGC 400 and the soft
// memory limit that follows the live heap unless the environment sets GOGC
// or GOMEMLIMIT, and the profiles of a build with the profile tag.
// GOMAXPROCS is a migration's own (EnterRun).
func Start() (stop func()) {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
	done := make(chan struct{})
	if os.Getenv("GOMEMLIMIT") == "" {
		go followLiveHeap(done)
	}
	stopProfiling := startProfiling()
	return func() {
		stopProfiling()
		close(done)
	}
}
