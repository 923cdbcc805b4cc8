package durable

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
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

// With a linger, callers that arrive one after another within it share one
// sync, each still covered (the sync begins after the last of them), where
// without one each caller that finds no sync running starts its own.
func TestSyncGroupLinger(t *testing.T) {
	for _, linger := range []time.Duration{0, 200 * time.Millisecond} {
		g := SyncGroup{Linger: linger}
		var runs atomic.Int32
		var started atomic.Int64 // of the last sync, UnixNano
		var wg sync.WaitGroup
		const callers = 4
		for i := 0; i < callers; i++ {
			wg.Add(1)
			called := time.Now()
			go func() {
				defer wg.Done()
				if err := g.sync(3, func() error {
					runs.Add(1)
					started.Store(time.Now().UnixNano())
					return nil
				}); err != nil {
					t.Error(err)
				}
				if started.Load() < called.UnixNano() {
					t.Error("a caller returned before a sync that began after its call")
				}
			}()
			time.Sleep(5 * time.Millisecond) // one after another
		}
		wg.Wait()
		switch n := runs.Load(); {
		case linger > 0 && n != 1:
			t.Errorf("linger %v: %d syncs for %d callers within it, want 1", linger, n, callers)
		case linger == 0 && n < 2:
			t.Errorf("no linger: %d syncs for %d callers 5 ms apart", n, callers)
		}
	}
}

// A linger is skipped when no other job can come to share the sync.
func TestSyncGroupLingerAlone(t *testing.T) {
	g := SyncGroup{Linger: time.Hour, Others: func() bool { return false }}
	done := make(chan error, 1)
	go func() { done <- g.sync(5, func() error { return nil }) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a job alone lingered")
	}
}

// Where the system has no filesystem sync (ENOSYS, as on macOS), the group
// learns it from the first call: later callers get ENOSYS at once, to seal
// on their own, rather than linger for a sync that cannot happen.
func TestSyncGroupUnsupported(t *testing.T) {
	var g SyncGroup
	calls := 0
	fn := func() error { calls++; return unix.ENOSYS }
	if err := g.sync(4, fn); !errors.Is(err, unix.ENOSYS) {
		t.Fatalf("err %v, want ENOSYS", err)
	}
	g.Linger = time.Hour
	done := make(chan error, 1)
	go func() { done <- g.sync(4, fn) }()
	select {
	case err := <-done:
		if !errors.Is(err, unix.ENOSYS) || calls != 1 {
			t.Fatalf("err %v after %d calls, want ENOSYS after 1", err, calls)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("lingered for a sync the system does not have")
	}
}

// TestSyncGroupSealNotACoveredOne: the syncfs is made on the oldest seal
// among those it covers, never on one an earlier sync covered, whose
// caller may have returned and closed it before leaving the waiting set
// (a migrate --jobs 2 failed with "syncfs <another session's staging>: bad
// file descriptor"). Here the old seal's caller has its sync done and its
// descriptor closed, still in the set; the next caller's sync must not
// use it. Then many callers open, seal and close at once: no sync ever
// meets a closed descriptor.
func TestSyncGroupSealNotACoveredOne(t *testing.T) {
	dir := t.TempDir()
	open := func() *Seal {
		s, err := OS.OpenSeal(dir)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	stillOpen := func(f *os.File) error {
		if _, err := f.Stat(); err != nil {
			return fmt.Errorf("sync on %s: %w", f.Name(), err)
		}
		return nil
	}

	var g SyncGroup
	covered := open()
	if err := g.syncSeal(1, covered, stillOpen); err != nil {
		t.Fatal(err)
	}
	// As between the broadcast of its sync's end and its wake-up.
	g.mu.Lock()
	g.devs[1].waiting[covered] = g.devs[1].done
	g.mu.Unlock()
	covered.Close()
	next := open()
	defer next.Close()
	if err := g.syncSeal(1, next, stillOpen); err != nil {
		t.Fatalf("the sync used the covered seal: %v", err)
	}

	var g2 SyncGroup
	var wg sync.WaitGroup
	var failed atomic.Int32
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 200; j++ {
				s := open()
				err := g2.syncSeal(1, s, func(f *os.File) error {
					time.Sleep(50 * time.Microsecond)
					return stillOpen(f)
				})
				s.Close()
				if err != nil {
					failed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if n := failed.Load(); n > 0 {
		t.Fatalf("%d of 1,600 seals' syncs met a closed descriptor", n)
	}
}
