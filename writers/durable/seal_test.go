package durable

import (
	"errors"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestSealReportsWritebackErrorsSinceItsOpen: syncfs reports a writeback
// error through a descriptor opened before it (FaultyOps' FaultWriteback
// says so as the kernel's errseq does when another observer saw the error
// first): a seal opened before the writes hears of a failed writeback of
// any of them, one opened at the seal does not — which is why the staging
// store's seal is opened first (issue 32 §4). In a group the shared syncfs
// is made on the oldest seal waiting, so every job covered hears of it.
func TestSealReportsWritebackErrorsSinceItsOpen(t *testing.T) {
	fault := FaultRule{Op: FaultWriteback, Pattern: "*.seg", Err: syscall.EIO}
	write := func(t *testing.T, o Ops, dir, name string) {
		t.Helper()
		o.DeferSync = true
		if err := o.WriteFileInPlace(filepath.Join(dir, name), []byte("frame\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("opened before the write", func(t *testing.T) {
		o, dir := FaultyOps(fault), t.TempDir()
		s, err := o.OpenSeal(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		write(t, o, dir, "1.seg")
		if _, _, err := o.SealWith(s, dir); !errors.Is(err, syscall.EIO) {
			t.Fatalf("SealWith: %v, want the writeback's EIO", err)
		}
	})
	t.Run("opened at the seal", func(t *testing.T) {
		o, dir := FaultyOps(fault), t.TempDir()
		write(t, o, dir, "1.seg")
		if err := o.SealTree(dir); err != nil {
			t.Fatalf("SealTree: %v (the emulation reports to a late descriptor: the test shows nothing)", err)
		}
	})
	t.Run("a group seals on its oldest descriptor", func(t *testing.T) {
		o, dir := FaultyOps(fault), t.TempDir()
		o.Seals = &SyncGroup{Linger: 300 * time.Millisecond}
		old, err := o.OpenSeal(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer old.Close()
		write(t, o, dir, "1.seg")
		young, err := o.OpenSeal(dir) // after the failed writeback
		if err != nil {
			t.Fatal(err)
		}
		defer young.Close()
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i, s := range []*Seal{young, old} {
			wg.Go(func() { _, _, errs[i] = o.SealWith(s, dir) })
			time.Sleep(5 * time.Millisecond) // young first: it starts the round
		}
		wg.Wait()
		for i, err := range errs {
			if !errors.Is(err, syscall.EIO) {
				t.Errorf("seal %d: %v, want the EIO the oldest descriptor reports", i, err)
			}
		}
	})
}
