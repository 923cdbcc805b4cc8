package commands

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"pisess/commands/engine"
	"pisess/commands/metrics"
	"pisess/fixtures"
	"pisess/ledger"
)

// promFile parses a metrics file with the Prometheus text parser, as
// node_exporter's textfile collector does.
func promFile(t *testing.T, path string) map[string]*dto.MetricFamily {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(f)
	if err != nil {
		t.Fatalf("%s does not parse: %v", path, err)
	}
	return mfs
}

// promValue is the value of the series of name with exactly these labels
// (pairs of name and value).
func promValue(t *testing.T, mfs map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	t.Helper()
	want := map[string]string{}
	for i := 0; i+1 < len(labels); i += 2 {
		want[labels[i]] = labels[i+1]
	}
	v, ok := metrics.Value(mfs, name, want)
	if !ok {
		t.Fatalf("the metrics have no series %s%v", name, want)
	}
	return v
}

// promSeries lists the values of name's series whose labels include
// these, keyed by the value of label key.
func promSeries(mfs map[string]*dto.MetricFamily, name, key string, labels ...string) map[string]float64 {
	out := map[string]float64{}
	mf, ok := mfs[name]
	if !ok {
		return out
	}
next:
	for _, m := range mf.Metric {
		got := map[string]string{}
		for _, l := range m.Label {
			got[l.GetName()] = l.GetValue()
		}
		for i := 0; i+1 < len(labels); i += 2 {
			if got[labels[i]] != labels[i+1] {
				continue next
			}
		}
		out[got[key]] = m.GetGauge().GetValue()
	}
	return out
}

// envelopeTimes are a --json report's start and end.
func envelopeTimes(t *testing.T, stdout string) (start, end time.Time, exit int) {
	t.Helper()
	var e struct {
		StartedAt, FinishedAt string
		ExitStatus            int
	}
	if err := json.Unmarshal([]byte(stdout), &e); err != nil {
		t.Fatalf("not a report: %v\n%s", err, stdout)
	}
	var err error
	if start, err = time.Parse(time.RFC3339Nano, e.StartedAt); err != nil {
		t.Fatal(err)
	}
	if end, err = time.Parse(time.RFC3339Nano, e.FinishedAt); err != nil {
		t.Fatal(err)
	}
	return start, end, e.ExitStatus
}

// checkRunMetrics compares the run's series with its --json envelope: the
// same start (to the millisecond the report shows), an end within the
// run, the duration between them, the same exit status. A root run over a
// user's tree prints its child's report: its own run encloses the child's.
func checkRunMetrics(t *testing.T, mfs map[string]*dto.MetricFamily, command, stdout string, viaChild bool) {
	t.Helper()
	start, end, exit := envelopeTimes(t, stdout)
	c := []string{metrics.LabelCommand, command}
	gotStart, gotEnd := promValue(t, mfs, metrics.RunStart, c...), promValue(t, mfs, metrics.RunEnd, c...)
	repStart, repEnd := float64(start.UnixNano())/1e9, float64(end.UnixNano())/1e9
	switch {
	case !viaChild && math.Abs(gotStart-repStart) > 0.001:
		t.Errorf("%s: start %f, the report's %s", command, gotStart, start)
	case !viaChild && (gotEnd < gotStart || gotEnd > repEnd+0.001):
		t.Errorf("%s: end %f, not between the start %f and the report's end %s", command, gotEnd, gotStart, end)
	case viaChild && (gotStart > repStart+0.001 || gotEnd < repEnd-0.001):
		t.Errorf("%s: the run from %f to %f does not enclose its child's, from %s to %s", command, gotStart, gotEnd, start, end)
	}
	if d := promValue(t, mfs, metrics.RunDuration, c...); math.Abs(d-(gotEnd-gotStart)) > 1e-6 {
		t.Errorf("%s: duration %f, end − start %f", command, d, gotEnd-gotStart)
	}
	if got := promValue(t, mfs, metrics.RunExitStatus, c...); got != float64(exit) {
		t.Errorf("%s: exit status %v, the report's %d", command, got, exit)
	}
}

// TestMetricsMigrate (issue 35, item 5): --metrics-file after a migrate
// run over a tree of every class and a refused session holds what the
// run's --json report says — sessions by outcome, refused, bytes read and
// written — the classes pisess status then reports, the journal and
// quarantine sizes; a run that leaves problems (exit 4) keeps the last
// success of the file before it, and replaces every series of migrate's.
func TestMetricsMigrate(t *testing.T) {
	prom := filepath.Join(t.TempDir(), "pisess.prom")
	clean, _ := placeSession(t, exampleSession, "s.jsonl")
	first := pisess(t, "migrate", "--json", "--metrics-file", prom, clean)
	if first.code != ExitClean {
		t.Fatalf("first run: %s", first)
	}
	success := promValue(t, promFile(t, prom), metrics.LastSuccess, metrics.LabelCommand, "migrate")
	if _, end, _ := envelopeTimes(t, first.stdout); success <= 0 || success > float64(end.UnixNano())/1e9+0.001 {
		t.Fatalf("the first run's last success %f", success)
	}

	root, _ := classTree(t)
	b, err := os.ReadFile(refusedSession)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "--home-u-proj--", "refused.jsonl"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	r := pisess(t, "migrate", "--json", "--metrics-file", prom, root)
	if r.code != ExitProblems {
		t.Fatalf("migrate: %s", r)
	}
	var rep engine.MigrateReport
	if err := json.Unmarshal(detail(t, r.stdout), &rep); err != nil {
		t.Fatal(err)
	}
	mfs := promFile(t, prom)
	checkRunMetrics(t, mfs, "migrate", r.stdout, false)
	if got := promValue(t, mfs, metrics.LastSuccess, metrics.LabelCommand, "migrate"); got != success {
		t.Errorf("last success %f after a run that left problems, want the first run's %f", got, success)
	}
	if got := promSeries(mfs, metrics.JournalBytes, metrics.LabelTree, metrics.LabelCommand, "migrate"); len(got) != 1 {
		t.Errorf("migrate's trees: %v, want the last run's only", got)
	}

	tree := []string{metrics.LabelCommand, "migrate", metrics.LabelTree, root}
	outcomes := map[string]float64{}
	var read, written int64
	for _, s := range rep.Sessions {
		outcomes[string(s.Outcome)]++
		switch s.Outcome {
		case engine.OutcomeDone:
			read, written = read+s.SourceBytes, written+int64(s.Bytes)
		case engine.OutcomeChecked:
			read += s.SourceBytes
		}
	}
	for _, o := range []string{"done", "verified", "skipped", "left", "refused", "busy", "failed", "interrupted", "not_started"} {
		if got := promValue(t, mfs, metrics.RunSessions, append(tree, metrics.LabelOutcome, o)...); got != outcomes[o] {
			t.Errorf("outcome %s: %v, the report has %v", o, got, outcomes[o])
		}
	}
	// done: the unmigrated, the stale and the partial one (healed: its
	// index rebuilt from the source); left: the corrupt one (a mode only
	// fsck --repair mends).
	if outcomes["done"] != 3 || outcomes["left"] != 1 || outcomes["refused"] != 1 || outcomes["skipped"] != 1 {
		t.Errorf("the tree did not give every outcome: %v", outcomes)
	}
	if got := promValue(t, mfs, metrics.Refused, tree...); got != float64(rep.Totals.Refused) {
		t.Errorf("refused %v, the report's %d", got, rep.Totals.Refused)
	}
	if got := promValue(t, mfs, metrics.ReadBytes, tree...); got != float64(read) || read == 0 {
		t.Errorf("bytes read %v, the report's sessions %d", got, read)
	}
	if got := promValue(t, mfs, metrics.WrittenBytes, tree...); got != float64(written) || written == 0 {
		t.Errorf("bytes written %v, the report's sessions %d", got, written)
	}

	// The classes are those pisess status gives the tree now.
	st := pisess(t, "status", "--json", root)
	var status statusReport
	if err := json.Unmarshal(detail(t, st.stdout), &status); err != nil {
		t.Fatal(err)
	}
	for _, c := range statusClasses {
		if got := promValue(t, mfs, metrics.Sessions, append(tree, metrics.LabelClass, string(c))...); got != float64(status.Totals[c]) {
			t.Errorf("class %s: %v, status says %d", c, got, status.Totals[c])
		}
	}
	if got := promValue(t, mfs, metrics.JournalBytes, tree...); got != float64(status.Trees[0].JournalBytes) || got == 0 {
		t.Errorf("journal bytes %v, status says %d", got, status.Trees[0].JournalBytes)
	}
	if got := promValue(t, mfs, metrics.QuarantineBytes, tree...); got != float64(status.Trees[0].QuarantineBytes) {
		t.Errorf("quarantine bytes %v, status says %d", got, status.Trees[0].QuarantineBytes)
	}
}

// TestMetricsEveryCommand: each command that acts on trees writes its run
// and its tree under its own command label, the others' kept: status and
// fsck their classes, verify, fsck, upgrade and rollback their outcomes,
// as their --json reports have them.
func TestMetricsEveryCommand(t *testing.T) {
	prom := filepath.Join(t.TempDir(), "pisess.prom")
	root, _ := classTree(t)
	run := func(want int, args ...string) result {
		t.Helper()
		r := pisess(t, append(append([]string{}, args...), "--json", "--metrics-file", prom, root)...)
		if r.code != want {
			t.Fatalf("%v: %s", args, r)
		}
		checkRunMetrics(t, promFile(t, prom), args[0], r.stdout, false)
		return r
	}
	var items struct {
		Items []reportItem `json:"items"`
	}
	count := func(r result, key func(reportItem) string) map[string]float64 {
		t.Helper()
		if err := json.Unmarshal([]byte(r.stdout), &items); err != nil {
			t.Fatal(err)
		}
		out := map[string]float64{}
		for _, it := range items.Items {
			if it.Class != "tree" && it.Outcome != "skipped" || it.SourceFormat != "" {
				out[key(it)]++
			}
		}
		return out
	}
	same := func(name, label, command string, want map[string]float64) {
		t.Helper()
		got := promSeries(promFile(t, prom), name, label, metrics.LabelCommand, command, metrics.LabelTree, root)
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s %s{%s=%q} = %v, the report has %v (all: %v)", command, name, label, k, got[k], v, got)
			}
		}
		if len(got) == 0 {
			t.Errorf("%s: no %s series", command, name)
		}
	}
	byClass := func(it reportItem) string { return it.Class }
	byOutcome := func(it reportItem) string { return it.Outcome }

	same(metrics.Sessions, metrics.LabelClass, "status", count(run(ExitClean, "status"), byClass))
	same(metrics.RunSessions, metrics.LabelOutcome, "verify", count(run(ExitProblems, "verify"), byOutcome))
	same(metrics.Sessions, metrics.LabelClass, "fsck", count(run(ExitProblems, "fsck"), byClass))
	r := run(ExitRepaired, "fsck", "--repair")
	same(metrics.Sessions, metrics.LabelClass, "fsck", count(r, byClass))
	var fsck fsckReport
	if err := json.Unmarshal(detail(t, r.stdout), &fsck); err != nil {
		t.Fatal(err)
	}
	fsckOutcomes := map[string]float64{}
	for _, s := range fsck.Trees[0].Sessions {
		o := "clean"
		for _, f := range s.Findings {
			if f.Repaired && o == "clean" {
				o = "repaired"
			}
			if !f.Notice && !f.Repaired {
				o = "left"
			}
		}
		fsckOutcomes[o]++
	}
	same(metrics.RunSessions, metrics.LabelOutcome, "fsck", fsckOutcomes)
	if fsckOutcomes["repaired"] < 2 {
		t.Errorf("fsck --repair repaired %v sessions", fsckOutcomes["repaired"])
	}
	same(metrics.RunSessions, metrics.LabelOutcome, "upgrade", count(run(ExitClean, "upgrade"), byOutcome))
	r = run(ExitClean, "runs")
	if err := json.Unmarshal([]byte(r.stdout), &items); err != nil || len(items.Items) == 0 {
		t.Fatalf("runs: %s", r)
	}
	cid := items.Items[len(items.Items)-1].CorrelationID
	r = pisess(t, "rollback", "--json", "--metrics-file", prom, "--tree", root, cid)
	if r.code != ExitClean {
		t.Fatalf("rollback: %s", r)
	}
	same(metrics.RunSessions, metrics.LabelOutcome, "rollback", count(r, func(it reportItem) string { return it.Action }))
	run(ExitClean, "prune", "--keep-within", "1h")

	mfs := promFile(t, prom)
	for _, c := range []string{"status", "verify", "fsck", "upgrade", "runs", "rollback", "prune"} {
		if got := promSeries(mfs, metrics.JournalBytes, metrics.LabelTree, metrics.LabelCommand, c); len(got) != 1 || got[root] == 0 {
			t.Errorf("%s's journal bytes: %v", c, got)
		}
	}
	if _, ok := metrics.Value(mfs, metrics.ReadBytes, map[string]string{metrics.LabelCommand: "status", metrics.LabelTree: root}); ok {
		t.Error("status, which reads no session, has a bytes-read series")
	}
}

// TestMetricsFileChecked: a --metrics-file (or PISESS_METRICS_FILE) that
// cannot be written fails the run before it starts (exit 8), the tree
// untouched; commands that do not act on trees ignore it.
func TestMetricsFileChecked(t *testing.T) {
	root, _ := placeSession(t, exampleSession, "s.jsonl")
	missing := filepath.Join(t.TempDir(), "no", "such", "dir", "pisess.prom")
	before := fixtures.TreeDigest(t, root)
	r := pisess(t, "migrate", "--metrics-file", missing, root)
	if r.code != ExitOperational || !strings.Contains(r.stderr, "--metrics-file") {
		t.Fatalf("%s", r)
	}
	t.Setenv("PISESS_METRICS_FILE", missing)
	if r := pisess(t, "migrate", "-q", root); r.code != ExitOperational || !strings.Contains(r.stderr, "no such file") {
		t.Fatalf("PISESS_METRICS_FILE: %s", r)
	}
	if d := fixtures.DigestDiff(before, fixtures.TreeDigest(t, root)); len(d) != 0 {
		t.Fatalf("a run that could not write its metrics changed %v", d)
	}
	if r := pisess(t, "version"); r.code != ExitClean {
		t.Fatalf("version with PISESS_METRICS_FILE set: %s", r)
	}
	// A dry run is not the job: it writes no metrics.
	dry := filepath.Join(t.TempDir(), "dry.prom")
	for _, args := range [][]string{{"migrate", "--dry-run"}, {"migrate", "-n"}, {"upgrade", "-n"}} {
		if r := pisess(t, append(args, "-q", "--metrics-file", dry, root)...); r.code != ExitClean {
			t.Fatalf("%v: %s", args, r)
		}
		if _, err := os.Lstat(dry); err == nil {
			t.Fatalf("%v wrote metrics", args)
		}
	}
	prom := filepath.Join(t.TempDir(), "env.prom")
	t.Setenv("PISESS_METRICS_FILE", prom)
	if r := pisess(t, "migrate", "-q", root); r.code != ExitClean || r.stdout != "" || r.stderr != "" {
		t.Fatalf("%s", r)
	}
	if got := promValue(t, promFile(t, prom), metrics.RunSessions, metrics.LabelCommand, "migrate", metrics.LabelTree, root, metrics.LabelOutcome, "done"); got != 1 {
		t.Errorf("PISESS_METRICS_FILE: done %v", got)
	}
}

// TestMetricsInterruptedRun: a run stopped by SIGINT writes its metrics
// too: exit status 8, what it did before it stopped.
func TestMetricsInterruptedRun(t *testing.T) {
	root, session := placeSession(t, exampleSession, "a.jsonl")
	b, err := os.ReadFile(session)
	if err != nil {
		t.Fatal(err)
	}
	locked := filepath.Join(filepath.Dir(session), "b.jsonl")
	if err := os.WriteFile(locked, b, 0o600); err != nil {
		t.Fatal(err)
	}
	prom := filepath.Join(t.TempDir(), "pisess.prom")
	cmd := exec.Command(os.Args[0], "migrate", "--json", "--jobs", "1", "--lock-timeout", "1m", "--metrics-file", prom, root)
	cmd.Env = append(os.Environ(), envTestMain+"=1")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	fixtures.WhileLockHeld(t, locked+".lock", func() error {
		if err := cmd.Start(); err != nil {
			return err
		}
		return cmd.Wait()
	}, func() bool {
		_, err := os.Lstat(filepath.Join(filepath.Dir(session), "a.v2"))
		return err == nil
	}, func() bool {
		time.Sleep(200 * time.Millisecond) // into the wait for b's lock
		return cmd.Process.Signal(syscall.SIGINT) == nil
	})
	if code := cmd.ProcessState.ExitCode(); code != ExitOperational {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", code, out.String(), errb.String())
	}
	var doc struct {
		Error struct {
			Class string `json:"class"`
		} `json:"error"`
		Report engine.MigrateReport `json:"report"`
	}
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil || doc.Error.Class != ClassCanceled {
		t.Fatalf("not an interrupted run's document (%v): %s", err, out.String())
	}
	mfs := promFile(t, prom)
	c := []string{metrics.LabelCommand, "migrate"}
	if got := promValue(t, mfs, metrics.RunExitStatus, c...); got != ExitOperational {
		t.Errorf("exit status %v", got)
	}
	if got := promValue(t, mfs, metrics.LastSuccess, c...); got != 0 {
		t.Errorf("last success %v: this run did not succeed, and none did before", got)
	}
	done := 0.0
	for _, s := range doc.Report.Sessions {
		if s.Outcome == engine.OutcomeDone {
			done++
		}
	}
	tree := append(c, metrics.LabelTree, root)
	if got := promValue(t, mfs, metrics.RunSessions, append(tree, metrics.LabelOutcome, "done")...); got != done || done != 1 {
		t.Errorf("done %v, the partial report's %v", got, done)
	}
}

// TestMetricsRootOverUserTree: root's run over a user's tree writes the
// metrics file (in a directory only root may write to) with the tree's
// series, which the child run as the owner measured and handed over.
func TestMetricsRootOverUserTree(t *testing.T) {
	needRoot(t)
	tree, _ := userTree(t)
	dir := filepath.Join(t.TempDir(), "textfile")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	prom := filepath.Join(dir, "pisess.prom")
	r := pisess(t, "migrate", "--json", "--metrics-file", prom, tree)
	if r.code != ExitClean {
		t.Fatalf("%s", r)
	}
	var rep engine.MigrateReport
	if err := json.Unmarshal(detail(t, r.stdout), &rep); err != nil {
		t.Fatal(err)
	}
	mfs := promFile(t, prom)
	checkRunMetrics(t, mfs, "migrate", r.stdout, true)
	l := []string{metrics.LabelCommand, "migrate", metrics.LabelTree, tree}
	if got := promValue(t, mfs, metrics.RunSessions, append(l, metrics.LabelOutcome, "done")...); got != float64(rep.Totals.Migrated) || got != 1 {
		t.Errorf("done %v, the report's %d", got, rep.Totals.Migrated)
	}
	fi, err := os.Lstat(ledger.JournalPath(tree))
	if err != nil {
		t.Fatal(err)
	}
	if got := promValue(t, mfs, metrics.JournalBytes, l...); got != float64(fi.Size()) {
		t.Errorf("journal bytes %v, the journal has %d", got, fi.Size())
	}
}

// TestChildMetricsOwnedTreesOnly: what a child run as a tree's owner
// hands back is the owner's to write: the parent takes a tree only when
// it is a directory that uid owns.
func TestChildMetricsOwnedTreesOnly(t *testing.T) {
	needRoot(t)
	tree, _ := userTree(t)
	rootsDir := t.TempDir()
	r := &run{metrics: &runMetrics{file: filepath.Join(t.TempDir(), "pisess.prom")}}
	data, err := json.Marshal([]metrics.Tree{
		{Tree: tree, JournalBytes: 1},
		{Tree: rootsDir, JournalBytes: 2},                            // root's
		{Tree: tree + "/../" + filepath.Base(tree), JournalBytes: 3}, // not clean
		{Tree: "relative", JournalBytes: 4},
		{Tree: filepath.Join(tree, "--p--", "s.jsonl"), JournalBytes: 5}, // not a directory
	})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/bin/sh", "-c", `eval 'printf "%s" "$DATA" >&'"$`+envMetricsFD+`"`)
	cmd.Env = []string{"DATA=" + string(data)}
	collect := r.childMetrics(cmd, hostileUID)
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	collect()
	if len(r.metrics.children) != 1 || r.metrics.children[0].Tree != tree {
		t.Fatalf("taken from the child: %+v", r.metrics.children)
	}
}
