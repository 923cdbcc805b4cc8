package engine

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"pisess/fixtures"
	"pisess/readers/discover"
	"pisess/writers/durable"
)

// TestRunJobsOverlaps: with --jobs 1 a session's build is a pipeline of
// three stages over consecutive sessions: while the first session is
// being staged (its segment file created), the second's source has had its
// first pass; while the first session's store ledger is written (after
// its verification), or its seal is held, the second is staged.
func TestRunJobsOverlaps(t *testing.T) {
	// Seals that linger would let the second session's seal start the
	// sync that covers the first's: the one this test holds is the first's.
	for _, at := range []string{"staging", "ledger", "seal"} {
		t.Run(at, func(t *testing.T) {
			root := t.TempDir()
			first, _ := migSession(t, root, "a-first", 3)
			second, _ := migSession(t, root, "b-second", 3)
			var secondOpened, secondStaged atomic.Bool
			sm := &seams{noLinger: true, opened: func(path string) {
				if path == second {
					secondOpened.Store(true)
				}
			}}
			ready := func() bool {
				if at == "staging" {
					return secondOpened.Load()
				}
				return secondStaged.Load()
			}
			var overlapped atomic.Bool
			var once sync.Once
			hold := func(name string) {
				if !strings.Contains(name, "a-first.v2.staging.") {
					return
				}
				once.Do(func() {
					for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
						if ready() {
							overlapped.Store(true)
							return
						}
					}
				})
			}
			opt := seamed(root, sm)
			opt.Jobs = 1
			opt.Ops = durable.OS
			suffix := filepath.Join("segments", "0000000000000001.seg")
			if at == "ledger" {
				suffix = filepath.Join("migrations", "ledger.jsonl")
			}
			opt.Ops.OpenFile = func(path string, flag int, perm os.FileMode) (*os.File, error) {
				if strings.Contains(path, "b-second.v2.staging.") {
					secondStaged.Store(true)
				}
				if at != "seal" && strings.HasSuffix(path, suffix) {
					hold(path)
				}
				return durable.OS.OpenFile(path, flag, perm)
			}
			if at == "seal" {
				opt.Ops.SyncFS = func(f *os.File) error {
					hold(f.Name())
					return durable.OS.SyncFS(f)
				}
				// Where there is no syncfs (-tags portable, macOS), the
				// seal fsyncs the staging store file by file; once a run's
				// first sync has found syncfs missing, no seal calls it.
				opt.Ops.Sync = func(f *os.File) error {
					hold(f.Name())
					return durable.OS.Sync(f)
				}
			}
			rep := migRun(t, opt)
			for _, p := range []string{first, second} {
				if s := migResult(t, rep, p); s.Outcome != OutcomeDone {
					t.Fatalf("%s: %+v", p, s)
				}
			}
			if !overlapped.Load() {
				t.Fatalf("while the first session's %s waited, the second did not go on", at)
			}
		})
	}
}

// TestPlanAllKeepsOrder: sessions planned on several goroutines come back
// in their order, each planned once, and really at once (two plans are in
// progress together).
func TestPlanAllKeepsOrder(t *testing.T) {
	var sessions []discover.Session
	for i := 0; i < 200; i++ {
		sessions = append(sessions, discover.Session{Path: fmt.Sprintf("/t/s%03d.jsonl", i)})
	}
	var calls, inFlight, most atomic.Int64
	jobs := planAll(sessions, func(s discover.Session) job {
		calls.Add(1)
		n := inFlight.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		time.Sleep(100 * time.Microsecond)
		inFlight.Add(-1)
		return job{session: s}
	})
	if calls.Load() != int64(len(sessions)) || len(jobs) != len(sessions) {
		t.Fatalf("%d plans for %d sessions, %d jobs", calls.Load(), len(sessions), len(jobs))
	}
	for i, jb := range jobs {
		if jb.session.Path != sessions[i].Path {
			t.Fatalf("job %d is %s, want %s", i, jb.session.Path, sessions[i].Path)
		}
	}
	if most.Load() < 2 {
		t.Errorf("at most %d sessions were planned at once", most.Load())
	}
}

// TestPlanIntoBusy: once the run's first session has started (busy
// closed), one goroutine plans the rest, in order: here busy is closed
// from the start, and no two plans are ever in progress together.
func TestPlanIntoBusy(t *testing.T) {
	jobs := make([]job, 100)
	ready := make([]chan struct{}, len(jobs))
	for i := range ready {
		ready[i] = make(chan struct{})
	}
	busy := make(chan struct{})
	close(busy)
	var inFlight, most atomic.Int64
	var order []int
	planInto(context.Background(), jobs, ready, busy, func(i int) {
		n := inFlight.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		order = append(order, i)
		time.Sleep(100 * time.Microsecond)
		inFlight.Add(-1)
	})
	if most.Load() != 1 {
		t.Fatalf("%d plans in progress at once after the first session started", most.Load())
	}
	for i, j := range order {
		if i != j {
			t.Fatalf("planned in the order %v", order)
		}
	}
	for i, r := range ready {
		select {
		case <-r:
		default:
			t.Fatalf("job %d never ready", i)
		}
	}
}

// TestRunJobsStartsInOrder: with --jobs 1, sessions have their first pass
// in the order of the plan (a worker that took a later session cannot
// take the reading slot first): a session whose lock pi holds must not be
// started ahead of, and hold up, the ones planned before it.
func TestRunJobsStartsInOrder(t *testing.T) {
	root := t.TempDir()
	var want []string
	for i := 0; i < 24; i++ {
		p, _ := migSession(t, root, fmt.Sprintf("s%02d", i), 2)
		want = append(want, p)
	}
	var mu sync.Mutex
	var got []string
	opt := seamed(root, &seams{opened: func(path string) {
		mu.Lock()
		got = append(got, path)
		mu.Unlock()
	}})
	opt.Jobs = 1
	migRun(t, opt)
	if !slices.Equal(got, want) {
		t.Fatalf("first passes in the order\n%v\nwant\n%v", got, want)
	}
}

// TestRunJobsLightRefreshesOverlap: with --jobs 1, two small refreshes in
// place read at once (the first's index rows are read while the second's
// are): each holds a few megabytes, and cron's steady refresh is mostly
// their reading (issue 14). Without the light places the second waits for
// the first's staging place.
func TestRunJobsLightRefreshesOverlap(t *testing.T) {
	tree := t.TempDir()
	first, _ := migSession(t, tree, "a-first", 5)
	second, _ := migSession(t, tree, "b-second", 5)
	migRun(t, migOptions(tree))
	for _, p := range []string{first, second} {
		incAppend(t, p, 1, "lt")
		fixtures.MarkDirty(t, discover.SidecarPath(p))
	}
	index := func(session string) string {
		return filepath.Join(discover.SidecarPath(session), "index", "offsets.jsonl")
	}
	var secondReading, overlapped atomic.Bool
	var once sync.Once
	opt := migOptions(tree)
	opt.Jobs = 1
	opt.Ops = durable.OS
	opt.Ops.OpenFile = func(path string, flag int, perm os.FileMode) (*os.File, error) {
		if flag&(os.O_WRONLY|os.O_RDWR) == 0 {
			switch path {
			case index(second):
				secondReading.Store(true)
			case index(first):
				once.Do(func() {
					for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
						if secondReading.Load() {
							overlapped.Store(true)
							return
						}
					}
				})
			}
		}
		return durable.OS.OpenFile(path, flag, perm)
	}
	rep := migRun(t, opt)
	incRefreshedInPlace(t, rep, []string{first, second})
	for _, p := range []string{first, second} {
		incSameAsFull(t, p, 0)
	}
	if !overlapped.Load() {
		t.Fatal("while the first refresh in place read its index, the second did not start reading")
	}
}

// TestBuildSlotFullTradesLight: a session given a light reading place
// that needs a full first pass waits for a full place (at most n full
// first passes at once), then gives the light one back.
func TestBuildSlotFullTradesLight(t *testing.T) {
	reading, light, staging := make(chan struct{}, 1), make(chan struct{}, 1), make(chan struct{}, 1)
	reading <- struct{}{}
	a := &buildSlot{reading: reading, fullReading: reading, staging: staging, holds: reading}
	light <- struct{}{}
	b := &buildSlot{reading: light, fullReading: reading, staging: staging, holds: light}
	traded := make(chan struct{})
	go func() {
		b.full()
		close(traded)
	}()
	select {
	case <-traded:
		t.Fatal("a light place was traded for a full one while the only full place was held")
	case <-time.After(50 * time.Millisecond):
	}
	if len(light) != 1 {
		t.Fatal("the light place was given back before a full one was had")
	}
	a.staged() // a's first pass is done: the full place is free
	select {
	case <-traded:
	case <-time.After(10 * time.Second):
		t.Fatal("the full place freed was not taken")
	}
	if len(light) != 0 || b.holds != reading || b.reading != reading {
		t.Fatalf("after the trade: light places held %d, holds the full place %v", len(light), b.holds == reading)
	}
	b.full() // a second call changes nothing
	a.release()
	b.staged()
	b.release()
	if len(reading) != 0 || len(staging) != 0 {
		t.Fatalf("places left held: reading %d, staging %d", len(reading), len(staging))
	}
}

// planAll is planInto without a run, for tests: it plans sessions on as
// many goroutines as there are CPUs, and returns the jobs in the
// sessions' order. Planning is mostly system calls
// (a status read, or the fresh cache's lstats of every sidecar file): on a
// steady tree of thousands of sessions it was most of a no-op run.
func planAll(sessions []discover.Session, plan func(discover.Session) job) []job {
	jobs := make([]job, len(sessions))
	planInto(context.Background(), jobs, nil, nil, func(i int) { jobs[i] = plan(sessions[i]) })
	return jobs
}
