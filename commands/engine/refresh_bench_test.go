package engine

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"pisess/fixtures"
)

// BenchmarkIncrementalRefresh measures the refresh of a ~100 MB session
// (scripts/gentree) that gained one entry, beside the full migration of
// the same session: reported as ms per refresh and as the ratio of the two
// (the target is at most 0.05). Set PISESS_BENCH_MB for another size.
func BenchmarkIncrementalRefresh(b *testing.B) {
	tree, path := benchSession(b)
	opt := migOptions(tree)
	t0 := time.Now()
	rep := migRun(b, opt)
	full := time.Since(t0)
	if r := migResult(b, rep, path); r.Outcome != OutcomeDone {
		b.Fatalf("first migration: %s %v", r.Outcome, r.Error)
	}
	parent := lastID(b, path)
	b.ResetTimer()
	var inc time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		id := fmt.Sprintf("bb%06x", i)
		appendLine(b, path, migEntryLine(id, parent, "one more"))
		parent = id
		fixtures.MarkDirty(b, discoverSidecar(path))
		b.StartTimer()
		t0 := time.Now()
		rep := migRun(b, opt)
		inc += time.Since(t0)
		if r := migResult(b, rep, path); r.Outcome != OutcomeDone || !r.Incremental {
			b.Fatalf("refresh %d: %s incremental %v %v", i, r.Outcome, r.Incremental, r.Error)
		}
	}
	b.ReportMetric(float64(full.Milliseconds()), "ms-full-migrate")
	b.ReportMetric(float64(inc.Microseconds())/1000/float64(b.N), "ms-refresh")
	b.ReportMetric(float64(inc)/float64(b.N)/float64(full), "x-full-migrate")
}

// benchSession writes a tree of one session of ~100 MB (PISESS_BENCH_MB)
// with scripts/gentree and returns the tree and the session.
func benchSession(b *testing.B) (tree, path string) {
	b.Helper()
	mb := "100"
	if v := os.Getenv("PISESS_BENCH_MB"); v != "" {
		mb = v
	}
	tree = filepath.Join(b.TempDir(), "tree")
	cmd := exec.Command("go", "run", "./scripts/gentree", "-out", tree, "-sessions", "1", "-mb", mb, "-seed", "7")
	cmd.Dir = fixtures.RepoRoot(b)
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("gentree: %v\n%s", err, out)
	}
	sessions, _ := filepath.Glob(filepath.Join(tree, "*", "*.jsonl"))
	if len(sessions) != 1 {
		b.Fatalf("gentree wrote %d sessions", len(sessions))
	}
	return tree, sessions[0]
}

// lastID returns the id of the session's last entry.
func lastID(tb testing.TB, path string) string {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	var e struct{ ID string }
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &e); err != nil || e.ID == "" {
		tb.Fatalf("no id in the last line of %s: %v", path, err)
	}
	return e.ID
}

// BenchmarkRefreshPaths measures what each way of refreshing one ~100 MB
// session (PISESS_BENCH_MB) costs, the session gaining one entry before
// each refresh, the cases taking turns (each round in another order): as
// ms per refresh and as a ratio of a full rebuild (the refresh record
// removed first). The cases are those a refresh meets: the steady cron
// refresh of a session the TypeScript pi appended to (the sidecar left as
// it was: its frames vouched for by the fresh cache), one the Rust pi
// marked dirty (a change the cache sees: the frames CRC-checked), a branch
// from the first entry (the frames read for their links), and
// --keep-displaced.
func BenchmarkRefreshPaths(b *testing.B) {
	tree, path := benchSession(b)
	if r := migResult(b, migRun(b, migOptions(tree)), path); r.Outcome != OutcomeDone {
		b.Fatalf("first migration: %s %v", r.Outcome, r.Error)
	}
	first := entryIDs(b, path)[0]
	parent := lastID(b, path)
	pisess := filepath.Join(tree, ".pisess")
	cases := []struct {
		name    string
		prepare func(o *MigrateOptions)
		dirty   bool // the sidecar is marked dirty
		branch  bool // the new entry is a child of the first
	}{
		{"full", func(*MigrateOptions) { os.Remove(filepath.Join(pisess, "refresh.json")) }, true, false},
		{"steady", nil, false, false},
		{"dirty", nil, true, false},
		{"branch", nil, false, true},
		{"keep-displaced", func(o *MigrateOptions) { o.KeepDisplaced = true }, true, false},
	}
	took := make([]time.Duration, len(cases))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j := range cases {
			k := (i + j) % len(cases)
			c := cases[k]
			b.StopTimer()
			// The quarantine of --keep-displaced grows by a sidecar a run.
			os.RemoveAll(filepath.Join(pisess, "quarantine"))
			id := fmt.Sprintf("b%d%05x", k, i)
			p := parent
			if c.branch {
				p = first
			}
			appendLine(b, path, migEntryLine(id, p, "one more"))
			parent = id
			if c.dirty {
				fixtures.MarkDirty(b, discoverSidecar(path))
			}
			o := migOptions(tree)
			if c.prepare != nil {
				c.prepare(&o)
			}
			b.StartTimer()
			t0 := time.Now()
			rep := migRun(b, o)
			took[k] += time.Since(t0)
			if r := migResult(b, rep, path); r.Outcome != OutcomeDone {
				b.Fatalf("%s %d: %s %v", c.name, i, r.Outcome, r.Error)
			} else if i == 0 {
				b.Logf("%s: incremental %v %v", c.name, r.Incremental, r.Notes)
			}
		}
	}
	for k, c := range cases {
		b.ReportMetric(float64(took[k].Microseconds())/1000/float64(b.N), "ms-"+c.name)
		b.ReportMetric(float64(took[k])/float64(took[0]), "x-full-"+c.name)
	}
}
