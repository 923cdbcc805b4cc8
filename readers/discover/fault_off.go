//go:build !failpoints

package discover

// sourceFault is the fault a failpoints build injects into reading the
// session file at path (see fault_on.go); in normal builds there is none
// and the call compiles away.
func sourceFault(op, path string) error { return nil }
