package commands

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"pisess/fixtures"
	"pisess/fixtures/pi"
	"pisess/fixtures/trees"
	"pisess/ledger"
	"pisess/readers/discover"
)

// cronLine is the README's cron line, read from the README itself so that
// the test runs it exactly as printed (only the default log, log, is moved
// into the test's directory).
func cronLine(t *testing.T, log string) []string {
	t.Helper()
	return readmeCronLine(t, "*/15 * * * * /usr/local/bin/pisess ", log)
}

// pruneLine is the README's weekly prune line, as cronLine.
func pruneLine(t *testing.T, log string) []string {
	t.Helper()
	return readmeCronLine(t, "30 4 * * 0 /usr/local/bin/pisess ", log)
}

func readmeCronLine(t *testing.T, prefix, log string) []string {
	t.Helper()
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(log) != defaultLogName {
		t.Fatalf("the cron lines log to the default log, %s, not %s", defaultLogName, log)
	}
	t.Setenv(EnvLogDir, filepath.Dir(log))
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, prefix) {
			return strings.Fields(strings.TrimPrefix(line, prefix))
		}
	}
	t.Fatalf("the README has no cron line %q", prefix)
	return nil
}

// cronExit: sessions the reference refuses are notices, so a healthy tree
// exits 0 on every run, refused sessions and all.
const cronExit = ExitClean

// TestCronEndToEnd (issue 12): the README's cron line over a tree of real pi
// sessions, accepted and refused (the real pi's corpus and the realpi
// vectors), while pi keeps appending between runs: every run exits the
// same; a run with nothing to do prints nothing on stdout, appends nothing
// to the journal and changes nothing in the tree; the log holds JSON
// records; the quarantine stays empty however many refresh cycles run;
// `runs` lists the runs that did something, and `prune` removes what it
// says and nothing inside its window.
func TestCronEndToEnd(t *testing.T) {
	pi.Require(t)
	base := t.TempDir()
	tree := filepath.Join(base, "sessions")
	if err := os.MkdirAll(tree, 0o700); err != nil {
		t.Fatal(err)
	}
	scenarios := pi.Generate(t, tree)
	trees.Copy(t, tree, trees.Vectors(t, trees.RealPi))
	logFile := filepath.Join(base, "log", "pisess.log")
	if err := os.MkdirAll(filepath.Dir(logFile), 0o700); err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvSessionsDir, tree)
	t.Setenv(EnvAgentDir, "")
	os.Unsetenv(EnvClock)
	var chat string
	for _, sc := range scenarios {
		if sc.Scenario == "plain-chat" {
			chat = sc.Path
		}
	}
	if chat == "" {
		t.Fatal("the corpus has no plain-chat session")
	}

	cron := func(what string) result {
		t.Helper()
		r := pisess(t, cronLine(t, logFile)...)
		if r.code != cronExit {
			t.Fatalf("%s: exit %d, want %d: %s", what, r.code, cronExit, r)
		}
		if r.stdout != "" || r.stderr != "" {
			t.Fatalf("%s printed something (cron would mail it): %s", what, r)
		}
		return r
	}
	journalSize := func() int64 {
		fi, err := os.Stat(ledger.JournalPath(tree))
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	quarantine := func() (files int) {
		_ = filepath.WalkDir(filepath.Join(tree, ledger.PisessDir, ledger.QuarantineDir), func(_ string, d fs.DirEntry, err error) error {
			if err == nil && d.Type().IsRegular() {
				files++
			}
			return nil
		})
		return files
	}
	noop := func(what string) {
		t.Helper()
		before, size := fixtures.TreeDigest(t, tree), journalSize()
		cron(what)
		if got := journalSize(); got != size {
			t.Fatalf("%s: the journal grew from %d to %d bytes", what, size, got)
		}
		if d := fixtures.DigestDiff(before, fixtures.TreeDigest(t, tree)); len(d) != 0 {
			t.Fatalf("%s changed or created %v", what, d)
		}
	}

	cron("first run")
	if _, err := os.Stat(filepath.Join(tree, discover.PisessDir, ledger.RefusalCacheName)); err != nil {
		t.Fatalf("the refused sessions are not remembered: %v", err)
	}
	noop("the no-op run after the first")
	const cycles = 6
	for i := 0; i < cycles; i++ {
		if res := pi.Append(t, chat, "cron cycle"); !res.Written {
			t.Fatalf("pi did not append: %+v", res)
		}
		cron("the refresh run")
		if n := quarantine(); n != 0 {
			t.Fatalf("after refresh %d the quarantine holds %d files", i+1, n)
		}
		noop("the no-op run after a refresh")
	}
	log, err := os.ReadFile(logFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(log)), "\n") {
		if line == "" {
			continue
		}
		var obj map[string]any
		if err := json.Unmarshal([]byte(line), &obj); err != nil {
			t.Fatalf("a log line is not a JSON object: %q", line)
		}
	}

	// runs: the first run and one per refresh; the no-op runs left no trace.
	rr := pisess(t, "runs", "--json")
	var runs runsReport
	if rr.code != ExitClean || json.Unmarshal(detail(t, rr.stdout), &runs) != nil || len(runs.Trees) != 1 {
		t.Fatalf("runs: %s", rr)
	}
	list := runs.Trees[0].Runs
	if len(list) != 1+cycles {
		t.Fatalf("runs lists %d runs, want %d: %+v", len(list), 1+cycles, list)
	}
	for i, r := range list {
		if r.Command != "migrate" || r.Completed == 0 || r.RolledBack || r.QuarantineBytes != 0 {
			t.Errorf("run %d: %+v", i, r)
		}
		if i > 0 && (r.Completed != 1 || r.Discarded != 1) {
			t.Errorf("refresh run %d: %+v", i, r)
		}
	}

	// prune: with a window holding every run nothing goes; a day later, a
	// dry run lists all and removes nothing, a real one removes all; cron
	// goes on as a no-op.
	var inside pruneReport
	if p := pisess(t, "prune", "--json", "--keep-within", "1h"); p.code != ExitClean || json.Unmarshal(detail(t, p.stdout), &inside) != nil ||
		len(inside.Trees[0].Runs) != 0 || inside.Trees[0].KeptRuns != 1+cycles {
		t.Fatalf("prune inside the window: %s", p)
	}
	t.Setenv(EnvClock, time.Now().Add(48*time.Hour).UTC().Format(time.RFC3339))
	before := fixtures.TreeDigest(t, tree)
	dry := pisess(t, "prune", "--json", "--dry-run", "--keep-within", "24h")
	var pr pruneReport
	if dry.code != ExitClean || json.Unmarshal(detail(t, dry.stdout), &pr) != nil || len(pr.Trees[0].Runs) != 1+cycles {
		t.Fatalf("prune --dry-run: %s", dry)
	}
	if d := fixtures.DigestDiff(before, fixtures.TreeDigest(t, tree)); len(d) != 0 {
		t.Fatalf("prune --dry-run changed %v", d)
	}
	// The README's weekly prune line, a month on: silent, and every run
	// goes.
	t.Setenv(EnvClock, time.Now().Add(31*24*time.Hour).UTC().Format(time.RFC3339))
	if p := pisess(t, pruneLine(t, logFile)...); p.code != ExitClean || p.stdout != "" || p.stderr != "" {
		t.Fatalf("the README's prune line: %s", p)
	}
	if size := journalSize(); size != 0 {
		t.Fatalf("the journal holds %d bytes after pruning every run", size)
	}
	var after runsReport
	if rr := pisess(t, "runs", "--json"); json.Unmarshal(detail(t, rr.stdout), &after) != nil || len(after.Trees[0].Runs) != 0 {
		t.Fatalf("runs after prune: %s", rr)
	}
	os.Unsetenv(EnvClock)
	noop("the no-op run after prune")
}
