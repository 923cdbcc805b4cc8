package engine

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"pisess/fixtures"
	"pisess/fixtures/trees"
	"pisess/readers"
	"pisess/readers/discover"
)

// TestMigrateSymlinkedSession: a session file that is a symlink is refused
// (pi would lock and migrate its target; pisess follows no symlink), and
// nothing is written beside the link or beside its target, which lies
// outside the tree; a real session next to it migrates.
func TestMigrateSymlinkedSession(t *testing.T) {
	base := t.TempDir()
	outside := filepath.Join(base, "outside")
	dir := filepath.Join(base, "tree")
	for _, d := range []string{outside, dir} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	target, _ := migSession(t, outside, "target", 3)
	real, _ := migSession(t, dir, "real", 2)
	link := filepath.Join(dir, trees.CwdDir, "link.jsonl")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	outsideBefore := fixtures.TreeDigest(t, outside)

	rep := migRun(t, migOptions(dir))
	s := migResult(t, rep, link)
	if s.Outcome != OutcomeRefused || s.Error == nil || s.Error.Class != string(readers.ClassSymlink) || !strings.Contains(s.Reason, "symlink") {
		t.Errorf("symlinked session: %s/%s %q %+v", s.Action, s.Outcome, s.Reason, s.Error)
	}
	for _, p := range []string{discover.SidecarPath(link), link + ".lock"} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s was created for a refused symlink", p)
		}
	}
	if d := migDigestDiff(outsideBefore, fixtures.TreeDigest(t, outside), nil); len(d) > 0 {
		t.Errorf("migrate wrote outside the tree: %v", d)
	}
	if r := migResult(t, rep, real); r.Outcome != OutcomeDone {
		t.Errorf("real session: %s/%s %+v", r.Action, r.Outcome, r.Error)
	}
	// Given as a PATH itself, it is refused the same way.
	rep = migRun(t, migOptions(link))
	if len(rep.Sessions) != 1 || rep.Sessions[0].Outcome != OutcomeRefused {
		t.Errorf("the link as PATH: %+v", rep.Sessions)
	}
	if d := migDigestDiff(outsideBefore, fixtures.TreeDigest(t, outside), nil); len(d) > 0 {
		t.Errorf("migrate wrote outside the tree: %v", d)
	}
}

// TestMigrateSymlinkedTree: a tree reached through a symlinked directory —
// the tree itself, or a directory above it — can never hold a sidecar pi
// would open (it opens every path with no symlink in any component). Every
// session is refused with that reason and nothing at all is written in the
// real tree: no sidecar, no lock file, no .pisess/.
func TestMigrateSymlinkedTree(t *testing.T) {
	base := t.TempDir()
	realRoot := filepath.Join(base, "real")
	if err := os.MkdirAll(filepath.Join(realRoot, "sessions"), 0o700); err != nil {
		t.Fatal(err)
	}
	tree := filepath.Join(realRoot, "sessions")
	trees.Copy(t, tree, trees.Only(trees.Vectors(t, trees.Accept), "accept/tricky", "accept/header_only"))
	migSession(t, tree, "own", 2)
	linkedRoot := filepath.Join(base, "linked-root")
	if err := os.Symlink(realRoot, linkedRoot); err != nil {
		t.Fatal(err)
	}
	linkedTree := filepath.Join(base, "linked-tree")
	if err := os.Symlink(tree, linkedTree); err != nil {
		t.Fatal(err)
	}
	before := fixtures.TreeDigest(t, realRoot)

	for _, path := range []string{linkedTree, filepath.Join(linkedRoot, "sessions"),
		filepath.Join(linkedRoot, "sessions", trees.CwdDir, "own.jsonl")} {
		rep := migRun(t, migOptions(path))
		if len(rep.Sessions) == 0 {
			t.Errorf("%s: no session found", path)
		}
		for _, s := range rep.Sessions {
			if s.Outcome != OutcomeRefused || s.Error == nil || s.Error.Class != string(discover.ClassSymlinkAncestor) ||
				!strings.Contains(s.Reason, discover.ReasonSymlinkAncestor) {
				t.Errorf("%s: %s/%s %q %+v", s.Path, s.Action, s.Outcome, s.Reason, s.Error)
			}
		}
		if d := migDigestDiff(before, fixtures.TreeDigest(t, realRoot), nil); len(d) > 0 {
			t.Fatalf("migrate %s wrote %v", path, d)
		}
	}
	// A symlinked directory inside a tree is not entered.
	dir := t.TempDir()
	migSession(t, dir, "inside", 2)
	if err := os.Symlink(tree, filepath.Join(dir, "elsewhere")); err != nil {
		t.Fatal(err)
	}
	rep := migRun(t, migOptions(dir))
	if len(rep.Sessions) != 1 || rep.Sessions[0].Outcome != OutcomeDone {
		t.Errorf("sessions %+v", rep.Sessions)
	}
	if d := migDigestDiff(before, fixtures.TreeDigest(t, realRoot), nil); len(d) > 0 {
		t.Fatalf("migrate followed a symlinked directory and wrote %v", d)
	}
}
