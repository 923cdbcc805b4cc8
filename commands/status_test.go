package commands

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"pisess/verify"
	"pisess/writers/store"
)

var update = flag.Bool("update", false, "rewrite the golden files of package commands (testdata/*.golden)")

// classTree builds a tree with one session of each of the reference's five
// status classes (FORMAT.md §9), made the way each arises:
//
//	migrated.jsonl    migrated by pisess migrate, untouched since;
//	stale.jsonl       migrated, then appended to, as pi appends (the
//	                  fingerprint no longer matches);
//	corrupt.jsonl     migrated, then a segment chmod-ed 0644 (pi refuses a
//	                  group or other bit: the reference's preflight fails);
//	partial.jsonl     migrated, then its index removed while the source has
//	                  entries (a sidecar left half-written);
//	unmigrated.jsonl  never migrated.
func classTree(t *testing.T) (root string, want map[string]verify.Class) {
	t.Helper()
	root = t.TempDir()
	dir := filepath.Join(root, "--home-u-proj--")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(exampleSession)
	if err != nil {
		t.Fatal(err)
	}
	want = map[string]verify.Class{
		"migrated": verify.ClassMigrated, "stale": verify.ClassStale, "corrupt": verify.ClassCorrupt,
		"partial": verify.ClassPartial, "unmigrated": verify.ClassUnmigrated,
	}
	for name := range want {
		if name == "unmigrated" {
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, name+".jsonl"), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if r := pisess(t, "migrate", "--json", "--correlation-id", "fixture-migration", root); r.code != ExitClean {
		t.Fatalf("migrate: %s", r)
	}
	appendFile(t, filepath.Join(dir, "stale.jsonl"), appendedEntry)
	if err := os.Chmod(store.SegmentPath(filepath.Join(dir, "corrupt.v2"), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(store.IndexPath(filepath.Join(dir, "partial.v2"))); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "unmigrated.jsonl"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	return root, want
}

// TestStatusClasses: status (fast), fsck (full) and verify.Status agree
// with the reference's class of each session.
func TestStatusClasses(t *testing.T) {
	root, want := classTree(t)
	r := pisess(t, "status", "--json", root)
	if r.code != ExitClean {
		t.Fatalf("status: %s", r)
	}
	var rep statusReport
	if err := json.Unmarshal(detail(t, r.stdout), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Sessions) != len(want) {
		t.Fatalf("status lists %d sessions, want %d", len(rep.Sessions), len(want))
	}
	for _, s := range rep.Sessions {
		name := strings.TrimSuffix(filepath.Base(s.Path), ".jsonl")
		if s.Class != want[name] {
			t.Errorf("status: %s is %s, want %s (%s)", name, s.Class, want[name], s.Reason)
		}
		full, err := verify.Status(s.Path)
		if err != nil {
			t.Fatal(err)
		}
		if full.Class != want[name] {
			t.Errorf("verify.Status: %s is %s, want %s", name, full.Class, want[name])
		}
		if s.Name == nil || *s.Name != map[bool]string{true: "Renamed", false: "Refactor auth"}[name == "stale"] {
			t.Errorf("%s: name %v", name, s.Name)
		}
		if wantRun := map[bool]string{true: "", false: "fixture-migration"}[name == "unmigrated"]; s.LastMigration != wantRun {
			t.Errorf("%s: last migration %q, want %q", name, s.LastMigration, wantRun)
		}
	}
	for c, n := range map[verify.Class]int{verify.ClassMigrated: 1, verify.ClassStale: 1, verify.ClassCorrupt: 1,
		verify.ClassPartial: 1, verify.ClassUnmigrated: 1} {
		if rep.Totals[c] != n {
			t.Errorf("totals[%s] = %d, want %d", c, rep.Totals[c], n)
		}
	}

	code, frep, fr := fsckJSON(t, root)
	if code != ExitProblems {
		t.Fatalf("fsck: %s", fr)
	}
	for _, s := range frep.Trees[0].Sessions {
		name := strings.TrimSuffix(filepath.Base(s.Path), ".jsonl")
		if s.Class != want[name] {
			t.Errorf("fsck: %s is %s, want %s", name, s.Class, want[name])
		}
	}
}

// TestStatusGolden pins the text output of pisess status (go test
// ./commands -run TestStatusGolden -update rewrites it).
func TestStatusGolden(t *testing.T) {
	root, _ := classTree(t)
	r := pisess(t, "status", root)
	if r.code != ExitClean {
		t.Fatalf("status: %s", r)
	}
	j := pisess(t, "status", "--json", root)
	var rep statusReport
	if err := json.Unmarshal(detail(t, j.stdout), &rep); err != nil {
		t.Fatal(err)
	}
	var direct strings.Builder
	renderStatus(&direct, rep, view{})
	if direct.String() != r.stdout {
		t.Fatalf("the text output is not the rendering of the --json report:\n%s\n---\n%s", r.stdout, direct.String())
	}
	// The temporary tree's path varies in length, and so would the
	// columns: render with the tree named $TREE.
	rep.Trees = nil // sizes and times of this run's journal
	for i := range rep.Sessions {
		rep.Sessions[i].Tree = "$TREE"
		rep.Sessions[i].Path = strings.Replace(rep.Sessions[i].Path, root, "$TREE", 1)
		rep.Sessions[i].Reason = strings.ReplaceAll(rep.Sessions[i].Reason, root, "$TREE")
	}
	var b strings.Builder
	renderStatus(&b, rep, view{verbose: true})
	got := b.String()
	golden := filepath.Join("testdata", "status.golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got != string(want) {
		gl, wl := strings.Split(got, "\n"), strings.Split(string(want), "\n")
		for i := 0; i < max(len(gl), len(wl)); i++ {
			var g, w string
			if i < len(gl) {
				g = gl[i]
			}
			if i < len(wl) {
				w = wl[i]
			}
			if g != w {
				t.Fatalf("status output differs from %s at line %d:\n got: %q\nwant: %q\n(run with -update if the change is intended)", golden, i+1, g, w)
			}
		}
	}
}

// TestStatusMissingTree: a tree that does not exist is an operational
// error.
func TestStatusMissingTree(t *testing.T) {
	r := pisess(t, "status", "--json", filepath.Join(t.TempDir(), "nope"))
	if r.code != ExitOperational {
		t.Fatalf("status of a missing tree: %s", r)
	}
	checkErrorObject(t, r, ClassOperational)
}

// TestStatusOverview: without -v, status gives one line per project
// directory (counts by class, bytes, oldest stale session), the problems
// only, and each tree's journal, quarantine and last run.
func TestStatusOverview(t *testing.T) {
	root, _ := classTree(t)
	r := pisess(t, "status", root)
	if r.code != ExitClean {
		t.Fatalf("status: %s", r)
	}
	out := r.stdout
	lines := strings.Split(out, "\n")
	if !strings.HasPrefix(lines[0], "PROJECT") || !strings.HasPrefix(lines[1], "--home-u-proj--  5 ") {
		t.Fatalf("no overview per project:\n%s", out)
	}
	if f := strings.Fields(lines[1]); len(f) < 7 || f[2] != "1" || f[3] != "1" || f[4] != "1" || f[5] != "1" || f[6] != "1" {
		t.Errorf("class counts of the project: %v", f)
	}
	if !strings.Contains(lines[1], "stale.jsonl (") {
		t.Errorf("the oldest stale session is not named: %s", lines[1])
	}
	for _, want := range []string{"--home-u-proj--/corrupt.jsonl", "--home-u-proj--/partial.jsonl", "tree " + root + ": journal ", "last run fixture-migration"} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "--home-u-proj--/migrated.jsonl") {
		t.Errorf("a session with nothing to report is listed without -v:\n%s", out)
	}
}
