package tune

// Start begins what the command line args (os.Args) ask of the runtime and
// returns what ends it: the profiles of a build with the profile tag;
// nothing in a release build. The collector's settings (GOGC, GOMEMLIMIT)
// and GOMAXPROCS are the Go runtime's own, as the environment sets them
// (doc.go says why pisess no longer sets its own).
func Start(args []string) (stop func()) {
	return startProfiling()
}
