package engine

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"pisess/fixtures"
	"pisess/readers/discover"
	"pisess/verify"
	"pisess/writers/durable"
	"pisess/writers/store"
)

// withRacyWindow sets the racy window for one test: short enough that a
// test need not wait seconds, long enough to cover the file clock's tick.
func withRacyWindow(tb testing.TB, d time.Duration) {
	old := racyWindow
	racyWindow = d
	tb.Cleanup(func() { racyWindow = old })
}

// countStatus counts the sidecars judged by verify.StatusFast.
func countStatus(tb testing.TB) *atomic.Int64 {
	var n atomic.Int64
	old := statusFast
	statusFast = func(p string) (verify.StatusReport, error) {
		n.Add(1)
		return old(p)
	}
	tb.Cleanup(func() { statusFast = old })
	return &n
}

// freshTree is a tree of two migrated sessions (paths) and a third that
// pi keeps writing: refresh appends to it and migrates, a run that writes
// (the refresh) and so saves the verdicts it cached.
func freshTree(tb testing.TB) (root string, paths []string, refresh func() MigrateReport) {
	tb.Helper()
	withRacyWindow(tb, 40*time.Millisecond)
	root = tb.TempDir()
	for _, stem := range []string{"a", "b"} {
		p, _ := migSession(tb, root, stem, 4)
		paths = append(paths, p)
	}
	busy, last := migSession(tb, root, "busy", 2)
	migRun(tb, migOptions(root))
	time.Sleep(60 * time.Millisecond) // past the racy window
	n := 0
	refresh = func() MigrateReport {
		tb.Helper()
		n++
		id := migEntryID(0x100 + n)
		migAppend(tb, busy, migEntryLine(id, last, "more"))
		last = id
		rep := migRun(tb, migOptions(root))
		if s := migResult(tb, rep, busy); s.Outcome != OutcomeDone {
			tb.Fatalf("busy session: %+v", s)
		}
		return rep
	}
	return root, paths, refresh
}

// TestFreshCacheSkipsUnchanged: a run judges the fresh sidecars and caches
// the verdicts; the next run skips both without judging either, and
// writes nothing.
func TestFreshCacheSkipsUnchanged(t *testing.T) {
	root, paths, refresh := freshTree(t)
	n := countStatus(t)
	migRun(t, migOptions(root))
	if n.Load() != 3 {
		t.Fatalf("the no-op run judged %d sidecars, want 3", n.Load())
	}
	if _, err := os.Lstat(filepath.Join(root, discover.PisessDir, FreshCacheName)); !os.IsNotExist(err) {
		t.Fatalf("a run that changed nothing wrote the fresh cache (%v)", err)
	}
	n.Store(0)
	refresh()
	if n.Load() != 3 {
		t.Fatalf("the refresh run judged %d sidecars, want 3 (caching a verdict judges nothing again)", n.Load())
	}
	if len(loadFreshCache(root).entries) != 2 {
		t.Fatalf("fresh cache: %+v", loadFreshCache(root).entries)
	}
	before := fixtures.TreeDigest(t, root)
	n.Store(0)
	rep := migRun(t, migOptions(root))
	for _, p := range paths {
		if s := migResult(t, rep, p); s.Outcome != OutcomeSkipped || s.Reason != "the sidecar is fresh" {
			t.Fatalf("%s: %+v", p, s)
		}
	}
	if n.Load() != 1 {
		t.Fatalf("the no-op run judged %d sidecars, want 1 (the one just refreshed)", n.Load())
	}
	if diff := migDigestDiff(before, fixtures.TreeDigest(t, root), nil); len(diff) != 0 {
		t.Fatalf("the cached no-op run changed %v", diff)
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
		{"segments directory removed", func(t *testing.T, path, sidecar string) {
			if err := os.RemoveAll(store.SegmentsPath(sidecar)); err != nil {
				t.Fatal(err)
			}
		}, false},
		// The fast status does not read segments/ (fsck does): skipped
		// with or without the cache, the same answer.
		{"an extra file in segments/", func(t *testing.T, path, sidecar string) {
			if err := os.WriteFile(filepath.Join(store.SegmentsPath(sidecar), "0000000000000002.seg"), nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}, true},
		{"source-state removed (pi verifies the whole sidecar)", func(t *testing.T, path, sidecar string) {
			if err := os.Remove(store.SourceStatePath(sidecar)); err != nil {
				t.Fatal(err)
			}
		}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			root, paths, refresh := freshTree(t)
			refresh() // judges a and b, caches their verdicts
			if len(loadFreshCache(root).entries) != 2 {
				t.Fatal("verdicts not cached")
			}
			path := paths[0]
			c.change(t, path, discover.SidecarPath(path))
			dry := migOptions(root)
			dry.DryRun = true
			cached := migResult(t, migRun(t, dry), path)
			if err := os.Remove(filepath.Join(root, discover.PisessDir, FreshCacheName)); err != nil {
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

// TestFreshCacheRacy: verdicts on files changed within the racy window of
// the judgment are not cached.
func TestFreshCacheRacy(t *testing.T) {
	root, _, refresh := freshTree(t)
	withRacyWindow(t, time.Hour)
	refresh()
	if n := len(loadFreshCache(root).entries); n != 0 {
		t.Fatalf("%d racy verdicts cached", n)
	}
}

// TestFreshCacheChangedAfterJudgment: a sidecar whose files change after
// its judgment began (pi marking it dirty while the run plans) is not
// cached, whatever the change left behind.
func TestFreshCacheChangedAfterJudgment(t *testing.T) {
	root, paths, refresh := freshTree(t)
	sidecar := discover.SidecarPath(paths[0])
	old := statusFast
	statusFast = func(p string) (verify.StatusReport, error) {
		st, err := old(p)
		if p == paths[0] {
			// Same mode, new change time: nothing the status would see.
			chmod(t, store.SegmentPath(sidecar, 1), 0o600)
		}
		return st, err
	}
	t.Cleanup(func() { statusFast = old })
	refresh()
	entries := loadFreshCache(root).entries
	if _, ok := entries[mustRel(t, root, paths[0])]; ok {
		t.Fatal("a verdict on files changed after its judgment was cached")
	}
	if _, ok := entries[mustRel(t, root, paths[1])]; !ok {
		t.Fatal("the unchanged session's verdict was not cached")
	}
}

// TestFreshCacheUntrusted: the cache is data in a user's tree. Entries
// naming files outside the sidecar, too many names, or a digest that does
// not match are not trusted: the sidecar is judged again.
func TestFreshCacheUntrusted(t *testing.T) {
	root, paths, _ := freshTree(t)
	rel := mustRel(t, root, paths[0])
	many := `""`
	for i := 0; i < freshMaxNames; i++ {
		many += `,"x"`
	}
	cache := filepath.Join(root, discover.PisessDir, FreshCacheName)
	digest := `"` + strings.Repeat("0", 64) + `"`
	for name, names := range map[string]string{
		"outside":  `["","../../etc"]`,
		"absolute": `["","/etc/passwd"]`,
		"unclean":  `["","segments/../manifest.json"]`,
		"too many": `[` + many + `]`,
		"forged":   `[""]`,
	} {
		doc := `{"version":1,"sessions":{"` + rel + `":{"names":` + names + `,"digest":` + digest + `}}}`
		if err := os.WriteFile(cache, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		n := countStatus(t)
		dry := migOptions(root)
		dry.DryRun = true
		if s := migResult(t, migRun(t, dry), paths[0]); s.Action != PlanSkip {
			t.Fatalf("%s: %+v", name, s)
		}
		if n.Load() != 3 {
			t.Fatalf("%s: %d sidecars judged, want all 3", name, n.Load())
		}
	}
}

// TestFreshCacheSymlinked: a fresh.json that is a symlink to a file outside
// the tree is neither read nor written through, nor replaced (pisess never
// renames over what it did not expect, issue 11): a run that would save
// the cache leaves the link and the file it points at as they were, and
// the next run judges every sidecar again.
func TestFreshCacheSymlinked(t *testing.T) {
	root, paths, refresh := freshTree(t)
	outside := filepath.Join(t.TempDir(), "victim.json")
	// A valid entry for session a: followed, it would make a run skip a
	// without judging it.
	sidecar := discover.SidecarPath(paths[0])
	names, err := sidecarNames(sidecar)
	if err != nil {
		t.Fatal(err)
	}
	key, ok := lstatKey(paths[0])
	if !ok {
		t.Fatal("no key")
	}
	digest, _, ok := metaDigest(key, sidecar, names, time.Time{})
	if !ok {
		t.Fatal("no digest")
	}
	doc, err := json.Marshal(stateFile[freshEntry]{Version: 1, Sessions: map[string]freshEntry{mustRel(t, root, paths[0]): {Names: names, Digest: digest}}})
	if err != nil {
		t.Fatal(err)
	}
	forged := string(doc)
	if err := os.WriteFile(outside, []byte(forged), 0o600); err != nil {
		t.Fatal(err)
	}
	cache := filepath.Join(root, discover.PisessDir, FreshCacheName)
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
	n := countStatus(t)
	migRun(t, migOptions(root))
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
	root, paths, refresh := freshTree(t)
	refresh()
	c := loadFreshCache(root)
	rel := mustRel(t, root, paths[0])
	e, ok := c.get(rel)
	if !ok || e.Version != 3 || len(e.Source) != 32 {
		t.Fatalf("entry %+v (%v), want version 3 and a source digest", e, ok)
	}
	key, ok := lstatKey(paths[0])
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
	c.set(rel, e, func(freshEntry, freshEntry) bool { return false })
	if err := c.save(durable.OS); err != nil {
		t.Fatal(err)
	}
	trees, err := walkRootsWith([]string{root}, discover.Options{Headers: func(r string) discover.Headers { return loadFreshCache(r) }})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range trees[0].Sessions {
		if want := map[bool]int{true: 9, false: 3}[s.Path == paths[0]]; s.Version != want {
			t.Errorf("%s: version %d, want %d", s.Rel, s.Version, want)
		}
	}
	migAppend(t, paths[0], migEntryLine(migEntryID(0x200), "", "pi wrote"))
	trees, err = walkRootsWith([]string{root}, discover.Options{Headers: func(r string) discover.Headers { return loadFreshCache(r) }})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range trees[0].Sessions {
		if s.Path == paths[0] && s.Version != 3 {
			t.Errorf("the written session's version %d: its header was not read again", s.Version)
		}
	}
}
