//go:build failpoints

package commands

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"pisess/fixtures"
	"pisess/ledger"
)

// pruneTemplate is a tree with three runs: two (A, B) ended on day 0, one
// (C) on day 10, B and C keeping their displaced sidecars; plus an old
// orphan quarantine entry. Prune at day 10 + 1h with --keep-within 24h
// removes A, B and the orphan.
func pruneTemplate(t *testing.T) (dir string, cRun string) {
	t.Helper()
	dir = t.TempDir()
	root, session := placeSession(t, exampleSession, "2026-01-05T10-00-00-000Z_3f2b8c1e-9a4d-4e6f-8b2a-1c5d7e9f0a1b.jsonl")
	for i, clock := range []string{"2026-01-01T00:00:00.000Z", "2026-01-01T01:00:00.000Z", "2026-01-11T00:00:00.000Z"} {
		t.Setenv(EnvClock, clock)
		id := fmt.Sprintf("prune-run-%d", i)
		args := []string{"migrate", "--keep-displaced", "--correlation-id", id, root}
		if i > 0 {
			args = append(args[:1], append([]string{"--force"}, args[1:]...)...)
		}
		if r := pisess(t, args...); r.code != ExitClean {
			t.Fatalf("run %d: %s", i, r)
		}
	}
	_ = session
	orphan := filepath.Join(root, ledger.PisessDir, ledger.QuarantineDir, "orphan-entry", "x")
	if err := os.MkdirAll(orphan, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(orphan, "f"), []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	fixtures.CopyTree(t, root, dir)
	return dir, "prune-run-2"
}

// pruneLines returns the journal lines of run id.
func pruneLines(tb testing.TB, tree, id string) []byte {
	tb.Helper()
	b, err := os.ReadFile(ledger.JournalPath(tree))
	if err != nil {
		tb.Fatal(err)
	}
	var out bytes.Buffer
	for _, line := range bytes.SplitAfter(b, []byte("\n")) {
		if bytes.Contains(line, []byte(`"correlationId":"`+id+`"`)) {
			out.Write(line)
		}
	}
	return out.Bytes()
}

// TestCrashPrune kills `pisess prune` at every hit of its failpoints and of
// the durable writes it makes, and after evenly spaced byte counts: after
// each kill the kept run's journal lines and quarantine are intact and the
// journal parses; a second prune converges to the tree an unkilled prune
// leaves.
func TestCrashPrune(t *testing.T) {
	bin, _ := crashSetup(t)
	tmpl, kept := pruneTemplate(t)
	env := []string{EnvClock + "=2026-01-11T01:00:00.000Z"}
	args := func(tree string) []string { return []string{"prune", "--keep-within", "24h", tree} }
	skipLock := func(rel string) bool { return rel == ledger.PisessDir+"/lock" }
	// The orphan's time is the copy's: set it into the past on each copy.
	fresh := func(t *testing.T) string {
		d := filepath.Join(t.TempDir(), "tree")
		fixtures.CopyTree(t, tmpl, d)
		old := time.Date(2025, 12, 1, 0, 0, 0, 0, time.UTC)
		o := filepath.Join(d, ledger.PisessDir, ledger.QuarantineDir, "orphan-entry")
		if err := os.Chtimes(o, old, old); err != nil {
			t.Fatal(err)
		}
		return d
	}

	ref := fresh(t)
	if killed, stdout, stderr := fixtures.RunKilled(t, bin, args(ref), env); killed {
		t.Fatalf("the reference prune was killed: %s %s", stdout, stderr)
	}
	want := fixtures.TreeDigest(t, ref)
	keptLines := pruneLines(t, ref, kept)
	keptQ := fixtures.TreeDigest(t, ledger.Quarantine(ref, kept))
	if len(keptLines) == 0 || len(keptQ) == 0 {
		t.Fatal("the template has no kept run")
	}
	if _, err := os.Lstat(filepath.Join(ref, ledger.PisessDir, ledger.QuarantineDir, "orphan-entry")); !os.IsNotExist(err) {
		t.Fatalf("the reference prune left the orphan (%v)", err)
	}

	var points []crashPoint
	for _, name := range []string{"engine.after-prune-move", "engine.before-prune-rewrite", "engine.after-prune-rewrite",
		"durable.before-sync", "durable.before-rename"} {
		for n := 1; n <= 4; n++ {
			points = append(points, failpointAt(name, n))
		}
	}
	for n := int64(1); n < 4000; n += 397 {
		points = append(points, killAfterBytes(n))
	}
	kills := 0
	hit := map[string]bool{}
	for _, p := range points {
		t.Run(p.name, func(t *testing.T) {
			tree := fresh(t)
			killed, stdout, stderr := fixtures.RunKilled(t, bin, args(tree), append(env, p.env...))
			if !killed {
				return // the point lies past this run's last hit
			}
			kills++
			hit[p.name] = true
			if got := pruneLines(t, tree, kept); !bytes.Equal(got, keptLines) {
				t.Errorf("the kept run's journal lines changed after the kill:\n%s", got)
			}
			if d := fixtures.DigestDiff(keptQ, fixtures.TreeDigest(t, ledger.Quarantine(tree, kept))); len(d) != 0 {
				t.Errorf("the kept run's quarantine changed: %v", d)
			}
			if j, err := ledger.OpenJournal(tree); err != nil {
				t.Fatal(err)
			} else if bad, err := j.BadLines(); err != nil || len(bad) != 0 {
				t.Errorf("the journal does not parse after the kill: %+v %v", bad, err)
			}
			if killed, o, e := fixtures.RunKilled(t, bin, args(tree), env); killed {
				t.Fatalf("the re-run was killed: %s %s", o, e)
			}
			if d := migDiffSkipping(want, fixtures.TreeDigest(t, tree), skipLock); len(d) != 0 {
				t.Errorf("the re-run did not converge to the unkilled prune: %v\n%s%s", d, stdout, stderr)
			}
		})
	}
	t.Logf("prune: %d kill points", kills)
	for _, name := range []string{"engine.after-prune-move@1", "engine.after-prune-move@2", "engine.before-prune-rewrite@1", "engine.after-prune-rewrite@1"} {
		if !hit[name] {
			t.Errorf("%s never killed: the scenario no longer exercises it", name)
		}
	}
	if kills < 10 {
		t.Errorf("only %d kill points reached", kills)
	}
}

func migDiffSkipping(a, b map[string]string, skip func(string) bool) []string {
	var out []string
	for _, k := range fixtures.DigestDiff(a, b) {
		if !skip(k) {
			out = append(out, k)
		}
	}
	return out
}
