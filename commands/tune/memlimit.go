package tune

import (
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// The soft memory limit follows the live heap: headroom above it when a
// run holds much (verify of a million entries holds ~55 MB), so that the
// collector does not run back to back, and a ceiling of 44 MiB (with the
// binary's ~12 MB of pages, near 64 MiB of RSS) on a run that holds less,
// which still leaves a small live heap 16 MiB to grow into. A fixed 64 MiB
// made that verify 3.5× slower; a fixed 128 MiB let GOGC=400 grow every
// large run to 140 MB.
//
// Below 28 MiB live the limit is the live heap plus 16 MiB, at least 34
// MiB (~10 MB of it is not the heap's): each page the heap grows into is a
// page fault, ~16 µs of CPU on the machine of scripts/bench (a PVM guest),
// and a steady refresh of 2,000 sessions (18 MB live) whose heap grew to
// 33 MB spent a sixth of its CPU on them; collecting that live heap twice
// as often costs a few milliseconds (issue 14).
const (
	limitFloor    = 34 << 20
	smallCeiling  = 44 << 20
	smallHeadroom = 16 << 20
	headroomFloor = 12 << 20
)

// limitFor is the soft limit for a live heap of live bytes: the live heap
// plus a quarter of it again (at least headroomFloor), or plus
// smallHeadroom up to smallCeiling, whichever is more, and at least
// limitFloor.
func limitFor(live uint64) int64 {
	headroom := max(live/4, headroomFloor)
	return int64(max(live+headroom, min(live+smallHeadroom, smallCeiling), limitFloor))
}

// followLiveHeap sets the soft limit now and after each collection's
// result is seen (sampled every 50 ms) until done is closed.
func followLiveHeap(done <-chan struct{}) {
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	set := int64(-1)
	apply := func() {
		metrics.Read(sample)
		var live uint64
		if sample[0].Value.Kind() == metrics.KindUint64 {
			live = sample[0].Value.Uint64()
		}
		if l := limitFor(live); l != set {
			debug.SetMemoryLimit(l)
			set = l
		}
	}
	apply()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-done:
			return
		case <-tick.C:
			apply()
		}
	}
}
