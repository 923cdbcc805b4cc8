package engine

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
)

// TestDefaultJobsFollowGOMAXPROCS: without --jobs, migrate runs as many
// sessions at once as the process may use CPUs (GOMAXPROCS: a container's
// CPU quota, here the environment's), not as the host has
// (runtime.NumCPU): a child with GOMAXPROCS = NumCPU+3 takes NumCPU+3.
func TestDefaultJobsFollowGOMAXPROCS(t *testing.T) {
	if os.Getenv("PISESS_TEST_JOBS_CHILD") == "1" {
		fmt.Printf("jobs=%d\n", defaultJobs())
		return
	}
	want := runtime.NumCPU() + 3
	cmd := exec.Command(os.Args[0], "-test.run=^TestDefaultJobsFollowGOMAXPROCS$", "-test.count=1")
	cmd.Env = append(os.Environ(), "PISESS_TEST_JOBS_CHILD=1", fmt.Sprintf("GOMAXPROCS=%d", want))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if w := fmt.Sprintf("jobs=%d\n", want); !strings.Contains(string(out), w) {
		t.Fatalf("child with GOMAXPROCS=%d (NumCPU %d): %q, want %q", want, runtime.NumCPU(), out, w)
	}
}
