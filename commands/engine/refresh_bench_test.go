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
	mb := "100"
	if v := os.Getenv("PISESS_BENCH_MB"); v != "" {
		mb = v
	}
	tree := filepath.Join(b.TempDir(), "tree")
	cmd := exec.Command("go", "run", "./scripts/gentree", "-out", tree, "-sessions", "1", "-mb", mb, "-seed", "7")
	cmd.Dir = fixtures.RepoRoot(b)
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("gentree: %v\n%s", err, out)
	}
	sessions, _ := filepath.Glob(filepath.Join(tree, "*", "*.jsonl"))
	if len(sessions) != 1 {
		b.Fatalf("gentree wrote %d sessions", len(sessions))
	}
	path := sessions[0]
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
