package engine

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"pisess/fixtures"
	"pisess/ledger"
	"pisess/readers/discover"
	"pisess/verify"
	"pisess/writers/durable"
)

// noopTree is a tree of one accepted and one refused session (a missing
// parent: the reader refuses it when it reads the session), migrated once.
func noopTree(tb testing.TB) (root, accepted, refused string) {
	tb.Helper()
	root = tb.TempDir()
	accepted, _ = migSession(tb, root, "accepted", 3)
	refused, _ = migSession(tb, root, "refused", 2)
	f, err := os.OpenFile(refused, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := f.WriteString(migEntryLine("e00000ff", "e0000abc", "orphan")); err != nil {
		tb.Fatal(err)
	}
	f.Close()
	rep := migRun(tb, migOptions(root))
	if s := migResult(tb, rep, refused); s.Outcome != OutcomeRefused {
		tb.Fatalf("refused session: %+v", s)
	}
	if s := migResult(tb, rep, accepted); s.Outcome != OutcomeDone {
		tb.Fatalf("accepted session: %+v", s)
	}
	return root, accepted, refused
}

// TestMigrateNoopWritesNothing (issue 12, item 4): a refused session is
// remembered by its file identity under .pisess/ and is then neither read,
// locked nor journaled again until it changes; a run with nothing to do
// appends nothing to the journal and creates no file in the tree.
func TestMigrateNoopWritesNothing(t *testing.T) {
	root, accepted, refused := noopTree(t)
	if _, err := os.Stat(filepath.Join(root, discover.PisessDir, ledger.RefusalCacheName)); err != nil {
		t.Fatalf("no refusal cache: %v", err)
	}
	// The run that refused it locked it; later runs must not even create
	// the lock file.
	for _, p := range []string{discover.LockPath(refused), discover.LockPath(accepted)} {
		if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
	before := fixtures.TreeDigest(t, root)

	// pi holds the refused session's lock: a run that tried to lock it
	// would report it busy.
	held, err := durable.OS.LockFile(context.Background(), discover.LockPath(refused), 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(discover.LockPath(refused)); err != nil {
		t.Fatal(err) // the flock stays on the open file; the name must not come back
	}
	opt := migOptions(root)
	opt.LockTimeout = time.Millisecond
	rep := migRun(t, opt)
	held.Unlock()
	s := migResult(t, rep, refused)
	if s.Outcome != OutcomeRefused || s.Error == nil || !strings.Contains(strings.Join(s.Notes, " "), ledger.RefusalCacheName) {
		t.Fatalf("refused session on the no-op run: %+v", s)
	}
	if s.Error.Class != "missing_parent" && !strings.Contains(s.Reason, "parent") {
		t.Errorf("the remembered refusal lost its class or reason: %+v", s.Error)
	}
	if a := migResult(t, rep, accepted); a.Outcome != OutcomeSkipped {
		t.Fatalf("accepted session on the no-op run: %+v", a)
	}
	if diff := migDigestDiff(before, fixtures.TreeDigest(t, root), nil); len(diff) != 0 {
		t.Fatalf("the no-op run changed or created %v", diff)
	}

	// pi writes the refused session: it is read (and refused) again, and
	// the cache follows the new identity.
	f, err := os.OpenFile(refused, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(migEntryLine("e0000100", "e00000ff", "more"))
	f.Close()
	rep = migRun(t, migOptions(root))
	s = migResult(t, rep, refused)
	if s.Outcome != OutcomeRefused || strings.Contains(strings.Join(s.Notes, " "), ledger.RefusalCacheName) {
		t.Fatalf("a changed refused session was not read again: %+v", s)
	}
	if _, err := os.Stat(discover.LockPath(refused)); err != nil {
		t.Fatalf("a changed session was read without its lock: %v", err)
	}
	mid := fixtures.TreeDigest(t, root)
	rep = migRun(t, migOptions(root))
	if s := migResult(t, rep, refused); !strings.Contains(strings.Join(s.Notes, " "), ledger.RefusalCacheName) {
		t.Fatalf("the new identity was not remembered: %+v", s)
	}
	if diff := migDigestDiff(mid, fixtures.TreeDigest(t, root), nil); len(diff) != 0 {
		t.Fatalf("the second no-op run changed or created %v", diff)
	}
}

// TestRefusalCacheUntrusted: the cache is data in a user's tree. A forged
// entry naming a path outside the tree, a garbage file and a symlink in its
// place are ignored: the sessions are read as if there were no cache.
func TestRefusalCacheUntrusted(t *testing.T) {
	root, _, refused := noopTree(t)
	cache := filepath.Join(root, discover.PisessDir, ledger.RefusalCacheName)
	for name, content := range map[string]string{
		"garbage":     "{not json",
		"outside":     `{"version":1,"pisess":` + strconv.Quote(ledger.Stamp()) + `,"sessions":{"../x.jsonl":{"identity":{},"class":"c","reason":"r"}}}`,
		"wrong ident": `{"version":1,"pisess":` + strconv.Quote(ledger.Stamp()) + `,"sessions":{"--home-u-proj--/refused.jsonl":{"identity":{"ino":1},"class":"c","reason":"forged"}}}`,
	} {
		if err := os.WriteFile(cache, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		rep := migRun(t, migOptions(root))
		s := migResult(t, rep, refused)
		if s.Outcome != OutcomeRefused || s.Reason == "forged" || strings.Contains(strings.Join(s.Notes, " "), ledger.RefusalCacheName) {
			t.Fatalf("%s: %+v", name, s)
		}
	}
	os.Remove(cache)
	if err := os.Symlink("/etc/passwd", cache); err != nil {
		t.Fatal(err)
	}
	rep := migRun(t, migOptions(root))
	if s := migResult(t, rep, refused); s.Outcome != OutcomeRefused || strings.Contains(strings.Join(s.Notes, " "), ledger.RefusalCacheName) {
		t.Fatalf("symlinked cache: %+v", s)
	}
	if fi, err := os.Lstat(cache); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("the symlinked cache was replaced or followed: %v", err)
	}
}

// BenchmarkMigrateNoop measures a no-op run (every session fresh or
// remembered as refused) per session, beside a plain stat of every session
// file, the least any run must do, and beside the first run that migrated
// the tree (reported as ns/session and the two ratios).
func BenchmarkMigrateNoop(b *testing.B) {
	root := b.TempDir()
	const n = 200
	var paths []string
	for i := 0; i < n; i++ {
		p, last := migSession(b, root, "s"+migEntryID(i+1), 20)
		if i%4 == 0 { // a quarter refused
			f, _ := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
			f.WriteString(migEntryLine("e00000ff", "e0000abc", "orphan"))
			f.Close()
		}
		_ = last
		paths = append(paths, p)
	}
	opt := migOptions(root)
	t0 := time.Now()
	if _, err := Migrate(context.Background(), opt); err != nil {
		b.Fatal(err)
	}
	first := time.Since(t0)
	b.ResetTimer()
	var noop, stat time.Duration
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		rep, err := Migrate(context.Background(), opt)
		noop += time.Since(t0)
		if err != nil || rep.Totals.Skipped+rep.Totals.Refused != n {
			b.Fatalf("not a no-op: %+v %v", rep.Totals, err)
		}
		t0 = time.Now()
		for _, p := range paths {
			if _, err := os.Stat(p); err != nil {
				b.Fatal(err)
			}
		}
		stat += time.Since(t0)
	}
	b.ReportMetric(float64(noop.Nanoseconds())/float64(b.N*n), "ns/session")
	b.ReportMetric(float64(noop)/float64(stat), "x-stat")
	// The no-op run beside the first run that migrated the same tree.
	b.ReportMetric(float64(noop)/float64(b.N)/float64(first), "x-first-run")
}

// BenchmarkStatusBySize measures status of one migrated session of 10,000
// and of 1,000,000 entries in the same run, each sidecar vouched for by
// the fresh cache its migration wrote (the steady state): status then
// reads the cache and the session file's metadata, never the frames, and
// scans no large source, so the two times should be alike (the ratio is
// reported). A sidecar nothing vouches for is read whole (verify.Status).
func BenchmarkStatusBySize(b *testing.B) {
	root := b.TempDir()
	small, _ := migSession(b, filepath.Join(root, "small"), "small", 10_000)
	large, _ := migSession(b, filepath.Join(root, "large"), "large", 1_000_000)
	for _, tree := range []string{filepath.Join(root, "small"), filepath.Join(root, "large")} {
		if _, err := Migrate(context.Background(), migOptions(tree)); err != nil {
			b.Fatal(err)
		}
	}
	status := func(p string) time.Duration {
		t0 := time.Now()
		rep, err := verify.ListStatus(context.Background(), []string{p})
		if err != nil || len(rep.Sessions) != 1 || rep.Sessions[0].Class != verify.ClassMigrated {
			b.Fatalf("status %s: %+v %v", p, rep, err)
		}
		return time.Since(t0)
	}
	b.ResetTimer()
	var ts, tl time.Duration
	for i := 0; i < b.N; i++ {
		ts += status(small)
		tl += status(large)
	}
	b.ReportMetric(float64(tl.Microseconds())/float64(b.N)/1000, "ms-1M-entries")
	b.ReportMetric(float64(tl)/float64(ts), "x-10k-entries")
}
