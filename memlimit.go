package main

import (
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// The soft memory limit follows the live heap: a floor that keeps a run
// over ordinary sessions, or the migration of one huge session, near 64 MiB
// of RSS (the binary's own pages are ~12 MB of it), and headroom above the
// live heap when a run holds more (verify of a million entries holds ~55
// MB), so that the collector does not run back to back. A fixed 64 MiB
// made that verify 3.5× slower; a fixed 128 MiB let GOGC=400 grow every
// large run to 140 MB.
const (
	limitFloor    = 44 << 20
	headroomFloor = 12 << 20
)

// limitFor is the soft limit for a live heap of live bytes: the floor, or
// the live heap plus a quarter of it again (at least headroomFloor).
func limitFor(live uint64) int64 {
	headroom := max(live/4, headroomFloor)
	return int64(max(live+headroom, limitFloor))
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
