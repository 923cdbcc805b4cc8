package engine

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"pisess/fixtures"
	"pisess/readers/discover"
	"pisess/verify"
	"pisess/writers/durable"
	"pisess/writers/store"
)

// migWriter plays the Rust pi saving sessions: for each append it takes the
// session lock (flock on <file>.lock, as durable.LockFile takes it), marks an
// existing sidecar dirty, appends one valid entry, and releases the lock.
type migWriter struct {
	sessions []string
	last     map[string]string // the last entry id of each session
	appended map[string]int
	n        int
}

// appendOne runs on the writer's goroutine: it returns errors rather than
// failing the test (FailNow belongs to the test's goroutine).
func (w *migWriter) appendOne(ctx context.Context, session string) error {
	lock, err := durable.OS.LockFile(ctx, discover.LockPath(session), time.Minute)
	if err != nil {
		return err
	}
	defer lock.Unlock()
	sidecar := discover.SidecarPath(session)
	if fi, err := os.Lstat(sidecar); err == nil && fi.IsDir() {
		if err := migWriteFile(filepath.Join(sidecar, "source-state.json"), os.O_TRUNC,
			`{"schema":"pi.session_store_v2.source_state.v1","state":"dirty"}`+"\n"); err != nil {
			return err
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("sidecar %s: %v", sidecar, err)
	}
	w.n++
	id := fmt.Sprintf("a%07x", w.n)
	if err := migWriteFile(session, os.O_APPEND, migEntryLine(id, w.last[session], "written while pisess runs")); err != nil {
		return err
	}
	w.last[session] = id
	w.appended[session]++
	return nil
}

// migWriteFile writes text into the existing file path opened with flag
// (os.O_TRUNC: rewritten in place; os.O_APPEND: appended), never through a
// symlink.
func migWriteFile(path string, flag int, text string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|flag|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(text); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// TestMigrateWhilePiWrites runs migrate (two jobs) over a tree again and
// again while a writer appends to its sessions the way pi does. Whatever
// the interleaving, no run fails, and afterwards every sidecar either
// verifies against the source as it is now with a clean fingerprint of
// exactly these bytes (fresh), or is marked dirty (stale) — never a clean
// fingerprint of bytes the source no longer has; the next run refreshes
// the stale ones, after which every session is migrated with every entry.
func TestMigrateWhilePiWrites(t *testing.T) {
	dir := t.TempDir()
	w := &migWriter{last: map[string]string{}, appended: map[string]int{}}
	for i := 0; i < 4; i++ {
		p, last := migSession(t, dir, fmt.Sprintf("busy-%d", i), 30)
		w.sessions = append(w.sessions, p)
		w.last[p] = last
	}
	migRun(t, migOptions(dir)) // every session has a sidecar the writer marks dirty

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var werr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ctx.Err() == nil; i++ {
			if err := w.appendOne(ctx, w.sessions[i%len(w.sessions)]); err != nil {
				if ctx.Err() == nil {
					werr = err
				}
				return
			}
			time.Sleep(time.Duration(1+i%4) * time.Millisecond)
		}
	}()
	outcomes := map[Outcome]int{}
	for run := 0; run < 6; run++ {
		rep := migRun(t, migOptions(dir))
		for _, s := range rep.Sessions {
			outcomes[s.Outcome]++
			if s.Outcome == OutcomeFailed || s.Outcome == OutcomeBusy || s.Outcome == OutcomeRefused || s.Outcome == OutcomeLeft {
				t.Errorf("run %d: %s: %s/%s %+v", run, filepath.Base(s.Path), s.Action, s.Outcome, s.Error)
			}
			if s.Outcome == OutcomeDone {
				migAllVerified(t, s)
			}
		}
	}
	cancel()
	wg.Wait()
	if werr != nil {
		t.Fatalf("writer: %v", werr)
	}
	t.Logf("writer appended %d entries; outcomes %v", w.n, outcomes)
	if outcomes[OutcomeDone] == 0 || w.n == 0 {
		t.Fatalf("no refresh interleaved with the writer (outcomes %v, %d appends)", outcomes, w.n)
	}

	for _, p := range w.sessions {
		sidecar := discover.SidecarPath(p)
		fr, err := verify.Freshness(p, sidecar)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case fr.Fresh:
			// A clean fingerprint: it must be of these very bytes, and the
			// store must hold exactly the source's entries.
			migCheckCleanState(t, p)
			migVerifyAgainstSource(t, p, 30+w.appended[p])
		case fr.State == nil || fr.State.State != "dirty":
			t.Errorf("%s: neither fresh nor dirty: %+v", filepath.Base(p), fr)
		}
	}

	final := migRun(t, migOptions(dir))
	for _, p := range w.sessions {
		s := migResult(t, final, p)
		if s.Outcome != OutcomeDone && s.Outcome != OutcomeSkipped {
			t.Errorf("%s: final run %s/%s %+v", filepath.Base(p), s.Action, s.Outcome, s.Error)
		}
		st, err := verify.Status(p)
		if err != nil || st.Class != verify.ClassMigrated {
			t.Errorf("%s: status %s %v %v", filepath.Base(p), st.Class, st.Findings, err)
		}
		migCheckCleanState(t, p)
		migVerifyAgainstSource(t, p, 30+w.appended[p])
	}
}

// migVerifyAgainstSource verifies session's sidecar against the session
// file, entry by entry and hash chain, and checks it holds want entries.
func migVerifyAgainstSource(tb testing.TB, session string, want int) {
	tb.Helper()
	src, err := discover.OpenSource(session)
	if err != nil {
		tb.Fatal(err)
	}
	defer src.Close()
	rep, err := verify.AgainstSource(context.Background(), src, discover.SidecarPath(session), verify.Options{SourcePath: session})
	if err != nil {
		tb.Fatal(err)
	}
	if !rep.Verified() || rep.Entries != uint64(want) {
		tb.Errorf("%s: verified %v with %d entries (want %d): %v", filepath.Base(session), rep.Verified(), rep.Entries, want, rep.Findings)
	}
}

// TestMigrateBusySession holds one session's lock for longer than the lock
// timeout: that session is reported busy (a problem left: exit 4) with
// nothing written for it, and the others migrate.
func TestMigrateBusySession(t *testing.T) {
	dir := t.TempDir()
	held, _ := migSession(t, dir, "held", 3)
	free, _ := migSession(t, dir, "free", 3)
	lock, err := durable.OS.LockFile(context.Background(), discover.LockPath(held), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Unlock()
	opt := migOptions(dir)
	opt.LockTimeout = 100 * time.Millisecond
	start := time.Now()
	rep := migRun(t, opt)
	if d := time.Since(start); d < opt.LockTimeout {
		t.Errorf("the run took %v, less than the lock timeout", d)
	}
	s := migResult(t, rep, held)
	if s.Outcome != OutcomeBusy || s.Error == nil || s.Error.Class != "busy" {
		t.Errorf("held session: %s/%s %+v", s.Action, s.Outcome, s.Error)
	}
	if _, err := os.Lstat(discover.SidecarPath(held)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a busy session got a sidecar (%v)", err)
	}
	if f := migResult(t, rep, free); f.Outcome != OutcomeDone {
		t.Errorf("free session: %s/%s %+v", f.Action, f.Outcome, f.Error)
	}
	if rep.Totals.Busy != 1 || rep.Tally().Left() != 1 {
		t.Errorf("totals %+v tally %+v", rep.Totals, rep.Tally())
	}
	if l := migLeftovers(t, dir); len(l) > 0 {
		t.Errorf("leftovers %v", l)
	}
	// Once pi lets go, the next run migrates it.
	lock.Unlock()
	if s := migResult(t, migRun(t, migOptions(dir)), held); s.Outcome != OutcomeDone {
		t.Errorf("after the lock was released: %s/%s %+v", s.Action, s.Outcome, s.Error)
	}
}

// TestMigrateWaitsAsideForLock: a session whose lock pi holds is waited for
// without its reading place. With --jobs 1 the sessions planned after it are
// migrated (or refreshed) while it waits, where they used to wait up to
// --lock-timeout behind it; once pi lets go, it is migrated too.
func TestMigrateWaitsAsideForLock(t *testing.T) {
	for _, refresh := range []bool{false, true} {
		t.Run(map[bool]string{false: "migrate", true: "refresh"}[refresh], func(t *testing.T) {
			dir := t.TempDir()
			held, _ := migSession(t, dir, "a-held", 3)
			var free []string
			for _, stem := range []string{"b-free", "c-free", "d-free"} {
				p, _ := migSession(t, dir, stem, 3)
				free = append(free, p)
			}
			entries := uint64(3)
			if refresh {
				migRun(t, migOptions(dir))
				for _, p := range append([]string{held}, free...) {
					migAppend(t, p, migEntryLine(migEntryID(4), migEntryID(3), "more"))
				}
				entries = 4
			}
			// Done for a session: its sidecar holds all its entries.
			done := func(p string) bool {
				st, err := store.Open(discover.SidecarPath(p), store.ReadOptions{})
				if err != nil {
					return false
				}
				m, err := st.Manifest()
				return err == nil && m.Counters.EntriesTotal == entries
			}
			opt := migOptions(dir)
			opt.Jobs, opt.LockTimeout = 1, 30*time.Second
			type result struct {
				rep MigrateReport
				err error
			}
			r := fixtures.WhileLockHeld(t, discover.LockPath(held), func() result {
				rep, err := Migrate(context.Background(), opt)
				return result{rep, err}
			}, func() bool { return done(free[0]) && done(free[1]) && done(free[2]) }, func() bool { return !done(held) })
			if r.err != nil {
				t.Fatal(r.err)
			}
			for _, p := range append([]string{held}, free...) {
				if s := migResult(t, r.rep, p); s.Outcome != OutcomeDone || !done(p) {
					t.Errorf("%s: %s/%s %+v", filepath.Base(p), s.Action, s.Outcome, s.Error)
				}
			}
			if l := migLeftovers(t, dir); len(l) > 0 {
				t.Errorf("leftovers %v", l)
			}
		})
	}
}

// TestMigrateSourceStateCaughtMidWrite: the Rust pi marks a sidecar dirty by
// rewriting source-state.json in place (truncate, then write) under the
// session lock, which migrate's plan does not take. A plan made in that
// instant sees an empty source-state.json. pi's resume reads an invalid
// state as stale, and the sidecar is otherwise sound: migrate refreshes it
// rather than leaving a healthy session for fsck (exit 4).
func TestMigrateSourceStateCaughtMidWrite(t *testing.T) {
	dir := t.TempDir()
	p, _ := migSession(t, dir, "torn-state", 3)
	migRun(t, migOptions(dir))
	if err := os.Truncate(filepath.Join(discover.SidecarPath(p), "source-state.json"), 0); err != nil {
		t.Fatal(err)
	}
	rep := migRun(t, migOptions(dir))
	s := migResult(t, rep, p)
	if s.Action != PlanRefresh || s.Outcome != OutcomeDone {
		t.Fatalf("%s/%s (%s) %+v, want a refresh", s.Action, s.Outcome, s.Reason, s.Error)
	}
	uid, gid := migOwner(t, p)
	migCheckInstalled(t, p, rep.CorrelationID, uid, gid)
	if rep.Tally().Left() != 0 {
		t.Errorf("tally %+v", rep.Tally())
	}
}
