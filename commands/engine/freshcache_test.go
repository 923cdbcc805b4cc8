package engine

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"pisess/fixtures"
	"pisess/ledger"
	"pisess/readers/discover"
	"pisess/verify"
	"pisess/writers/durable"
	"pisess/writers/store"
)

// withRacyWindow sets the racy window of the runs given sm: short enough
// that a test need not wait seconds, long enough to cover the file clock's
// tick.
func withRacyWindow(sm *seams, d time.Duration) { sm.judges.RacyWindow = d }

// countStatus counts the sidecars judged by verify.StatusFast in the runs
// given sm.
func countStatus(sm *seams) *atomic.Int64 {
	var n atomic.Int64
	old := sm.freshJudges().StatusOpen
	sm.judges.StatusOpen = func(p string) (verify.StatusReport, error) {
		n.Add(1)
		return old(p)
	}
	return &n
}

// withFineCtime makes the tree's file system pass, or fail, fineCtime's
// probe in the runs given sm.
func withFineCtime(sm *seams, fine bool) {
	old := sm.freshJudges().FineCtime
	sm.judges.FineCtime = func(dir string) (uint64, bool) {
		dev, ok := old(dir)
		return dev, ok && fine
	}
}

// seamed is migOptions(root) with the seams sm.
func seamed(root string, sm *seams) MigrateOptions {
	o := migOptions(root)
	o.seams = sm
	return o
}

// freshTree is a tree of two migrated sessions (paths[0] and [1]) and a
// third that pi keeps writing (paths[2]): refresh appends to it and
// migrates, a run that writes (the refresh, in place) and so saves the
// verdicts it cached.
func freshTree(tb testing.TB, sm *seams) (root string, paths []string, refresh func() MigrateReport) {
	tb.Helper()
	withRacyWindow(sm, 40*time.Millisecond)
	root = tb.TempDir()
	for _, stem := range []string{"a", "b"} {
		p, _ := migSession(tb, root, stem, 4)
		paths = append(paths, p)
	}
	busy, last := migSession(tb, root, "busy", 2)
	paths = append(paths, busy)
	migRun(tb, seamed(root, sm))
	// The migration vouched for the sidecars it installed (where change
	// times are fine: TestFreshCacheAfterMigrate); these tests start from
	// none, so that a and b are judged by a status.
	if err := os.Remove(filepath.Join(root, discover.PisessDir, ledger.FreshCacheName)); err != nil && !os.IsNotExist(err) {
		tb.Fatal(err)
	}
	time.Sleep(60 * time.Millisecond) // past the racy window
	n := 0
	refresh = func() MigrateReport {
		tb.Helper()
		n++
		id := migEntryID(0x100 + n)
		migAppend(tb, busy, migEntryLine(id, last, "more"))
		last = id
		rep := migRun(tb, seamed(root, sm))
		if s := migResult(tb, rep, busy); s.Outcome != OutcomeDone {
			tb.Fatalf("busy session: %+v", s)
		}
		return rep
	}
	return root, paths, refresh
}

// TestFreshCacheSkipsUnchanged: a run judges the fresh sidecars and caches
// the verdicts, and the sidecar it refreshed in place (on a file system
// that shows every later change); the next run skips all three without
// judging any, and writes nothing. Where the file system's change times
// are coarse, the sidecar just written is judged again.
func TestFreshCacheSkipsUnchanged(t *testing.T) {
	for _, fine := range []bool{true, false} {
		t.Run(map[bool]string{true: "fine change times", false: "coarse change times"}[fine], func(t *testing.T) {
			sm := &seams{}
			withFineCtime(sm, fine)
			root, paths, refresh := freshTree(t, sm)
			n := countStatus(sm)
			migRun(t, seamed(root, sm))
			if n.Load() != 3 {
				t.Fatalf("the no-op run judged %d sidecars, want 3", n.Load())
			}
			if _, err := os.Lstat(filepath.Join(root, discover.PisessDir, ledger.FreshCacheName)); !os.IsNotExist(err) {
				t.Fatalf("a run that changed nothing wrote the fresh cache (%v)", err)
			}
			n.Store(0)
			refresh()
			if n.Load() != 3 {
				t.Fatalf("the refresh run judged %d sidecars, want 3 (caching a verdict judges nothing again)", n.Load())
			}
			want := map[bool]int{true: 3, false: 2}[fine]
			if got := ledger.LoadFreshCache(root).Len(); got != want {
				t.Fatalf("fresh cache: %d entries, want %d", got, want)
			}
			before := fixtures.TreeDigest(t, root)
			n.Store(0)
			rep := migRun(t, seamed(root, sm))
			for _, p := range paths {
				if s := migResult(t, rep, p); s.Outcome != OutcomeSkipped || s.Reason != "the sidecar is fresh" {
					t.Fatalf("%s: %+v", p, s)
				}
			}
			if want := 3 - int64(want); n.Load() != want {
				t.Fatalf("the no-op run judged %d sidecars, want %d (not cached)", n.Load(), want)
			}
			if diff := migDigestDiff(before, fixtures.TreeDigest(t, root), nil); len(diff) != 0 {
				t.Fatalf("the cached no-op run changed %v", diff)
			}
		})
	}
}

// TestFreshCacheSameAnswer: whatever is done to a session or its sidecar
// after its verdict was cached, the plan is the one a run without the
// cache makes (the cache is judged again, never trusted past a change).
func TestFreshCacheSameAnswer(t *testing.T) {
	for _, c := range []struct {
		name   string
		change func(t *testing.T, path, sidecar string)
		skip   bool // the change leaves the sidecar fresh
	}{
		{"nothing", func(t *testing.T, path, sidecar string) {}, true},
		{"source appended (TypeScript pi)", func(t *testing.T, path, sidecar string) {
			migAppend(t, path, migEntryLine("e0000100", migEntryID(4), "more"))
		}, false},
		// Only the session file changes in the next three: the sidecar is
		// vouched for and the session alone is judged (StatusVouched).
		{"session mode changed", func(t *testing.T, path, sidecar string) {
			chmod(t, path, 0o640)
		}, true},
		{"session given to another owner", func(t *testing.T, path, sidecar string) {
			if os.Geteuid() != 0 {
				t.Skip("chown needs root")
			}
			if err := os.Chown(path, 65534, 65534); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"session's header names another session", func(t *testing.T, path, sidecar string) {
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			h, err := discover.ReadHeader(path)
			if err != nil {
				t.Fatal(err)
			}
			other := "0" + h.ID[1:]
			if other == h.ID {
				other = "1" + h.ID[1:]
			}
			if err := os.WriteFile(path, []byte(strings.Replace(string(b), h.ID, other, 1)), 0o600); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"marked dirty (Rust pi)", func(t *testing.T, path, sidecar string) {
			fixtures.MarkDirty(t, sidecar)
		}, false},
		{"segment mode loosened", func(t *testing.T, path, sidecar string) {
			chmod(t, store.SegmentPath(sidecar, 1), 0o644)
		}, false},
		{"sidecar directory mode loosened", func(t *testing.T, path, sidecar string) {
			chmod(t, sidecar, 0o755)
		}, false},
		{"index emptied", func(t *testing.T, path, sidecar string) {
			if err := os.Truncate(store.IndexPath(sidecar), 0); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"manifest replaced by a symlink", func(t *testing.T, path, sidecar string) {
			m := store.ManifestPath(sidecar)
			if err := os.Rename(m, m+".real"); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(m+".real", m); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"sidecar replaced by a symlink to its copy", func(t *testing.T, path, sidecar string) {
			fixtures.CopyTree(t, sidecar, sidecar+".real")
			if err := os.RemoveAll(sidecar); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(sidecar+".real", sidecar); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"index directory replaced by a symlink to it", func(t *testing.T, path, sidecar string) {
			index := filepath.Dir(store.IndexPath(sidecar))
			if err := os.Rename(index, sidecar+".index"); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(sidecar+".index", index); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"segments directory removed", func(t *testing.T, path, sidecar string) {
			if err := os.RemoveAll(store.SegmentsPath(sidecar)); err != nil {
				t.Fatal(err)
			}
		}, false},
		// A segment no index row names: pi's open refuses the store
		// (its segment inventory), and so does the plan's status, as
		// deep (issue 34 §2), with or without the cache.
		{"an extra file in segments/", func(t *testing.T, path, sidecar string) {
			if err := os.WriteFile(filepath.Join(store.SegmentsPath(sidecar), "0000000000000002.seg"), nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"source-state removed (pi verifies the whole sidecar)", func(t *testing.T, path, sidecar string) {
			if err := os.Remove(store.SourceStatePath(sidecar)); err != nil {
				t.Fatal(err)
			}
		}, true},
	} {
		for _, which := range []int{0, 2} {
			t.Run(c.name+map[int]string{0: ", judged", 2: ", written by the run"}[which], func(t *testing.T) {
				sm := &seams{}
				root, paths, refresh := freshTree(t, sm)
				refresh() // judges a and b, caches their verdicts and busy's
				if ledger.LoadFreshCache(root).Len() != 3 {
					t.Fatal("verdicts not cached")
				}
				path := paths[which]
				c.change(t, path, discover.SidecarPath(path))
				dry := seamed(root, sm)
				dry.DryRun = true
				cached := migResult(t, migRun(t, dry), path)
				if err := os.Remove(filepath.Join(root, discover.PisessDir, ledger.FreshCacheName)); err != nil {
					t.Fatal(err)
				}
				judged := migResult(t, migRun(t, dry), path)
				if cached.Action != judged.Action || cached.Reason != judged.Reason {
					t.Fatalf("with the cache: %s (%s); without: %s (%s)", cached.Action, cached.Reason, judged.Action, judged.Reason)
				}
				if (judged.Action == PlanSkip) != c.skip {
					t.Fatalf("the change was not seen at all: %s (%s)", judged.Action, judged.Reason)
				}
			})
		}
	}
}

// TestFreshCacheRacy: verdicts on files changed within the racy window of
// the judgment are not cached.
// The sidecar the run wrote is cached where change times are fine (its
// metadata was read under its locks, after the last write), never where
// they are coarse.
func TestFreshCacheRacy(t *testing.T) {
	for _, fine := range []bool{true, false} {
		sm := &seams{}
		withFineCtime(sm, fine)
		root, paths, refresh := freshTree(t, sm)
		withRacyWindow(sm, time.Hour)
		refresh()
		entries := ledger.LoadFreshCache(root)
		_, written := entries.Get(mustRel(t, root, paths[2]))
		if entries.Len() != map[bool]int{true: 1, false: 0}[fine] || written != fine {
			t.Fatalf("fine change times %v: %d verdicts cached (the written sidecar's: %v)", fine, entries.Len(), written)
		}
	}
}

// TestFreshCacheChangedAfterJudgment: a sidecar whose files change after
// its judgment began (pi marking it dirty while the run plans) is not
// cached, whatever the change left behind.
func TestFreshCacheChangedAfterJudgment(t *testing.T) {
	sm := &seams{}
	root, paths, refresh := freshTree(t, sm)
	sidecar := discover.SidecarPath(paths[0])
	old := sm.freshJudges().StatusOpen
	sm.judges.StatusOpen = func(p string) (verify.StatusReport, error) {
		st, err := old(p)
		if p == paths[0] {
			// Same mode, new change time: nothing the status would see.
			chmod(t, store.SegmentPath(sidecar, 1), 0o600)
		}
		return st, err
	}
	refresh()
	entries := ledger.LoadFreshCache(root)
	if _, ok := entries.Get(mustRel(t, root, paths[0])); ok {
		t.Fatal("a verdict on files changed after its judgment was cached")
	}
	if _, ok := entries.Get(mustRel(t, root, paths[1])); !ok {
		t.Fatal("the unchanged session's verdict was not cached")
	}
}

// TestFreshCacheUntrusted: the cache is data in a user's tree. Entries
// naming files outside the sidecar, too many names, or a digest that does
// not match are not trusted: the sidecar is judged again.
func TestFreshCacheUntrusted(t *testing.T) {
	sm := &seams{}
	root, paths, _ := freshTree(t, sm)
	rel := mustRel(t, root, paths[0])
	cache := filepath.Join(root, discover.PisessDir, ledger.FreshCacheName)
	good := entryOf(t, paths[0])
	for name, change := range map[string]func(e *ledger.FreshEntry){
		"outside":             func(e *ledger.FreshEntry) { e.Names = "\n../../etc\n" },
		"absolute":            func(e *ledger.FreshEntry) { e.Names = "\n/etc/passwd\n" },
		"unclean":             func(e *ledger.FreshEntry) { e.Names = "\nsegments/../manifest.json\n" },
		"too many":            func(e *ledger.FreshEntry) { e.Names = strings.Repeat("x\n", ledger.FreshMaxNames+1) },
		"not newline-ended":   func(e *ledger.FreshEntry) { e.Names = strings.TrimSuffix(e.Names, "\n") },
		"forged digest":       func(e *ledger.FreshEntry) { e.Digest = strings.Repeat("0", 64) },
		"no header id":        func(e *ledger.FreshEntry) { e.SessionID = "" },
		"an earlier pisess's": func(e *ledger.FreshEntry) { e.Source, e.Version, e.SessionID = "", 0, "" },
	} {
		e := good
		change(&e)
		doc, err := json.Marshal(ledger.StateFile[ledger.FreshEntry]{Version: 1, Pisess: ledger.Stamp(), Sessions: map[string]ledger.FreshEntry{rel: e}})
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(cache, doc, 0o600); err != nil {
			t.Fatal(err)
		}
		n := countStatus(sm)
		dry := seamed(root, sm)
		dry.DryRun = true
		if s := migResult(t, migRun(t, dry), paths[0]); s.Action != PlanSkip {
			t.Fatalf("%s: %+v", name, s)
		}
		if n.Load() != 3 {
			t.Fatalf("%s: %d sidecars judged, want all 3", name, n.Load())
		}
	}
	// The good entry, unchanged, is trusted: the cache is in use.
	doc, _ := json.Marshal(ledger.StateFile[ledger.FreshEntry]{Version: 1, Pisess: ledger.Stamp(), Sessions: map[string]ledger.FreshEntry{rel: good}})
	if err := os.WriteFile(cache, doc, 0o600); err != nil {
		t.Fatal(err)
	}
	n := countStatus(sm)
	dry := seamed(root, sm)
	dry.DryRun = true
	migRun(t, dry)
	if n.Load() != 2 {
		t.Fatalf("with a good entry for one session, %d sidecars judged, want 2", n.Load())
	}
}

// TestFreshCacheSymlinked: a fresh.json that is a symlink to a file outside
// the tree is neither read nor written through, nor replaced (pisess never
// renames over what it did not expect, issue 11): a run that would save
// the cache leaves the link and the file it points at as they were, and
// the next run judges every sidecar again.
func TestFreshCacheSymlinked(t *testing.T) {
	sm := &seams{}
	root, paths, refresh := freshTree(t, sm)
	outside := filepath.Join(t.TempDir(), "victim.json")
	// A valid entry for session a: followed, it would make a run skip a
	// without judging it.
	doc, err := json.Marshal(ledger.StateFile[ledger.FreshEntry]{Version: 1, Pisess: ledger.Stamp(), Sessions: map[string]ledger.FreshEntry{mustRel(t, root, paths[0]): entryOf(t, paths[0])}})
	if err != nil {
		t.Fatal(err)
	}
	forged := string(doc)
	if err := os.WriteFile(outside, []byte(forged), 0o600); err != nil {
		t.Fatal(err)
	}
	cache := filepath.Join(root, discover.PisessDir, ledger.FreshCacheName)
	if err := os.Symlink(outside, cache); err != nil {
		t.Fatal(err)
	}
	refresh()
	if b, err := os.ReadFile(outside); err != nil || string(b) != forged {
		t.Fatalf("the file outside the tree was written through the link: %q %v", b, err)
	}
	if fi, err := os.Lstat(cache); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("the symlinked cache was replaced (%v)", err)
	}
	n := countStatus(sm)
	migRun(t, seamed(root, sm))
	if n.Load() != 3 {
		t.Fatalf("%d sidecars judged, want all 3", n.Load())
	}
}

func mustRel(tb testing.TB, root, p string) string {
	tb.Helper()
	rel, err := filepath.Rel(root, p)
	if err != nil {
		tb.Fatal(err)
	}
	return rel
}

func chmod(tb testing.TB, p string, mode os.FileMode) {
	tb.Helper()
	if err := os.Chmod(p, mode); err != nil {
		tb.Fatal(err)
	}
}

// TestFreshCacheHeaders: a cached verdict keeps the session file's header
// version and a digest of its metadata: the next walk takes the version
// from it while the file is unchanged (the deliberately wrong version in
// the cache shows it was not read) and reads the header again once pi
// wrote the file.
func TestFreshCacheHeaders(t *testing.T) {
	sm := &seams{}
	root, paths, refresh := freshTree(t, sm)
	refresh()
	c := verify.LoadFreshCache(root, sm.freshJudges())
	rel := mustRel(t, root, paths[0])
	e, ok := c.Get(rel)
	if !ok || e.Version != 3 || len(e.Source) != 32 {
		t.Fatalf("entry %+v (%v), want version 3 and a source digest", e, ok)
	}
	key, ok := verify.LstatKey(paths[0])
	if !ok {
		t.Fatal("no key")
	}
	if v, ok := c.Header(rel, key); !ok || v != 3 {
		t.Fatalf("Header of the unchanged file: %d %v", v, ok)
	}
	changed := key
	changed.Size++
	if _, ok := c.Header(rel, changed); ok {
		t.Fatal("Header answered for a file whose metadata changed")
	}

	e.Version = 9
	c.Set(rel, e, func(ledger.FreshEntry, ledger.FreshEntry) bool { return false })
	if err := c.Save(durable.OS, nil); err != nil {
		t.Fatal(err)
	}
	trees, err := discover.WalkPaths(context.Background(), []string{root}, discover.Options{Headers: func(r string) discover.Headers { return verify.LoadFreshCache(r, sm.freshJudges()) }})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range trees[0].Sessions {
		if want := map[bool]int{true: 9, false: 3}[s.Path == paths[0]]; s.Version != want {
			t.Errorf("%s: version %d, want %d", s.Rel, s.Version, want)
		}
	}
	migAppend(t, paths[0], migEntryLine(migEntryID(0x200), "", "pi wrote"))
	trees, err = discover.WalkPaths(context.Background(), []string{root}, discover.Options{Headers: func(r string) discover.Headers { return verify.LoadFreshCache(r, sm.freshJudges()) }})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range trees[0].Sessions {
		if s.Path == paths[0] && s.Version != 3 {
			t.Errorf("the written session's version %d: its header was not read again", s.Version)
		}
	}
}

// entryOf is the fresh cache entry session p's files give now.
func entryOf(tb testing.TB, p string) ledger.FreshEntry {
	tb.Helper()
	sidecar := discover.SidecarPath(p)
	names, err := verify.SidecarNames(sidecar, ledger.FreshMaxNames)
	if err != nil {
		tb.Fatal(err)
	}
	key, ok := verify.LstatKey(p)
	if !ok {
		tb.Fatal("no key")
	}
	digest, _, ok := verify.MetaDigest(sidecar, names, time.Time{}, 0)
	if !ok {
		tb.Fatal("no digest")
	}
	h, err := discover.ReadHeader(p)
	if err != nil {
		tb.Fatal(err)
	}
	st, err := verify.StatusFast(p)
	if err != nil {
		tb.Fatal(err)
	}
	return ledger.FreshEntry{Names: ledger.JoinNames(names), Digest: digest, Source: verify.SourceDigest(key), Version: h.Version, SessionID: h.ID,
		UID: uint32(key.UID), GID: uint32(key.GID), Entries: st.Entries, Bytes: st.Bytes}
}

// TestFreshCacheVouched: when pi only appended to sessions whose sidecars
// are cached (one judged, one the run wrote), the next run judges the
// session files alone (verify.StatusVouched) and plans their refresh as a
// status would, without a status of the sidecars; once pi marked one dirty
// (its sidecar changed), that one is judged by a status.
func TestFreshCacheVouched(t *testing.T) {
	sm := &seams{}
	root, paths, refresh := freshTree(t, sm)
	refresh()
	for _, p := range []string{paths[0], paths[2]} {
		migAppend(t, p, migEntryLine(migEntryID(0x300), "", "more"))
	}
	var vouched atomic.Int64
	old := sm.freshJudges().StatusVouched
	sm.judges.StatusVouched = func(p string, v verify.Vouched) (verify.StatusReport, bool) {
		vouched.Add(1)
		return old(p, v)
	}
	n := countStatus(sm)
	dry := seamed(root, sm)
	dry.DryRun = true
	rep := migRun(t, dry)
	if n.Load() != 0 || vouched.Load() != 2 {
		t.Fatalf("%d statuses and %d session judgments, want 0 and 2", n.Load(), vouched.Load())
	}
	for _, p := range []string{paths[0], paths[2]} {
		if s := migResult(t, rep, p); s.Action != PlanRefresh || !strings.HasPrefix(s.Reason, "the sidecar is stale: the source's length differs") {
			t.Errorf("%s: %s (%s)", p, s.Action, s.Reason)
		}
	}
	fixtures.MarkDirty(t, discover.SidecarPath(paths[0]))
	n.Store(0)
	vouched.Store(0)
	if s := migResult(t, migRun(t, dry), paths[0]); s.Action != PlanRefresh || n.Load() != 1 || vouched.Load() != 1 {
		t.Fatalf("after the dirty mark: %s (%s), %d statuses, %d session judgments", s.Action, s.Reason, n.Load(), vouched.Load())
	}
}

// TestFreshCacheFramesVouched: the sidecar a refresh in place wrote is
// vouched for frame for frame while its files are as it left them (the
// next refresh in place does not read its frames), and no longer once any
// file changed: a frame damaged since is caught by the CRC check, and the
// session rebuilt in full.
func TestFreshCacheFramesVouched(t *testing.T) {
	sm := &seams{}
	root, paths, refresh := freshTree(t, sm)
	refresh()
	busy := discover.Session{Path: paths[2], Rel: mustRel(t, root, paths[2]), Sidecar: discover.SidecarPath(paths[2])}
	a := discover.Session{Path: paths[0], Rel: mustRel(t, root, paths[0]), Sidecar: discover.SidecarPath(paths[0])}
	c := verify.LoadFreshCache(root, sm.freshJudges())
	names, ok := c.FramesVouched(busy)
	if !ok {
		t.Fatal("the sidecar the run wrote is not vouched for")
	}
	if listed, err := verify.SidecarNames(busy.Sidecar, ledger.FreshMaxNames); err != nil || !slices.Equal(names, listed) {
		t.Fatalf("vouched names %q, the sidecar holds %q (%v)", names, listed, err)
	}
	if _, ok := c.FramesVouched(a); ok {
		t.Fatal("a sidecar only a status judged is vouched for frame for frame")
	}
	rep := refresh() // continued in place without reading its frames
	if s := migResult(t, rep, paths[2]); !s.Incremental || !strings.Contains(strings.Join(s.Notes, " "), "refreshed in place") {
		t.Fatalf("second refresh: %+v", s)
	}
	// Continued with its vouched names (neither the base nor the result
	// walked): the names vouched for are still the sidecar's listing.
	if names, ok := verify.LoadFreshCache(root, sm.freshJudges()).FramesVouched(busy); !ok {
		t.Fatal("the sidecar continued again is not vouched for")
	} else if listed, err := verify.SidecarNames(busy.Sidecar, ledger.FreshMaxNames); err != nil || !slices.Equal(names, listed) {
		t.Fatalf("vouched names %q after a vouched refresh, the sidecar holds %q (%v)", names, listed, err)
	}
	fixtures.FlipByte(t, store.SegmentPath(busy.Sidecar, 1), 50)
	if _, ok := verify.LoadFreshCache(root, sm.freshJudges()).FramesVouched(busy); ok {
		t.Fatal("vouched for after a frame was damaged")
	}
	rep = refresh()
	if s := migResult(t, rep, paths[2]); s.Outcome != OutcomeDone || s.Incremental {
		t.Fatalf("after the damage: %+v, want a full rebuild", s)
	}
}

// TestFreshCacheAfterMigrate: a migration vouches for every sidecar it
// installs (its metadata read under the session lock, just after the
// install), so that the first cron run after it skips them all without a
// status — where change times are fine; where they are coarse, that run
// judges every sidecar.
func TestFreshCacheAfterMigrate(t *testing.T) {
	for _, fine := range []bool{true, false} {
		sm := &seams{}
		withFineCtime(sm, fine)
		root := t.TempDir()
		var paths []string
		for _, stem := range []string{"a", "b"} {
			p, _ := migSession(t, root, stem, 4)
			paths = append(paths, p)
		}
		migRun(t, seamed(root, sm))
		n := countStatus(sm)
		rep := migRun(t, seamed(root, sm))
		for _, p := range paths {
			if s := migResult(t, rep, p); s.Outcome != OutcomeSkipped {
				t.Fatalf("%s: %+v", p, s)
			}
		}
		if want := map[bool]int64{true: 0, false: 2}[fine]; n.Load() != want {
			t.Fatalf("fine change times %v: the run after the migration judged %d sidecars, want %d", fine, n.Load(), want)
		}
		if _, ok := verify.LoadFreshCache(root, sm.freshJudges()).FramesVouched(discover.Session{Path: paths[0], Rel: mustRel(t, root, paths[0]), Sidecar: discover.SidecarPath(paths[0])}); fine && !ok {
			t.Fatal("an installed sidecar is not vouched for frame for frame")
		}
	}
}
