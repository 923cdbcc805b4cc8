package commands

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"pisess/fixtures"
)

// exampleTree copies the bundled example tree (three sessions the
// reference migrates, one it refuses) into a fresh directory with pi's
// modes and returns its root.
func exampleTree(tb testing.TB) string {
	tb.Helper()
	root := filepath.Join(tb.TempDir(), "sessions")
	fixtures.CopyTree(tb, "../fixtures/example/sessions", root)
	fixtures.PrivateModes(tb, root)
	return root
}

// TestTextReportsAreTreeRelative: every path a text report prints is
// relative to its tree — session columns, REASON, findings and their
// details, errors, rollback's account — but the tree's own header and the
// commands to run; --json keeps the exact paths.
func TestTextReportsAreTreeRelative(t *testing.T) {
	root := exampleTree(t)
	t.Setenv(EnvClock, fixedClock)
	if r := pisess(t, "migrate", "--correlation-id", "relative-run-01", root); r.code != ExitClean {
		t.Fatalf("migrate: %s", r)
	}
	sidecar := strings.TrimSuffix(filepath.Join(root, exampleSessionRel), ".jsonl") + ".v2"
	fixtures.FlipByte(t, filepath.Join(sidecar, "segments", "0000000000000001.seg"), 200)
	if err := os.Chmod(filepath.Join(sidecar, "manifest.json"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(root, "--home-u-proj--", "gone.v2.staging.0123"), 0o700); err != nil {
		t.Fatal(err)
	}
	appendFile(t, filepath.Join(root, ".pisess", "journal.jsonl"), "{torn\n")
	runs := []struct {
		args []string
		code int
		want string // a relative path the report must show
	}{
		{[]string{"migrate", "-n", "-v", root}, ExitProblems, "line 16: unknown_entry_type"},
		{[]string{"status", "-v", root}, ExitClean, exampleSessionRel + ": corrupt: "},
		{[]string{"verify", root}, ExitProblems, "[index.crc] " + strings.TrimSuffix(exampleSessionRel, ".jsonl") + ".v2/segments/"},
		{[]string{"fsck", root}, ExitProblems, "problem [tree.journal-line] .pisess/journal.jsonl (line "},
		{[]string{"rollback", "--tree", root, "relative-run-01"}, ExitClean, "to .pisess/quarantine/relative-run-01/"},
		{[]string{"runs", root}, ExitClean, "relative-run-01"},
		{[]string{"fsck", "--repair", root}, ExitRepaired, "repaired [tree.orphan] --home-u-proj--/gone.v2.staging.0123: "},
	}
	for _, run := range runs {
		r := pisess(t, run.args...)
		if r.code != run.code {
			t.Fatalf("%v: exit %d, want %d: %s", run.args, r.code, run.code, r)
		}
		if !strings.Contains(r.stdout, run.want) {
			t.Errorf("%v: the report lacks %q:\n%s", run.args, run.want, r.stdout)
		}
		for _, l := range strings.Split(r.stdout, "\n") {
			if !strings.Contains(l, root) {
				continue
			}
			// The tree is named once, and so is every command to run.
			if strings.HasPrefix(l, "tree "+root+":") || strings.Contains(l, "pisess ") {
				continue
			}
			t.Errorf("%v: an absolute path in a text report: %q", run.args, l)
		}
	}
	// --json keeps the exact paths.
	r := pisess(t, "fsck", "--json", root)
	if !strings.Contains(r.stdout, `"path":"`+filepath.Join(root, exampleSessionRel)) {
		t.Errorf("fsck --json lost the absolute path:\n%s", r.stdout)
	}
}

// exampleSessionRel is exampleSession's path in the example tree.
var exampleSessionRel = strings.TrimPrefix(exampleSession, "../fixtures/example/sessions/")

// TestDryRunShowsItsPlan: migrate --dry-run prints what a run would
// change, one line a session, before the notices; -q keeps only what needs
// action.
func TestDryRunShowsItsPlan(t *testing.T) {
	root := exampleTree(t)
	r := pisess(t, "migrate", "--dry-run", root)
	if r.code != ExitClean {
		t.Fatalf("migrate --dry-run: %s", r)
	}
	lines := strings.Split(r.stdout, "\n")
	var plan []string
	notice := -1
	for i, l := range lines {
		if strings.HasPrefix(l, "would ") {
			if notice >= 0 {
				t.Errorf("a plan line after the notices: %q", l)
			}
			plan = append(plan, l)
		}
		if strings.HasPrefix(l, "notice ") && notice < 0 {
			notice = i
		}
	}
	if len(plan) != 3 || notice < 0 {
		t.Fatalf("want 3 plan lines, then the refused session's notice:\n%s", r.stdout)
	}
	for _, l := range plan {
		if !strings.HasPrefix(l, "would migrate  --home-") || !strings.Contains(l, " entries") {
			t.Errorf("plan line %q", l)
		}
	}
	if !strings.Contains(strings.Join(plan, "\n"), exampleSessionRel) {
		t.Errorf("the plan lacks %s:\n%s", exampleSessionRel, r.stdout)
	}
	if _, err := os.Lstat(filepath.Join(root, ".pisess")); err == nil {
		t.Fatal("the dry run wrote in the tree")
	}

	// After a run, a session pi wrote since is the one a run would refresh.
	if r := pisess(t, "migrate", root); r.code != ExitClean {
		t.Fatalf("migrate: %s", r)
	}
	fixtures.MarkDirty(t, strings.TrimSuffix(filepath.Join(root, exampleSessionRel), ".jsonl")+".v2")
	r = pisess(t, "migrate", "-n", root)
	var again []string
	for _, l := range strings.Split(r.stdout, "\n") {
		if strings.HasPrefix(l, "would ") {
			again = append(again, l)
		}
	}
	if r.code != ExitClean || len(again) != 1 || !strings.HasPrefix(again[0], "would refresh  "+exampleSessionRel) {
		t.Errorf("want one plan line, the refresh of %s: %s", exampleSessionRel, r)
	}
	if q := pisess(t, "migrate", "-n", "-q", root); q.code != ExitClean || q.stdout != "" {
		t.Errorf("-q: a dry run with nothing to act on prints nothing: %s", q)
	}
}

func TestRelText(t *testing.T) {
	trees := []string{"/t/a", "/t/a/nested", "/"}
	for in, want := range map[string]string{
		"moved /t/a/p/s.v2 to /t/a/.pisess/quarantine/x": "moved p/s.v2 to .pisess/quarantine/x",
		"/t/ab/s.jsonl is not inside":                    "/t/ab/s.jsonl is not inside",
		"/t/a/nested/s.jsonl":                            "s.jsonl",
		"tree /t/a: fine":                                "tree /t/a: fine",
		"/etc/passwd":                                    "/etc/passwd",
	} {
		if got := relText(trees, in); got != want {
			t.Errorf("relText(%q) = %q, want %q", in, got, want)
		}
	}
}
