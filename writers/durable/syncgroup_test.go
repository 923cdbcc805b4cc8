package durable

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Every caller returns only after a sync that began after its call ended,
// and concurrent callers share syncs.
func TestSyncGroupCoversEveryCaller(t *testing.T) {
	var g SyncGroup
	var mu sync.Mutex
	type run struct{ start, end time.Time }
	var runs []run
	fn := func() error {
		r := run{start: time.Now()}
		time.Sleep(5 * time.Millisecond)
		r.end = time.Now()
		mu.Lock()
		runs = append(runs, r)
		mu.Unlock()
		return nil
	}
	const callers = 32
	var wg sync.WaitGroup
	var uncovered atomic.Int32
	for i := 0; i < callers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			called := time.Now()
			if err := g.sync(1, fn); err != nil {
				t.Error(err)
			}
			returned := time.Now()
			mu.Lock()
			defer mu.Unlock()
			for _, r := range runs {
				if !r.start.Before(called) && !r.end.After(returned) {
					return
				}
			}
			uncovered.Add(1)
		}()
	}
	wg.Wait()
	if n := uncovered.Load(); n > 0 {
		t.Fatalf("%d callers returned with no sync begun after their call", n)
	}
	if len(runs) >= callers {
		t.Fatalf("%d syncs for %d concurrent callers: none shared", len(runs), callers)
	}
}

// A failed sync fails every caller it was to cover.
func TestSyncGroupError(t *testing.T) {
	var g SyncGroup
	boom := errors.New("EIO")
	if err := g.sync(7, func() error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("err %v", err)
	}
	if err := g.sync(7, func() error { return nil }); err != nil {
		t.Fatalf("a later good sync: %v", err)
	}
	if err := g.sync(8, func() error { return nil }); err != nil {
		t.Fatalf("another filesystem: %v", err)
	}
}
