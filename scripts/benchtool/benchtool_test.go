package main

import (
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"pisess/readers/jsonl"
)

const header = `{"type":"session","version":3,"id":"7c1d2e3f-0000-4000-8000-000000000001","timestamp":"2026-03-01T09:00:00.000Z","cwd":"/x"}`

func entry(id, parent string) string {
	p := `null`
	if parent != "" {
		p = `"` + parent + `"`
	}
	return `{"type":"message","id":"` + id + `","parentId":` + p + `,"timestamp":"2026-03-01T09:00:01.000Z","message":{"role":"user","content":"hi","timestamp":1772355601000}}`
}

// The refresh step must make sessions stale, not refused: the appended
// entry has to be one the reader accepts, chained to the last entry.
func TestAppendEntryIsAccepted(t *testing.T) {
	tree := t.TempDir()
	dir := filepath.Join(tree, "--x--")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, name := range []string{"a.jsonl", "b.jsonl", "c.jsonl"} {
		p := filepath.Join(dir, name)
		body := header + "\n" + entry("0000000a", "") + "\n" + entry("0000000b", "0000000a") + "\n"
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	// A sidecar-like directory is not descended into.
	if err := os.MkdirAll(filepath.Join(dir, "a.v2", "segments"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "a.v2", "x.jsonl"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	files, err := sessionFiles(tree)
	if err != nil || len(files) != 3 {
		t.Fatalf("sessionFiles = %v, %v; want the 3 sessions", files, err)
	}
	for _, p := range paths[:2] {
		if _, err := appendEntry(p); err != nil {
			t.Fatal(err)
		}
	}
	for i, p := range paths {
		s, err := jsonl.Open(p, jsonl.Options{})
		if err != nil {
			t.Fatalf("%s refused after the append: %v", p, err)
		}
		var last string
		n := 0
		for {
			e, err := s.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			n++
			if n == 3 && e.ParentID != "0000000b" {
				t.Errorf("%s: appended entry's parent = %q, want 0000000b", p, e.ParentID)
			}
			last = e.ID
		}
		s.Close()
		want := 2
		if i < 2 {
			want = 3
		}
		if n != want {
			t.Errorf("%s: %d entries (last %s), want %d", p, n, last, want)
		}
	}
}

func TestParseGoBench(t *testing.T) {
	out := `goos: linux
pkg: pisess/writers/store
BenchmarkSHA256-2   	      10	    697291 ns/op	1503.79 MB/s	       0 B/op	       0 allocs/op
PASS
pkg: pisess/readers/jsonl
BenchmarkReadJSONL-2   	       1	57114678919 ns/op	   3.67 MB/s	    352240 entries	        76.33 peakRSS-MB	15277744232 B/op	64528574 allocs/op
--- FAIL: BenchmarkBroken
`
	p := filepath.Join(t.TempDir(), "bench.txt")
	if err := os.WriteFile(p, []byte(out), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := parseGoBench(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("got %d results, want 2: %+v", len(got), got)
	}
	if g := got[0]; g.Package != "pisess/writers/store" || g.Name != "SHA256" || g.Iterations != 10 || g.Metrics["MB/s"] != 1503.79 {
		t.Errorf("first = %+v", g)
	}
	if g := got[1]; g.Package != "pisess/readers/jsonl" || g.Metrics["peakRSS-MB"] != 76.33 || g.Metrics["allocs/op"] != 64528574 {
		t.Errorf("second = %+v", g)
	}
}

func TestReadSteps(t *testing.T) {
	dir := t.TempDir()
	report := filepath.Join(dir, "r.json")
	rep := `{"totals":{"sessions":2,"refreshed":1,"skipped":1,"sourceBytes":300},"sessions":[
		{"action":"refresh","outcome":"done","sourceBytes":100},{"action":"skip","outcome":"skipped","sourceBytes":200}]}`
	if err := os.WriteFile(report, []byte(rep), 0o600); err != nil {
		t.Fatal(err)
	}
	steps := "sha256sum\t2.000\t1.50\t2048\t300000000\t-\t0\t1.5\n" +
		"refresh 10%\t0.500\t0.40\t4096\t300\t" + report + "\t0\t2.0\n"
	p := filepath.Join(dir, "steps.tsv")
	if err := os.WriteFile(p, []byte(steps), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := readSteps(p)
	if err != nil {
		t.Fatal(err)
	}
	if got[0].MBps != 150 || got[0].PeakRSSKB != 2048 || got[0].CPUSeconds != 1.5 {
		t.Errorf("sha256sum step = %+v", got[0])
	}
	// A refresh's MB/s is over the bytes it rebuilt, not the whole tree.
	if got[1].Bytes != 100 || got[1].Totals.RefreshedBytes != 100 || !strings.HasPrefix(got[1].Name, "refresh") {
		t.Errorf("refresh step = %+v", got[1])
	}
}

// TestSteadyRefreshMedian: the steady refresh ratio is the median of its
// timed runs over the full migration, with the fastest and slowest beside
// it; one run alone is its own median.
func TestSteadyRefreshMedian(t *testing.T) {
	sum := func(steps ...Step) map[string]float64 {
		s := &Summary{Steps: append([]Step{{Name: "migrate --jobs 1", Seconds: 10}}, steps...), Ratios: map[string]float64{}}
		s.ratios()
		return s.Ratios
	}
	r := sum(Step{Name: "refresh 10%", Seconds: 0.9}, Step{Name: "refresh 10% #2", Seconds: 0.5}, Step{Name: "refresh 10% #3", Seconds: 0.25})
	if r["refreshSecondsOverFullMigrate"] != 0.5/10 || r["refreshFastestSecondsOverFullMigrate"] != 0.25/10 || r["refreshSlowestSecondsOverFullMigrate"] != 0.9/10 {
		t.Errorf("three runs: %v", r)
	}
	r = sum(Step{Name: "refresh 10%", Seconds: 0.75})
	if _, ok := r["refreshFastestSecondsOverFullMigrate"]; r["refreshSecondsOverFullMigrate"] != 0.75/10 || ok {
		t.Errorf("one run: %v", r)
	}
}

// TestJobs2Ceiling: --jobs 1 keeping 1.6 CPUs busy on a machine whose two
// halves run 1.8× as fast as one leaves --jobs 2 at most 1.8 / 1.6; a
// --jobs 1 that keeps less than one CPU busy is taken as one.
func TestJobs2Ceiling(t *testing.T) {
	sum := func(j1CPU float64) map[string]float64 {
		s := &Summary{Steps: []Step{
			{Name: "sha256sum", Seconds: 3.6},
			{Name: "sha256sum, 2 at once", Seconds: 2},
			{Name: "migrate --jobs 1", Seconds: 10, CPUSeconds: j1CPU},
			{Name: "migrate --jobs 2", Seconds: 8},
		}, Ratios: map[string]float64{}}
		s.ratios()
		return s.Ratios
	}
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
	if r := sum(16); !near(r["jobs1CPUsBusy"], 1.6) || !near(r["jobs2SpeedUpCeiling"], 1.8/1.6) ||
		!near(r["sha256sum2SpeedUp"], 1.8) || !near(r["jobs2SpeedUpOverMachine2"], 10.0/8/1.8) {
		t.Errorf("1.6 CPUs busy: %v", r)
	}
	if r := sum(8); !near(r["jobs1CPUsBusy"], 0.8) || !near(r["jobs2SpeedUpCeiling"], 1.8) {
		t.Errorf("0.8 CPUs busy: %v", r)
	}
}

// TestOneCPUJobs1: the --jobs 1 run held to one CPU is compared with
// sha256sum by throughput and with --jobs 2 by time; without that step
// neither ratio is printed.
func TestOneCPUJobs1(t *testing.T) {
	steps := []Step{
		{Name: "sha256sum", Seconds: 3, MBps: 300},
		{Name: "migrate --jobs 1", Seconds: 8, MBps: 125},
		{Name: "migrate --jobs 2", Seconds: 7, MBps: 140},
	}
	s := &Summary{Steps: steps, Ratios: map[string]float64{}}
	s.ratios()
	if _, ok := s.Ratios["jobs2SpeedUpOverOneCPU"]; ok {
		t.Errorf("no one-CPU step, yet %v", s.Ratios)
	}
	s = &Summary{Steps: append(steps, Step{Name: "migrate --jobs 1, one CPU", Seconds: 12, MBps: 84}), Ratios: map[string]float64{}}
	s.ratios()
	if r := s.Ratios; math.Abs(r["migrateJobs1OneCPUMBpsOverSha256sum"]-0.28) > 1e-9 || math.Abs(r["jobs2SpeedUpOverOneCPU"]-12.0/7) > 1e-9 ||
		math.Abs(r["jobs2SpeedUp"]-8.0/7) > 1e-9 {
		t.Errorf("%v", r)
	}
}

// Each append to a session starts from an id of its own: from the path
// alone, the n-th append to one session tried the n-1 ids taken before it,
// each a scan of the whole file (thousands of refresh rounds on one tree
// took seconds an append).
func TestFreshIDStartsAnewEachAppend(t *testing.T) {
	p := filepath.Join(t.TempDir(), "a.jsonl")
	src := []byte(header + "\n" + entry("0000000a", "") + "\n")
	for n := range 50 {
		id, tries := freshIDTries(p, src)
		if tries != 1 {
			t.Fatalf("append %d: %d candidates tried for %s", n, tries, id)
		}
		src = append(src, entry(id, "0000000a")+"\n"...)
	}
	// A taken candidate is passed over: the same length, the first
	// candidate now an entry's id.
	first, _ := freshIDTries(p, src)
	taken := []byte(strings.Replace(string(src), `"id":"0000000a"`, `"id":"`+first+`"`, 1))
	if id, tries := freshIDTries(p, taken); id == first || tries != 2 {
		t.Fatalf("taken %s: got %s after %d candidates", first, id, tries)
	}
}

// TestStatusMedian: the long session's status, timed five times, is
// reported as the median of the runs; the steps of other names and the
// numbered ones are not taken for a base of their own.
func TestStatusMedian(t *testing.T) {
	s := &Summary{Steps: []Step{
		{Name: "migrate 1000000 entries", Seconds: 10},
		{Name: "status 1000000 entries", Seconds: 0.09},
		{Name: "status 1000000 entries #2", Seconds: 0.03},
		{Name: "status 1000000 entries #3", Seconds: 0.04},
		{Name: "status 1000000 entries #4", Seconds: 0.035},
		{Name: "status 1000000 entries #5", Seconds: 0.2},
	}, Ratios: map[string]float64{}}
	s.figures()
	if got := s.Figures["statusSecondsMedian"]; got != 0.04 {
		t.Errorf("median %v, want 0.04", got)
	}
	if got := s.Figures["statusRuns"]; got != 5 {
		t.Errorf("%v runs, want 5", got)
	}
	var out strings.Builder
	s.print(&out)
	if !strings.Contains(out.String(), "status of the long session, median of 5 (seconds)") {
		t.Errorf("the figure is not printed:\n%s", out.String())
	}
}
