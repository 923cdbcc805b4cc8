//go:build !failpoints

package durable

// FailpointsEnabled reports whether this binary was built with
// -tags failpoints, so crash tests can skip themselves otherwise.
const FailpointsEnabled = false

// Failpoint marks a point where a crash test may kill the process. In
// normal builds it does nothing and compiles away; see failpoint_on.go for
// the -tags failpoints version.
func Failpoint(name string) {}

// writeBudget lets every write through in normal builds.
func writeBudget(n int) (allow int, kill bool) { return n, false }

func killSelf(reason string) {}
