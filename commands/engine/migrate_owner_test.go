package engine

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"pisess/fixtures"
	"pisess/fixtures/trees"
	"pisess/readers/discover"
)

// nobody is the unprivileged uid and gid a tree is given to.
const nobody = 65534

// TestMigrateOwnership runs migrate as root over a tree that belongs to an
// unprivileged user, under umask 0 and 022: every path pisess creates in
// the tree — sidecars and everything in them, session lock files, .pisess/
// with its lock, journal and quarantine (a refresh puts a displaced store
// there) — must belong to that user, with modes 0700 for directories and
// 0600 for files, whatever the umask; a root-owned store makes pi's open
// fail outright (FORMAT.md §1). Every installed store passes the §11
// acceptance check with that owner.
func TestMigrateOwnership(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the test gives a tree to another user and migrates it as root")
	}
	for _, mask := range []int{0, 0o022} {
		t.Run("umask "+octal(mask), func(t *testing.T) {
			old := syscall.Umask(mask)
			defer syscall.Umask(old)

			dir, vs := migVectorsTree(t, trees.Only(trees.Vectors(t, trees.Accept, trees.Reject), "accept/tricky", "accept/header_only", "reject/reject_custom_message"))
			a, lastA := migSession(t, dir, "alpha", 4)
			b, _ := migSession(t, dir, "beta", 2)
			if err := os.Chmod(dir, 0o700); err != nil { // t.TempDir's mode follows the umask
				t.Fatal(err)
			}
			trees.Chown(t, dir, nobody, nobody)
			if bad := trees.Owned(t, dir, nobody, nobody, nil); len(bad) > 0 {
				t.Fatalf("the tree is not ready: %v", bad)
			}

			rep := migRun(t, migOptions(dir))
			for _, p := range []string{vs[0].Path, vs[1].Path, a, b} {
				s := migResult(t, rep, p)
				if s.Outcome != OutcomeDone {
					t.Fatalf("%s: %s/%s %+v", p, s.Action, s.Outcome, s.Error)
				}
				migCheckInstalled(t, p, rep.CorrelationID, nobody, nobody)
			}
			if s := migResult(t, rep, vs[2].Path); s.Outcome != OutcomeRefused {
				t.Errorf("%s: %s", vs[2].Name, s.Outcome)
			}
			// pi appends to alpha and marks the sidecar of beta dirty:
			// the refresh displaces both old stores into the quarantine.
			migAppend(t, a, migEntryLine("f0000001", lastA, "more"))
			fixtures.MarkDirty(t, discover.SidecarPath(b))
			keep := migOptions(dir)
			keep.KeepDisplaced = true // counted below, as a refresh keeps them with --keep-displaced
			again := migRun(t, keep)
			for _, p := range []string{a, b} {
				s := migResult(t, again, p)
				if s.Outcome != OutcomeDone || s.Action != PlanRefresh || s.Displaced == "" {
					t.Fatalf("%s: %s/%s displaced %q %+v", p, s.Action, s.Outcome, s.Displaced, s.Error)
				}
				migCheckInstalled(t, p, again.CorrelationID, nobody, nobody)
			}

			created := 0
			for rel := range fixtures.TreeDigest(t, dir) {
				if strings.HasPrefix(rel, discover.PisessDir) || strings.Contains(rel, ".v2") || strings.HasSuffix(rel, ".lock") {
					created++
				}
			}
			for _, want := range []string{".pisess/lock", ".pisess/journal.jsonl", ".pisess/quarantine"} {
				if _, err := os.Lstat(filepath.Join(dir, want)); err != nil {
					t.Errorf("%s: %v", want, err)
				}
			}
			if created < 20 {
				t.Fatalf("only %d paths created: the test proves little", created)
			}
			if bad := trees.Owned(t, dir, nobody, nobody, nil); len(bad) > 0 {
				t.Errorf("paths not owned by %d:%d with private modes:\n%s", nobody, nobody, strings.Join(bad, "\n"))
			}

			// pi appends again (a segment small enough to roll over):
			// the refresh continues the sidecar in place, and what it
			// creates there (a segment, the manifest and ledger through
			// tmp/) is the session owner's too.
			migAppend(t, a, migEntryLine("f0000002", "f0000001", strings.Repeat("more ", 300))+
				migEntryLine("f0000003", "f0000002", strings.Repeat("more ", 300)))
			inPlace := migOptions(dir)
			inPlace.MaxSegmentBytes = 4096
			third := migRun(t, inPlace)
			incRefreshedInPlace(t, third, []string{a})
			if segs, _ := os.ReadDir(filepath.Join(discover.SidecarPath(a), "segments")); len(segs) < 2 {
				t.Fatalf("%d segments: the refresh in place did not roll over", len(segs))
			}
			migCheckInstalled(t, a, third.CorrelationID, nobody, nobody)
			if bad := trees.Owned(t, dir, nobody, nobody, nil); len(bad) > 0 {
				t.Errorf("after the refresh in place, paths not owned by %d:%d with private modes:\n%s", nobody, nobody, strings.Join(bad, "\n"))
			}
		})
	}
}

func octal(n int) string {
	const digits = "01234567"
	s := ""
	for i := 0; i < 3; i++ {
		s = string(digits[n%8]) + s
		n /= 8
	}
	return s
}
