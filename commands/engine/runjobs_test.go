package engine

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"pisess/writers/durable"
)

// TestRunJobsOverlapsInstall: with --jobs 1 the install of one session (its
// seal waits on the disk) overlaps the build of the next: while the first
// session's seal is held, the second is staged.
func TestRunJobsOverlapsInstall(t *testing.T) {
	root := t.TempDir()
	first, _ := migSession(t, root, "a-first", 3)
	second, _ := migSession(t, root, "b-second", 3)
	dir := filepath.Dir(first)
	staged := func(stem string) bool {
		m, _ := filepath.Glob(filepath.Join(dir, stem+".v2.staging.*"))
		return len(m) > 0
	}
	var overlapped atomic.Bool
	var once sync.Once
	opt := migOptions(root)
	opt.Jobs = 1
	opt.Ops = durable.OS
	opt.Ops.SyncFS = func(f *os.File) error {
		if strings.Contains(f.Name(), "a-first.v2.staging.") {
			once.Do(func() {
				for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
					if staged("b-second") {
						overlapped.Store(true)
						return
					}
				}
			})
		}
		return durable.OS.SyncFS(f)
	}
	rep := migRun(t, opt)
	for _, p := range []string{first, second} {
		if s := migResult(t, rep, p); s.Outcome != OutcomeDone {
			t.Fatalf("%s: %+v", p, s)
		}
	}
	if !overlapped.Load() {
		t.Fatal("the second session was not staged while the first one's seal waited")
	}
}
