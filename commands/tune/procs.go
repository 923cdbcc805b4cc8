package tune

import "runtime"

// CPUs is how many CPUs the process may use: GOMAXPROCS as the runtime
// sets it by default (Go 1.25 and later: its cgroup's CPU quota, followed
// as it changes), or as the environment sets it; not runtime.NumCPU, which
// counts the host's CPUs whatever the quota. It sizes --jobs and the
// planners.
func CPUs() int { return runtime.GOMAXPROCS(0) }
