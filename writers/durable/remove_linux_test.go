package durable

import (
	"os"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"
)

// TestRemoveAllWhileAParentIsSwapped: while a removal runs, another
// thread exchanges a directory on its way with a symlink to a decoy
// holding the same names, again and again (renameat2 RENAME_EXCHANGE, as
// a tree's owner would): the decoy never loses a file. os.RemoveAll, which
// resolves the path at each step, empties it (checked, so that the test
// shows the race it guards against is there).
func TestRemoveAllWhileAParentIsSwapped(t *testing.T) {
	run := func(t *testing.T, remove func(string) error) (followed bool) {
		for round := 0; round < 20 && !followed; round++ {
			base := t.TempDir()
			q := filepath.Join(base, "q")
			x := filepath.Join(q, "x")
			makeTree(t, x, 24)
			out, _ := decoy(t)
			// The decoy has every name the tree has: a removal that
			// follows the link finds its way in at any depth.
			makeTree(t, filepath.Join(out, "x"), 24)
			link := filepath.Join(base, "q.link")
			if err := os.Symlink(out, link); err != nil {
				t.Fatal(err)
			}
			var stop atomic.Bool
			var swaps atomic.Int64
			done := make(chan struct{})
			go func() {
				runtime.LockOSThread()
				defer close(done)
				for !stop.Load() {
					if unix.Renameat2(unix.AT_FDCWD, q, unix.AT_FDCWD, link, unix.RENAME_EXCHANGE) == nil {
						swaps.Add(1)
					}
				}
			}()
			for swaps.Load() < 3 {
				runtime.Gosched()
			}
			for try := 0; try < 50; try++ {
				// The open of the parent meets the symlink half the time.
				if err := remove(x); err == nil {
					break
				}
			}
			stop.Store(true)
			<-done
			var n int
			_ = filepath.Walk(filepath.Join(out, "x"), func(_ string, fi os.FileInfo, err error) error {
				if err == nil && fi.Mode().IsRegular() {
					n++
				}
				return nil
			})
			followed = n != 24*4
		}
		return followed
	}
	if run(t, OS.RemoveAll) {
		t.Fatal("RemoveAll removed files of the decoy through the swapped parent")
	}
	if !run(t, os.RemoveAll) {
		t.Log("os.RemoveAll did not follow the swap in 20 rounds: the race was not shown on this machine")
	}
}
