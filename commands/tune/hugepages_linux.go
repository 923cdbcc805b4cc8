package tune

import (
	"os"
	"runtime"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The first 32 MiB that the Go heap of a migration (or fsck, verify,
// build, upgrade) uses are advised to be backed by transparent huge pages
// (madvise MADV_HUGEPAGE; the kernel's default mode "madvise" gives them
// to no memory otherwise). Every page the heap first touches is a page
// fault, ~16 µs of CPU on the machine of scripts/bench (a PVM guest): a
// steady refresh of 2,000 sessions touched ~27 MB and spent a fifth of its
// CPU in ~7,000 faults; with 2 MiB pages it takes ~1,900 (issue 14). Only
// the first 32 MiB, so that the rounding to whole huge pages adds a few
// megabytes of RSS at most (the migration of a million entries stays
// within 64 MiB). The advice changes no byte of memory; where the kernel
// has no huge pages it is refused and nothing changes.
const (
	hugeHeapBytes = 32 << 20
	hugePageBytes = 2 << 20
)

// hugePagesEnv turns the advice off when it is "off", "0", "false" or
// "no".
const hugePagesEnv = "PISESS_HUGE_PAGES"

// adviseHeapHugePages advises the first n bytes of the heap: a slice of n
// bytes (and a huge page more, to align) is allocated, which maps that
// much heap without touching it; its aligned middle is advised, and it is
// collected at once, so that the allocations that follow take its pages
// first (the runtime reuses the lowest free addresses). It returns the
// advised range, empty when the kernel refused.
func adviseHeapHugePages(n int) (start, end uintptr) {
	b := make([]byte, n+hugePageBytes)
	start, end = hugeAligned(b)
	if unix.Madvise(b[start-addrOf(b):end-addrOf(b)], unix.MADV_HUGEPAGE) != nil {
		start, end = 0, 0
	}
	b = nil
	runtime.GC()
	return start, end
}

// adviseHugePages advises the heap's first hugeHeapBytes for a command
// that reads and writes sessions (args are the command line), unless the
// environment turns it off. The advice costs ~6 ms (the collection that
// frees the slice, which a short command such as status would never run,
// and its sweep): not worth it where the heap stays a few megabytes.
func adviseHugePages(args []string) {
	if heavyCommand(args) && hugePagesWanted(os.Getenv(hugePagesEnv)) {
		adviseHeapHugePages(hugeHeapBytes)
	}
}

// heavyCommands are the commands whose heap grows to tens of megabytes.
var heavyCommands = map[string]bool{"migrate": true, "fsck": true, "verify": true, "build": true, "upgrade": true}

// heavyCommand reports whether args name one of heavyCommands: the first
// argument that does, wherever it is (a flag's value that happens to be
// such a name only costs the advice).
func heavyCommand(args []string) bool {
	for _, a := range args[min(1, len(args)):] {
		if heavyCommands[a] {
			return true
		}
	}
	return false
}

func hugePagesWanted(env string) bool {
	switch strings.ToLower(strings.TrimSpace(env)) {
	case "off", "0", "false", "no":
		return false
	}
	return true
}

func addrOf(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }

// hugeAligned is the largest range of whole huge pages inside b.
func hugeAligned(b []byte) (start, end uintptr) {
	a := addrOf(b)
	start = (a + hugePageBytes - 1) &^ (hugePageBytes - 1)
	end = (a + uintptr(len(b))) &^ (hugePageBytes - 1)
	return start, max(start, end)
}
