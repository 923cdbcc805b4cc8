package discover

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"pisess/readers"
)

const header = `{"type":"session","version":3,"id":"3f2b8c1e-9a4d-4e6f-8b2a-1c5d7e9f0a1b","timestamp":"2026-01-05T10:00:00.000Z","cwd":"/home/u/proj"}` + "\n"
const entry = `{"type":"label","id":"a1b2c3d4","timestamp":"2026-01-05T10:00:01.000Z","targetId":"a1b2c3d4","label":"x"}` + "\n"

func write(tb testing.TB, path, content string) {
	tb.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		tb.Fatal(err)
	}
}

func mkdir(tb testing.TB, path string) {
	tb.Helper()
	if err := os.MkdirAll(path, 0o700); err != nil {
		tb.Fatal(err)
	}
}

func symlink(tb testing.TB, target, path string) {
	tb.Helper()
	if err := os.Symlink(target, path); err != nil {
		tb.Fatal(err)
	}
}

func walkOne(tb testing.TB, roots ...string) Tree {
	tb.Helper()
	trees, err := Walk(roots)
	if err != nil {
		tb.Fatal(err)
	}
	if len(trees) != 1 {
		tb.Fatalf("%d trees, want 1: %+v", len(trees), trees)
	}
	return trees[0]
}

func sessionsByRel(t Tree) map[string]Session {
	m := map[string]Session{}
	for _, s := range t.Sessions {
		m[s.Rel] = s
	}
	return m
}

func skippedByBase(t Tree) map[string]Skipped {
	m := map[string]Skipped{}
	for _, s := range t.Skipped {
		m[filepath.Base(s.Path)] = s
	}
	return m
}

// sqliteFile is enough of a database for discovery, which reads the magic.
const sqliteFile = "SQLite format 3\x00" + "\x10\x00\x01\x01"

func TestWalkTree(t *testing.T) {
	root := t.TempDir()
	cwd := filepath.Join(root, "--home-u-proj--")
	a := filepath.Join(cwd, "2026-01-05T10-00-00_3f2b8c1e.jsonl")
	write(t, a, header+entry)
	mkdir(t, filepath.Join(cwd, "2026-01-05T10-00-00_3f2b8c1e.v2", "segments"))
	mkdir(t, filepath.Join(cwd, "2026-01-05T10-00-00_3f2b8c1e.v2.staging.0123456789abcdef0123456789abcdef"))
	mkdir(t, filepath.Join(cwd, "2026-01-05T10-00-00_3f2b8c1e.v2.backup.fedcba9876543210fedcba9876543210"))
	write(t, a+".lock", "")
	// Named by neither pi's shape: found by extension and header.
	write(t, filepath.Join(cwd, "whatever.jsonl"), header)
	write(t, filepath.Join(cwd, "notes.jsonl"), `{"hello":"world"}`+"\n")
	write(t, filepath.Join(cwd, "empty.jsonl"), "")
	write(t, filepath.Join(cwd, "badheader.jsonl"), `{"type":"session","version":3}`+"\n")
	write(t, filepath.Join(cwd, "future.jsonl"), `{"type":"session","version":9,"id":"x","timestamp":"t","cwd":"/"}`+"\n")
	write(t, filepath.Join(cwd, "README.md"), "hi")
	// SQLite: one alone, one whose stem also has a .jsonl.
	write(t, filepath.Join(cwd, "db.sqlite"), sqliteFile)
	write(t, filepath.Join(cwd, "db.sqlite-wal"), "")
	write(t, filepath.Join(cwd, "db.sqlite-shm"), "")
	write(t, filepath.Join(cwd, "db.sqlite.lock"), "")
	write(t, filepath.Join(cwd, "twin.sqlite"), sqliteFile)
	write(t, filepath.Join(cwd, "twin.jsonl"), header)
	write(t, filepath.Join(cwd, "fake.sqlite"), header)
	// Symlinks: a session file, a directory.
	other := t.TempDir()
	write(t, filepath.Join(other, "target.jsonl"), header)
	symlink(t, filepath.Join(other, "target.jsonl"), filepath.Join(cwd, "link.jsonl"))
	symlink(t, other, filepath.Join(root, "--linked--"))
	// Leftovers of sessions that are gone.
	mkdir(t, filepath.Join(cwd, "gone.v2.staging.00000000000000000000000000000000"))
	mkdir(t, filepath.Join(cwd, "gone.v2.backup.11111111111111111111111111111111"))
	mkdir(t, filepath.Join(cwd, "orphan.v2"))
	// pisess's own directory and a special file.
	mkdir(t, filepath.Join(root, PisessDir, "quarantine", "x"))
	write(t, filepath.Join(root, PisessDir, "quarantine", "x", "old.jsonl"), header)
	if err := syscall.Mkfifo(filepath.Join(cwd, "pipe.jsonl"), 0o600); err != nil {
		t.Fatal(err)
	}

	tree := walkOne(t, root)
	if tree.Root != root || tree.SymlinkAncestor != "" {
		t.Fatalf("tree %s (symlink %q)", tree.Root, tree.SymlinkAncestor)
	}
	got := sessionsByRel(tree)
	var rels []string
	for _, s := range tree.Sessions {
		rels = append(rels, s.Rel)
	}
	wantRels := []string{
		"--home-u-proj--/2026-01-05T10-00-00_3f2b8c1e.jsonl",
		"--home-u-proj--/badheader.jsonl",
		"--home-u-proj--/db.sqlite",
		"--home-u-proj--/future.jsonl",
		"--home-u-proj--/link.jsonl",
		"--home-u-proj--/twin.jsonl",
		"--home-u-proj--/twin.sqlite",
		"--home-u-proj--/whatever.jsonl",
	}
	if strings.Join(rels, "\n") != strings.Join(wantRels, "\n") {
		t.Fatalf("sessions:\n%s\nwant:\n%s", strings.Join(rels, "\n"), strings.Join(wantRels, "\n"))
	}

	s := got["--home-u-proj--/2026-01-05T10-00-00_3f2b8c1e.jsonl"]
	if s.Path != a || s.Tree != root || s.Format != readers.FormatJSONLv3 || s.Version != 3 ||
		s.Size != int64(len(header+entry)) || s.Lock != a+".lock" || s.Refusal != nil {
		t.Errorf("session a: %+v", s)
	}
	if s.Sidecar != filepath.Join(cwd, "2026-01-05T10-00-00_3f2b8c1e.v2") || s.SidecarIsSymlink {
		t.Errorf("sidecar %q symlink %v", s.Sidecar, s.SidecarIsSymlink)
	}
	if len(s.Staging) != 1 || !strings.HasSuffix(s.Staging[0], ".v2.staging.0123456789abcdef0123456789abcdef") ||
		len(s.Backups) != 1 || !strings.HasSuffix(s.Backups[0], ".v2.backup.fedcba9876543210fedcba9876543210") {
		t.Errorf("siblings %v %v", s.Staging, s.Backups)
	}
	if s := got["--home-u-proj--/whatever.jsonl"]; s.Sidecar != "" || s.Refusal != nil {
		t.Errorf("whatever: %+v", s)
	}
	if s := got["--home-u-proj--/badheader.jsonl"]; s.Refusal != nil {
		t.Errorf("a session with a bad header is the reader's to refuse: %+v", s.Refusal)
	}
	if s := got["--home-u-proj--/future.jsonl"]; s.Version != 9 {
		t.Errorf("future version %d", s.Version)
	}
	if s := got["--home-u-proj--/db.sqlite"]; s.Format != readers.FormatSQLitev1 || s.Refusal != nil {
		t.Errorf("db.sqlite: %+v", s)
	}
	if s := got["--home-u-proj--/twin.sqlite"]; s.Refusal == nil || s.Refusal.Class != ClassSidecarConflict ||
		s.Refusal.Reason != "both twin.sqlite and twin.jsonl would claim twin.v2" {
		t.Errorf("twin.sqlite: %+v", s.Refusal)
	}
	if s := got["--home-u-proj--/twin.jsonl"]; s.Refusal != nil {
		t.Errorf("twin.jsonl refused: %v", s.Refusal)
	}
	if s := got["--home-u-proj--/link.jsonl"]; s.Refusal == nil || s.Refusal.Class != readers.ClassSymlink || s.Refusal.Reason != ReasonSymlink {
		t.Errorf("link.jsonl: %+v", s.Refusal)
	}

	skipped := skippedByBase(tree)
	for name, kind := range map[string]SkipKind{
		"notes.jsonl": SkipNotSession, "empty.jsonl": SkipNotSession, "fake.sqlite": SkipNotSession,
		"--linked--": SkipSymlinkDir, "pipe.jsonl": SkipSpecial,
	} {
		if skipped[name].Kind != kind {
			t.Errorf("%s skipped as %q, want %q", name, skipped[name].Kind, kind)
		}
	}
	if len(tree.Skipped) != 5 {
		t.Errorf("skipped: %+v", tree.Skipped)
	}

	var left []string
	for _, l := range tree.Leftovers {
		left = append(left, string(l.Kind)+" "+l.Stem+" "+filepath.Base(l.Path))
	}
	wantLeft := []string{
		"backup gone gone.v2.backup.11111111111111111111111111111111",
		"staging gone gone.v2.staging.00000000000000000000000000000000",
		"sidecar orphan orphan.v2",
	}
	if strings.Join(left, "\n") != strings.Join(wantLeft, "\n") {
		t.Errorf("leftovers:\n%s\nwant:\n%s", strings.Join(left, "\n"), strings.Join(wantLeft, "\n"))
	}

	// Deterministic.
	again := walkOne(t, root)
	if len(again.Sessions) != len(tree.Sessions) {
		t.Fatal("second walk differs")
	}
	for i := range again.Sessions {
		if again.Sessions[i].Path != tree.Sessions[i].Path {
			t.Fatal("second walk differs in order")
		}
	}
}

func TestWalkSymlinkedSidecar(t *testing.T) {
	root := t.TempDir()
	write(t, filepath.Join(root, "s.jsonl"), header)
	real := filepath.Join(t.TempDir(), "real.v2")
	mkdir(t, real)
	symlink(t, real, filepath.Join(root, "s.v2"))
	s := walkOne(t, root).Sessions[0]
	if s.Sidecar != filepath.Join(root, "s.v2") || !s.SidecarIsSymlink {
		t.Fatalf("sidecar %q symlink %v", s.Sidecar, s.SidecarIsSymlink)
	}
}

func TestWalkUnderSymlinkedAncestor(t *testing.T) {
	base := t.TempDir()
	realTree := filepath.Join(base, "real", "sessions")
	write(t, filepath.Join(realTree, "--p--", "a.jsonl"), header)
	symlink(t, filepath.Join(base, "real"), filepath.Join(base, "pi"))

	for _, root := range []string{
		filepath.Join(base, "pi", "sessions"), // an ancestor is a symlink
		filepath.Join(base, "pi"),             // the root itself is one
	} {
		tree := walkOne(t, root)
		if tree.SymlinkAncestor != filepath.Join(base, "pi") {
			t.Errorf("%s: SymlinkAncestor %q", root, tree.SymlinkAncestor)
		}
		if len(tree.Sessions) != 1 {
			t.Fatalf("%s: sessions %+v", root, tree.Sessions)
		}
		r := tree.Sessions[0].Refusal
		if r == nil || r.Class != ClassSymlinkAncestor || !strings.HasPrefix(r.Reason, ReasonSymlinkAncestor) {
			t.Errorf("%s: refusal %+v", root, r)
		}
	}
	// A file root under the symlink is refused the same way.
	tree := walkOne(t, filepath.Join(base, "pi", "sessions", "--p--", "a.jsonl"))
	if r := tree.Sessions[0].Refusal; r == nil || r.Class != ClassSymlinkAncestor {
		t.Errorf("file root: %+v", r)
	}
}

func TestWalkFileRoots(t *testing.T) {
	t.Run("cwd directory shape", func(t *testing.T) {
		root := t.TempDir()
		p := filepath.Join(root, "--home-u-p--", "a.jsonl")
		write(t, p, header)
		mkdir(t, filepath.Join(root, "--home-u-p--", "a.v2"))
		tree := walkOne(t, p)
		if tree.Root != root {
			t.Fatalf("tree %s, want %s", tree.Root, root)
		}
		s := tree.Sessions[0]
		if s.Rel != "--home-u-p--/a.jsonl" || s.Sidecar == "" {
			t.Fatalf("session %+v", s)
		}
	})
	t.Run("nearest .pisess", func(t *testing.T) {
		root := t.TempDir()
		mkdir(t, filepath.Join(root, PisessDir))
		p := filepath.Join(root, "x", "y", "a.jsonl")
		write(t, p, header)
		if tree := walkOne(t, p); tree.Root != root || tree.Sessions[0].Rel != "x/y/a.jsonl" {
			t.Fatalf("tree %s rel %s", tree.Root, tree.Sessions[0].Rel)
		}
	})
	t.Run("plain directory", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "plain")
		p := filepath.Join(dir, "a.jsonl")
		write(t, p, header)
		if tree := walkOne(t, p); tree.Root != dir {
			t.Fatalf("tree %s", tree.Root)
		}
	})
	t.Run("inside a directory root", func(t *testing.T) {
		root := t.TempDir()
		p := filepath.Join(root, "deep", "a.jsonl")
		write(t, p, header)
		tree := walkOne(t, root, p)
		if tree.Root != root || len(tree.Sessions) != 1 {
			t.Fatalf("tree %s sessions %d", tree.Root, len(tree.Sessions))
		}
	})
	t.Run("symlinked session file", func(t *testing.T) {
		root := t.TempDir()
		write(t, filepath.Join(root, "real.jsonl"), header)
		symlink(t, filepath.Join(root, "real.jsonl"), filepath.Join(root, "l.jsonl"))
		tree := walkOne(t, filepath.Join(root, "l.jsonl"))
		if r := tree.Sessions[0].Refusal; r == nil || r.Class != readers.ClassSymlink {
			t.Fatalf("refusal %+v", r)
		}
	})
	t.Run("not a session file", func(t *testing.T) {
		p := filepath.Join(t.TempDir(), "a.txt")
		write(t, p, header)
		if _, err := Walk([]string{p}); err == nil {
			t.Fatal("a .txt root was accepted")
		}
	})
	t.Run("missing root", func(t *testing.T) {
		if _, err := Walk([]string{filepath.Join(t.TempDir(), "nope")}); err == nil {
			t.Fatal("a missing root was accepted")
		}
	})
}

func TestWalkNestedTrees(t *testing.T) {
	root := t.TempDir()
	sub := filepath.Join(root, "sub")
	write(t, filepath.Join(root, "a.jsonl"), header)
	write(t, filepath.Join(sub, "b.jsonl"), header)
	mkdir(t, filepath.Join(root, "other", PisessDir))
	write(t, filepath.Join(root, "other", "c.jsonl"), header)

	// One tree, one journal (issue 12): a directory root inside another
	// root of the same run belongs to that root's tree.
	trees, err := Walk([]string{root, sub})
	if err != nil {
		t.Fatal(err)
	}
	if len(trees) != 1 || trees[0].Root != root {
		t.Fatalf("trees %+v", trees)
	}
	rels := map[string]bool{}
	for _, s := range trees[0].Sessions {
		rels[s.Rel] = true
	}
	if len(trees[0].Sessions) != 3 || !rels["sub/b.jsonl"] || !rels["a.jsonl"] {
		t.Fatalf("sessions: %+v", trees[0].Sessions)
	}
	// A directory below the root with its own .pisess/ is reported; its
	// sessions belong to the tree walked.
	if sk := skippedByBase(trees[0])["other"]; sk.Kind != SkipNestedTree {
		t.Errorf("nested tree not reported: %+v", trees[0].Skipped)
	}
	// The same roots in another order give the same answer, each session once.
	again, _ := Walk([]string{sub, root, filepath.Join(sub, "b.jsonl")})
	if len(again) != 1 || again[0].Root != root || len(again[0].Sessions) != 3 {
		t.Fatalf("reordered roots: %+v", again)
	}
}

// TestTreeRoot: a run on any path inside a tree uses that tree's root for
// its journal, lock and quarantine (issue 12, item 6).
func TestTreeRoot(t *testing.T) {
	t.Setenv("PI_CODING_AGENT_DIR", "")
	base := t.TempDir()
	t.Setenv("PI_SESSIONS_DIR", filepath.Join(base, "default"))

	tree := filepath.Join(base, "t")
	mkdir(t, filepath.Join(tree, PisessDir))
	deep := filepath.Join(tree, "--w--", "sub")
	write(t, filepath.Join(deep, "a.jsonl"), header)

	def := filepath.Join(base, "default")
	write(t, filepath.Join(def, "x", "y", "b.jsonl"), header)

	plain := filepath.Join(base, "plain", "p")
	write(t, filepath.Join(plain, "c.jsonl"), header)
	cwd := filepath.Join(base, "plain2", "--home-u--")
	write(t, filepath.Join(cwd, "d.jsonl"), header)

	for _, c := range []struct{ path, want string }{
		{tree, tree},
		{filepath.Join(tree, "--w--"), tree},
		{deep, tree},
		{filepath.Join(deep, "a.jsonl"), tree},
		{def, def},
		{filepath.Join(def, "x", "y"), def},
		{filepath.Join(def, "x", "y", "b.jsonl"), def},
		{plain, plain},
		{filepath.Join(plain, "c.jsonl"), plain},
		{cwd, filepath.Dir(cwd)},
		{filepath.Join(cwd, "d.jsonl"), filepath.Dir(cwd)},
	} {
		if got := TreeRoot(c.path); got != c.want {
			t.Errorf("TreeRoot(%s) = %s, want %s", c.path, got, c.want)
		}
	}
	// Walk of a subdirectory lists its sessions under the tree's root,
	// relative to it, and nothing outside the subdirectory.
	write(t, filepath.Join(tree, "--other--", "e.jsonl"), header)
	trees, err := Walk([]string{deep})
	if err != nil {
		t.Fatal(err)
	}
	if len(trees) != 1 || trees[0].Root != tree || len(trees[0].Sessions) != 1 || trees[0].Sessions[0].Rel != "--w--/sub/a.jsonl" {
		t.Fatalf("walk of a subdirectory: %+v", trees)
	}
}

func TestDefaultRoots(t *testing.T) {
	t.Setenv("PI_SESSIONS_DIR", "/s")
	t.Setenv("PI_CODING_AGENT_DIR", "/agent")
	t.Setenv("HOME", "/home/u")
	check := func(want string) {
		t.Helper()
		got, err := DefaultRoots()
		if err != nil || len(got) != 1 || got[0] != want {
			t.Fatalf("DefaultRoots = %v, %v; want %s", got, err, want)
		}
	}
	check("/s")
	t.Setenv("PI_SESSIONS_DIR", "")
	check("/agent/sessions")
	t.Setenv("PI_CODING_AGENT_DIR", "")
	check("/home/u/.pi/agent/sessions")

	root := t.TempDir()
	write(t, filepath.Join(root, "--p--", "a.jsonl"), header)
	t.Setenv("PI_SESSIONS_DIR", root)
	roots, _ := DefaultRoots()
	if tree := walkOne(t, roots...); len(tree.Sessions) != 1 {
		t.Fatalf("default root walk: %+v", tree)
	}
}

func TestSidecarPath(t *testing.T) {
	for in, want := range map[string]string{
		"/t/d/2026_ab.jsonl": "/t/d/2026_ab.v2",
		"/t/d/x.y.sqlite":    "/t/d/x.y.v2",
		"/t/d/.hidden.jsonl": "/t/d/.hidden.v2",
	} {
		if got := SidecarPath(in); got != want {
			t.Errorf("SidecarPath(%s) = %s, want %s", in, got, want)
		}
	}
}

func TestOpenAndReadHeader(t *testing.T) {
	root := t.TempDir()
	p := filepath.Join(root, "a.jsonl")
	write(t, p, header+entry)
	h, err := ReadHeader(p)
	if err != nil || h.ID != "3f2b8c1e-9a4d-4e6f-8b2a-1c5d7e9f0a1b" || h.Version != 3 || h.Format != readers.FormatJSONLv3 ||
		string(h.Raw) != strings.TrimSuffix(header, "\n") {
		t.Fatalf("ReadHeader = %+v, %v", h, err)
	}
	// A CRLF header's Raw is the line without its "\r\n".
	crlf := filepath.Join(root, "crlf.jsonl")
	write(t, crlf, strings.TrimSuffix(header, "\n")+"\r\n"+entry)
	if h, err := ReadHeader(crlf); err != nil || string(h.Raw) != strings.TrimSuffix(header, "\n") {
		t.Fatalf("ReadHeader of a CRLF header = %q, %v", h.Raw, err)
	}
	// Only the header is read: a bad entry further on is not its business.
	bad := filepath.Join(root, "b.jsonl")
	write(t, bad, header+"{not json\n")
	if h, err := ReadHeader(bad); err != nil || h.Version != 3 {
		t.Fatalf("ReadHeader with a bad entry = %+v, %v", h, err)
	}
	if _, err := OpenSource(bad); readers.AsRefused(err) == nil {
		t.Fatalf("OpenSource of a bad session: %v", err)
	}
	legacy := filepath.Join(root, "c.jsonl")
	write(t, legacy, `{"type":"session","id":"x","timestamp":"2026-01-05T10:00:00.000Z","cwd":"/"}`+"\n")
	if h, err := ReadHeader(legacy); err != nil || h.Version != 0 {
		t.Fatalf("ReadHeader of a version-1 header = %+v, %v", h, err)
	}
	if _, err := ReadHeader(filepath.Join(root, "none.jsonl")); readers.AsRefused(err) == nil {
		t.Fatalf("missing file: %v", err)
	}

	tree := walkOne(t, root)
	s := sessionsByRel(tree)["a.jsonl"]
	src, err := s.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if e, err := src.Next(); err != nil || e.ID != "a1b2c3d4" {
		t.Fatalf("first entry %+v, %v", e, err)
	}
	refused := Session{Path: p, Refusal: &readers.RefusedError{Path: p, Class: readers.ClassSymlink, Reason: ReasonSymlink}}
	if _, err := refused.Open(); readers.AsRefused(err) != refused.Refusal {
		t.Fatalf("Open of a refused session: %v", err)
	}
	if _, err := OpenSource(filepath.Join(root, "x.txt")); readers.AsRefused(err) == nil {
		t.Fatal("OpenSource of a .txt")
	}
}

func TestWalkFileRootBelowASymlinkInsideItsTree(t *testing.T) {
	root := t.TempDir()
	mkdir(t, filepath.Join(root, PisessDir))
	real := filepath.Join(root, "real")
	write(t, filepath.Join(real, "a.jsonl"), header)
	symlink(t, real, filepath.Join(root, "link"))
	tree := walkOne(t, filepath.Join(root, "link", "a.jsonl"))
	if tree.Root != root || tree.SymlinkAncestor != "" {
		t.Fatalf("tree %s ancestor %q", tree.Root, tree.SymlinkAncestor)
	}
	r := tree.Sessions[0].Refusal
	if r == nil || r.Class != ClassSymlinkAncestor || !strings.Contains(r.Reason, filepath.Join(root, "link")) {
		t.Fatalf("refusal %+v", r)
	}
}

// TestWalkSubdirBelowASymlinkInsideItsTree: a directory given below a
// symlinked directory of its tree belongs to the tree, and its sessions are
// refused for the symlinked ancestor (pi opens no path through a symlink).
func TestWalkSubdirBelowASymlinkInsideItsTree(t *testing.T) {
	root := t.TempDir()
	mkdir(t, filepath.Join(root, PisessDir))
	real := filepath.Join(root, "real")
	write(t, filepath.Join(real, "sub", "a.jsonl"), header)
	symlink(t, real, filepath.Join(root, "link"))
	tree := walkOne(t, filepath.Join(root, "link", "sub"))
	if tree.Root != root || tree.SymlinkAncestor != "" || len(tree.Sessions) != 1 {
		t.Fatalf("tree %+v", tree)
	}
	r := tree.Sessions[0].Refusal
	if r == nil || r.Class != ClassSymlinkAncestor || !strings.Contains(r.Reason, filepath.Join(root, "link")) {
		t.Fatalf("refusal %+v", r)
	}
}

// headerTable is a discover.Headers that answers from a table of keys and
// counts the questions.
type headerTable struct {
	versions map[string]int
	keys     map[string]FileKey
	asked    atomic.Int64
}

func (h *headerTable) Header(rel string, key FileKey) (int, bool) {
	h.asked.Add(1)
	if k, ok := h.keys[rel]; ok && k == key {
		return h.versions[rel], true
	}
	return 0, false
}

// TestWalkHeaderCache: a session file whose key is what the cache knows
// takes its version from the cache (the header is not read: the cache's
// deliberately wrong version shows it); one that changed since, or a
// symlinked one, is sniffed; a file that is no session is still skipped.
func TestWalkHeaderCache(t *testing.T) {
	root := t.TempDir()
	mkdir(t, filepath.Join(root, PisessDir))
	same := filepath.Join(root, "--p--", "a.jsonl")
	grown := filepath.Join(root, "--p--", "b.jsonl")
	write(t, same, header+entry)
	write(t, grown, header)
	write(t, filepath.Join(root, "--p--", "notes.jsonl"), "not json\n")
	symlink(t, same, filepath.Join(root, "--p--", "c.jsonl"))
	first := walkOne(t, root)
	h := &headerTable{versions: map[string]int{}, keys: map[string]FileKey{}}
	for _, s := range first.Sessions {
		if s.Key == (FileKey{}) {
			t.Fatalf("%s: no key from the listing", s.Rel)
		}
		h.versions[s.Rel], h.keys[s.Rel] = 9, s.Key
	}
	f, err := os.OpenFile(grown, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(entry); err != nil {
		t.Fatal(err)
	}
	f.Close()
	var roots []string
	trees, err := WalkWith([]string{root}, Options{Headers: func(r string) Headers {
		roots = append(roots, r)
		return h
	}})
	if err != nil {
		t.Fatal(err)
	}
	if len(trees) != 1 || len(roots) != 1 || roots[0] != root {
		t.Fatalf("trees %d, headers asked for %v", len(trees), roots)
	}
	got := sessionsByRel(trees[0])
	for rel, want := range map[string]int{"--p--/a.jsonl": 9, "--p--/b.jsonl": 3, "--p--/c.jsonl": 0} {
		if s, ok := got[rel]; !ok || s.Version != want {
			t.Errorf("%s: version %d (listed %v), want %d", rel, s.Version, ok, want)
		}
	}
	// The header the walk read gives its id; one taken from the cache
	// does not (nothing was read).
	if id := got["--p--/b.jsonl"].HeaderID; id == "" || !strings.Contains(header, `"id":"`+id+`"`) {
		t.Errorf("the sniffed session's header id %q", id)
	}
	if id := got["--p--/a.jsonl"].HeaderID; id != "" {
		t.Errorf("the cached session's header id %q, want none", id)
	}
	if s := got["--p--/c.jsonl"]; s.Refusal == nil || s.Refusal.Class != readers.ClassSymlink {
		t.Errorf("the symlinked session: %+v", s.Refusal)
	}
	if _, ok := skippedByBase(trees[0])["notes.jsonl"]; !ok {
		t.Error("notes.jsonl not skipped")
	}
	if h.asked.Load() != 3 { // a, b and notes; never the symlink
		t.Errorf("the cache was asked %d times, want 3", h.asked.Load())
	}
}

// cancelOnFirst is a header cache that cancels the walk's context the
// first time it is asked, and counts the headers asked for after that.
type cancelOnFirst struct {
	cancel context.CancelFunc
	asked  atomic.Int64
}

func (c *cancelOnFirst) Header(rel string, key FileKey) (int, bool) {
	if c.asked.Add(1) == 1 {
		c.cancel()
	}
	return 0, false
}

// TestWalkContextStops (issue 34 §4): a walk whose context is done stops
// between directories and between headers and says so (an error wrapping
// context.Canceled), instead of listing and sniffing the rest of a large
// tree after an interrupt.
func TestWalkContextStops(t *testing.T) {
	root := t.TempDir()
	for d := range 20 {
		for s := range 50 {
			write(t, filepath.Join(root, fmt.Sprintf("--p%02d--", d), fmt.Sprintf("s%02d.jsonl", s)), header+entry)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := WalkContext(ctx, []string{root}, Options{}); !errors.Is(err, context.Canceled) {
		t.Errorf("a walk with a done context: %v, want context.Canceled", err)
	}

	// Canceled while the headers are read: the walk stops there.
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	cache := &cancelOnFirst{cancel: cancel}
	_, err := WalkContext(ctx, []string{root}, Options{Headers: func(string) Headers { return cache }})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("a walk canceled while it reads headers: %v, want context.Canceled", err)
	}
	if n := cache.asked.Load(); n > sniffers+1 {
		t.Errorf("%d headers read after the cancel, want at most one per sniffer", n-1)
	}

	// Not canceled: the same walk as Walk.
	trees, err := WalkContext(context.Background(), []string{root}, Options{})
	if err != nil || len(trees) != 1 || len(trees[0].Sessions) != 1000 {
		t.Fatalf("WalkContext: %v, %d trees", err, len(trees))
	}
}

// TestWalkRefusesANonUUIDSessionID (issue 34 §3): a version-3 session whose
// header id is not a UUID is refused by discovery at its header, as the
// reference refuses to write its manifest (FORMAT.md §5), so that migrate,
// fsck and status give it the same verdict; a legacy header keeps its own
// (upgrade first).
func TestWalkRefusesANonUUIDSessionID(t *testing.T) {
	root := t.TempDir()
	custom := strings.Replace(header, "3f2b8c1e-9a4d-4e6f-8b2a-1c5d7e9f0a1b", "my-custom-session-id", 1)
	write(t, filepath.Join(root, "--p--", "custom.jsonl"), custom+entry)
	write(t, filepath.Join(root, "--p--", "legacy.jsonl"), strings.Replace(custom, `"version":3`, `"version":2`, 1)+entry)
	write(t, filepath.Join(root, "--p--", "uuid.jsonl"), header+entry)
	got := sessionsByRel(walkOne(t, root))
	r := got[filepath.Join("--p--", "custom.jsonl")].Refusal
	if r == nil || r.Class != readers.ClassBadSessionID || r.Line != 1 || !strings.Contains(r.Reason, "my-custom-session-id") {
		t.Errorf("custom id: refusal %+v, want bad_session_id at line 1", r)
	}
	for _, name := range []string{"legacy.jsonl", "uuid.jsonl"} {
		if r := got[filepath.Join("--p--", name)].Refusal; r != nil {
			t.Errorf("%s: refused by discovery: %+v", name, r)
		}
	}
}
