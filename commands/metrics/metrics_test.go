package metrics

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// parse reads the file with the Prometheus text parser, as node_exporter
// does, and checks every family: a gauge, with help, and no two series
// with the same labels.
func parse(t *testing.T, path string) map[string]*dto.MetricFamily {
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
	for name, mf := range mfs {
		if mf.GetType() != dto.MetricType_GAUGE || mf.GetHelp() == "" {
			t.Errorf("%s: type %v, help %q", name, mf.GetType(), mf.GetHelp())
		}
		seen := map[string]bool{}
		for _, m := range mf.Metric {
			key := fmt.Sprint(labelMap(m))
			if seen[key] {
				t.Errorf("%s: two series %s", name, key)
			}
			seen[key] = true
		}
	}
	return mfs
}

func value(t *testing.T, mfs map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	t.Helper()
	want := map[string]string{}
	for i := 0; i+1 < len(labels); i += 2 {
		want[labels[i]] = labels[i+1]
	}
	v, ok := Value(mfs, name, want)
	if !ok {
		t.Fatalf("no series %s%v", name, want)
	}
	return v
}

func ptr[T any](v T) *T { return &v }

var t0 = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)

func TestWrite(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "pisess.prom")
	run := Run{Command: "migrate", Start: t0, End: t0.Add(1500 * time.Millisecond), ExitStatus: 0}
	trees := []Tree{
		{Tree: "/home/a/.pi/agent/sessions", Classes: map[string]int{"migrated": 3, "corrupt": 0}, Outcomes: map[string]int{"done": 2, "skipped": 1},
			Refused: ptr(1), ReadBytes: ptr(int64(100)), WrittenBytes: ptr(int64(250)), JournalBytes: 4096, QuarantineBytes: 12},
		{Tree: "/home/b/.pi/agent/sessions", JournalBytes: 7},
	}
	if err := Write(path, run, trees); err != nil {
		t.Fatal(err)
	}
	mfs := parse(t, path)
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{RunStart, []string{LabelCommand, "migrate"}, float64(t0.Unix())},
		{RunEnd, []string{LabelCommand, "migrate"}, float64(t0.Unix()) + 1.5},
		{RunDuration, []string{LabelCommand, "migrate"}, 1.5},
		{RunExitStatus, []string{LabelCommand, "migrate"}, 0},
		{LastSuccess, []string{LabelCommand, "migrate"}, float64(t0.Unix()) + 1.5},
		{Sessions, []string{LabelCommand, "migrate", LabelTree, "/home/a/.pi/agent/sessions", LabelClass, "migrated"}, 3},
		{Sessions, []string{LabelCommand, "migrate", LabelTree, "/home/a/.pi/agent/sessions", LabelClass, "corrupt"}, 0},
		{RunSessions, []string{LabelCommand, "migrate", LabelTree, "/home/a/.pi/agent/sessions", LabelOutcome, "done"}, 2},
		{Refused, []string{LabelCommand, "migrate", LabelTree, "/home/a/.pi/agent/sessions"}, 1},
		{ReadBytes, []string{LabelCommand, "migrate", LabelTree, "/home/a/.pi/agent/sessions"}, 100},
		{WrittenBytes, []string{LabelCommand, "migrate", LabelTree, "/home/a/.pi/agent/sessions"}, 250},
		{JournalBytes, []string{LabelCommand, "migrate", LabelTree, "/home/a/.pi/agent/sessions"}, 4096},
		{QuarantineBytes, []string{LabelCommand, "migrate", LabelTree, "/home/a/.pi/agent/sessions"}, 12},
		{JournalBytes, []string{LabelCommand, "migrate", LabelTree, "/home/b/.pi/agent/sessions"}, 7},
	} {
		if got := value(t, mfs, c.name, c.labels...); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	// A measure a tree does not have is left out, not written as zero.
	if _, ok := Value(mfs, Refused, map[string]string{LabelCommand: "migrate", LabelTree: "/home/b/.pi/agent/sessions"}); ok {
		t.Error("tree b has a refused count it was never given")
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("mode %v (%v): node_exporter must be able to read it", fi.Mode(), err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("the directory holds %v: a temporary file was left", entries)
	}
}

// TestLastSuccessCarriedOver: a run that fails keeps the last success of
// the file it replaces; one that succeeds sets it to its end; exit 1 (all
// repaired) is a success, 4 is not.
func TestLastSuccessCarriedOver(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pisess.prom")
	steps := []struct {
		exit        int
		wantSuccess time.Time // zero: 0 in the file
	}{
		{8, time.Time{}}, // never succeeded
		{0, t0.Add(1 * time.Hour)},
		{4, t0.Add(1 * time.Hour)},
		{32, t0.Add(1 * time.Hour)},
		{1, t0.Add(4 * time.Hour)},
		{16, t0.Add(4 * time.Hour)},
	}
	for i, s := range steps {
		end := t0.Add(time.Duration(i) * time.Hour)
		if err := Write(path, Run{Command: "migrate", Start: end.Add(-time.Minute), End: end, ExitStatus: s.exit}, nil); err != nil {
			t.Fatal(err)
		}
		mfs := parse(t, path)
		want := 0.0
		if !s.wantSuccess.IsZero() {
			want = float64(s.wantSuccess.Unix())
		}
		if got := value(t, mfs, LastSuccess, LabelCommand, "migrate"); got != want {
			t.Errorf("step %d (exit %d): last success %v, want %v", i, s.exit, got, want)
		}
		if got := value(t, mfs, RunExitStatus, LabelCommand, "migrate"); got != float64(s.exit) {
			t.Errorf("step %d: exit status %v", i, got)
		}
		if got := value(t, mfs, RunEnd, LabelCommand, "migrate"); got != float64(end.Unix()) {
			t.Errorf("step %d: end %v", i, got)
		}
	}
}

// TestOtherCommandsCarriedOver: one file serves several commands (the
// migrate and the prune jobs): a run replaces its own command's series,
// trees it no longer has included, and keeps the others'.
func TestOtherCommandsCarriedOver(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pisess.prom")
	write := func(cmd string, exit int, end time.Time, trees ...string) {
		t.Helper()
		var ts []Tree
		for _, tr := range trees {
			ts = append(ts, Tree{Tree: tr, JournalBytes: int64(len(tr)), Outcomes: map[string]int{"done": 1}})
		}
		if err := Write(path, Run{Command: cmd, Start: end, End: end, ExitStatus: exit}, ts); err != nil {
			t.Fatal(err)
		}
	}
	write("migrate", 0, t0, "/a", "/b")
	write("prune", 0, t0.Add(time.Hour), "/a", "/b")
	write("migrate", 4, t0.Add(2*time.Hour), "/a")
	mfs := parse(t, path)
	if got := value(t, mfs, LastSuccess, LabelCommand, "migrate"); got != float64(t0.Unix()) {
		t.Errorf("migrate's last success %v", got)
	}
	if got := value(t, mfs, LastSuccess, LabelCommand, "prune"); got != float64(t0.Add(time.Hour).Unix()) {
		t.Errorf("prune's last success %v", got)
	}
	if got := value(t, mfs, RunExitStatus, LabelCommand, "migrate"); got != 4 {
		t.Errorf("migrate's exit status %v", got)
	}
	if _, ok := Value(mfs, JournalBytes, map[string]string{LabelCommand: "migrate", LabelTree: "/b"}); ok {
		t.Error("migrate's series of tree /b, which its last run did not have, were kept")
	}
	for _, tr := range []string{"/a", "/b"} {
		value(t, mfs, RunSessions, LabelCommand, "prune", LabelTree, tr, LabelOutcome, "done")
	}
	value(t, mfs, RunSessions, LabelCommand, "migrate", LabelTree, "/a", LabelOutcome, "done")
}

// TestUnreadablePreviousFile: a previous file that does not parse is
// replaced by this run's series.
func TestUnreadablePreviousFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pisess.prom")
	if err := os.WriteFile(path, []byte("pisess_last_run_exit_status{command=\"migrate\" 0\ngarbage\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Write(path, Run{Command: "migrate", Start: t0, End: t0, ExitStatus: 8}, nil); err != nil {
		t.Fatal(err)
	}
	mfs := parse(t, path)
	if got := value(t, mfs, RunExitStatus, LabelCommand, "migrate"); got != 8 {
		t.Errorf("exit status %v", got)
	}
}

// TestTreeLabelNotUTF8: a tree's path need not be UTF-8, a label value
// must: the path is written with U+FFFD for the bytes that are not.
func TestTreeLabelNotUTF8(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pisess.prom")
	tree := "/home/\xff\xfeuser/.pi/agent/sessions"
	if err := Write(path, Run{Command: "status", Start: t0, End: t0}, []Tree{{Tree: tree, JournalBytes: 3}}); err != nil {
		t.Fatal(err)
	}
	mfs := parse(t, path)
	if got := value(t, mfs, JournalBytes, LabelCommand, "status", LabelTree, strings.ToValidUTF8(tree, "\uFFFD")); got != 3 {
		t.Errorf("journal bytes %v", got)
	}
}

// TestConcurrentWriters: runs of different commands that end at the same
// moment each keep the others' series (the directory lock serializes
// their read of the previous file and their rename).
func TestConcurrentWriters(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pisess.prom")
	const writers = 8
	for round := 0; round < 10; round++ {
		var wg sync.WaitGroup
		errs := make(chan error, writers)
		for i := 0; i < writers; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				errs <- Write(path, Run{Command: fmt.Sprintf("cmd%d", i), Start: t0, End: t0.Add(time.Duration(round) * time.Second)}, []Tree{{Tree: "/t"}})
			}(i)
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		mfs := parse(t, path)
		for i := 0; i < writers; i++ {
			if got := value(t, mfs, RunEnd, LabelCommand, fmt.Sprintf("cmd%d", i)); got != float64(t0.Unix()+int64(round)) {
				t.Fatalf("round %d: cmd%d's end %v: a concurrent run dropped its series", round, i, got)
			}
		}
	}
}

// TestCheck: a metrics file needs an existing directory it can be created
// in, and must not be a directory.
func TestCheck(t *testing.T) {
	dir := t.TempDir()
	if err := Check(filepath.Join(dir, "pisess.prom")); err != nil {
		t.Errorf("a file in a writable directory: %v", err)
	}
	if err := Check(filepath.Join(dir, "missing", "pisess.prom")); err == nil {
		t.Error("a missing directory passes")
	}
	if err := Check(dir); err == nil {
		t.Error("a directory passes as the file")
	}
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Check(filepath.Join(file, "pisess.prom")); err == nil {
		t.Error("a file passes as the directory")
	}
}
