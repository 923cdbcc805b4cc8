package tune

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
)

// TestCPUsFollowGOMAXPROCS: CPUs is the runtime's GOMAXPROCS (here set by
// the environment, as a cgroup's CPU quota sets the default), not the
// host's CPUs: a child with GOMAXPROCS = NumCPU+3 counts NumCPU+3.
func TestCPUsFollowGOMAXPROCS(t *testing.T) {
	if os.Getenv("PISESS_TEST_CPUS_CHILD") == "1" {
		fmt.Printf("cpus=%d\n", CPUs())
		return
	}
	want := runtime.NumCPU() + 3
	cmd := exec.Command(os.Args[0], "-test.run=^TestCPUsFollowGOMAXPROCS$", "-test.count=1")
	cmd.Env = append(os.Environ(), "PISESS_TEST_CPUS_CHILD=1", fmt.Sprintf("GOMAXPROCS=%d", want))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if w := fmt.Sprintf("cpus=%d\n", want); !strings.Contains(string(out), w) {
		t.Fatalf("child with GOMAXPROCS=%d (NumCPU %d): %q, want %q", want, runtime.NumCPU(), out, w)
	}
}
