package tune

import "os"

// Start begins what pisess asks of the runtime for the command line args
// (os.Args) and returns what ends it: the soft memory limit that follows
// the live heap, unless the environment sets GOMEMLIMIT (memlimit.go), and
// the profiles of a build with the profile tag. The collector's target
// (GOGC) and GOMAXPROCS are the runtime's defaults, or the environment's.
func Start(args []string) (stop func()) {
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
