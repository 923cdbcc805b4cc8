package tune

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestAdviseHeapHugePages checks with the kernel that the advised range
// of the heap is marked for huge pages ("hg" in /proc/self/smaps) and that
// the heap reuses it: a large allocation made after it lands inside it.
func TestAdviseHeapHugePages(t *testing.T) {
	if _, err := os.Stat("/sys/kernel/mm/transparent_hugepage/enabled"); err != nil {
		t.Skipf("this kernel has no transparent huge pages: %v", err)
	}
	start, end := adviseHeapHugePages(8 << 20)
	if end-start < 6<<20 {
		t.Fatalf("advised %d bytes, want at least 6 MiB of the 8", end-start)
	}
	flags := vmaFlags(t, start, end)
	if len(flags) == 0 {
		t.Fatalf("no mapping covers %#x-%#x", start, end)
	}
	for _, f := range flags {
		if !strings.Contains(" "+f+" ", " hg ") {
			t.Errorf("a mapping of the advised range has VmFlags %q, without hg", f)
		}
	}
	// The lowest free pages go first: the unaligned head of the slice
	// (under a huge page), then the advised ones.
	reused := make([]byte, 4<<20)
	if a := addrOf(reused); a+uintptr(len(reused)) <= start || a >= end {
		t.Errorf("a 4 MiB allocation after the advice is at %#x, outside the advised %#x-%#x", a, start, end)
	}
}

func TestHeavyCommand(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{[]string{"pisess", "migrate"}, true},
		{[]string{"pisess", "--log-format", "json", "-q", "fsck", "--repair", "/t"}, true},
		{[]string{"pisess", "verify", "s.v2"}, true},
		{[]string{"pisess", "status", "/t"}, false},
		{[]string{"pisess", "--version"}, false},
		{[]string{"migrate"}, false}, // the program's own name
		{nil, false},
	} {
		if got := heavyCommand(tc.args); got != tc.want {
			t.Errorf("heavyCommand(%q) = %v, want %v", tc.args, got, tc.want)
		}
	}
}

func TestHugePagesWanted(t *testing.T) {
	for env, want := range map[string]bool{"": true, "on": true, "1": true, "off": false, "0": false, "FALSE": false, " no ": false} {
		if got := hugePagesWanted(env); got != want {
			t.Errorf("hugePagesWanted(%q) = %v, want %v", env, got, want)
		}
	}
}

// vmaFlags returns the VmFlags of every mapping of /proc/self/smaps that
// overlaps [start, end).
func vmaFlags(t *testing.T, start, end uintptr) []string {
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Skipf("no /proc/self/smaps: %v", err)
	}
	defer f.Close()
	var out []string
	overlaps := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if lo, hi, ok := vmaRange(line); ok {
			overlaps = lo < end && start < hi
			continue
		}
		if rest, ok := strings.CutPrefix(line, "VmFlags:"); ok && overlaps {
			out = append(out, strings.TrimSpace(rest))
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// vmaRange parses the "lo-hi perms ..." line that begins a mapping.
func vmaRange(line string) (lo, hi uintptr, ok bool) {
	field, _, _ := strings.Cut(line, " ")
	l, h, found := strings.Cut(field, "-")
	if !found {
		return 0, 0, false
	}
	a, err1 := strconv.ParseUint(l, 16, 64)
	b, err2 := strconv.ParseUint(h, 16, 64)
	if err1 != nil || err2 != nil {
		return 0, 0, false
	}
	return uintptr(a), uintptr(b), true
}
