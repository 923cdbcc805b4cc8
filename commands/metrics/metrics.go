// Package metrics writes what a pisess run did in the Prometheus text
// format, for node_exporter's textfile collector: one file, replaced
// atomically (a temporary file in the same directory, renamed over it) at
// the end of every run, a failed or interrupted one included, so that the
// collector never reads half a file and a monitoring system sees when the
// job last ran, when it last succeeded, and what state each tree is in.
//
// It owns the metric names and their meaning, and knows nothing of the
// engine: the command layer (commands/metrics.go) turns a run's typed
// reports into a Run and one Tree per session tree, and Write does the
// rest. Write is a function of those values only, so that a root run
// over many owners' trees, whose children each report their trees, writes
// one file for the whole run.
//
// On disk it touches the metrics file, a temporary sibling named after it
// (which the collector ignores: it reads only *.prom), and an advisory
// lock on their directory held while the previous file is read and the
// new one renamed into place. Every series carries a command label: the
// series of other commands are carried over from the previous file, so
// that one file serves the migrate and the prune jobs alike. A crash
// leaves the previous file whole, or the new one, and at worst a
// temporary file.
package metrics

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"golang.org/x/sys/unix"
)

// Run is one run of a command, as a whole.
type Run struct {
	Command    string
	Start, End time.Time
	// ExitStatus is the run's exit status (commands/exit.go).
	ExitStatus int
}

// Succeeded reports whether the run counts as a success: it ran to the
// end and left nothing for the operator (exit 0, or 1: every problem it
// found was repaired). A run that left problems (4), could not run (8),
// was misused (16) or found the tree locked (32) did not.
func (r Run) Succeeded() bool { return r.ExitStatus == 0 || r.ExitStatus == 1 }

// Tree is what a run found and did in one session tree. A nil map or
// pointer is a measure the command does not take (status does not read
// sources, prune does not classify sessions): its series are left out
// rather than written as a misleading zero.
type Tree struct {
	Tree string `json:"tree"` // the tree's root
	// Classes counts sessions by status class, as the run left them.
	Classes map[string]int `json:"classes,omitempty"`
	// Outcomes counts sessions by what the run did to them.
	Outcomes map[string]int `json:"outcomes,omitempty"`
	// Refused counts the sessions the reference refuses.
	Refused *int `json:"refused,omitempty"`
	// ReadBytes are the bytes of the sessions read in full; WrittenBytes
	// the frame bytes of the sidecars installed.
	ReadBytes    *int64 `json:"readBytes,omitempty"`
	WrittenBytes *int64 `json:"writtenBytes,omitempty"`
	// JournalBytes and QuarantineBytes size the tree's .pisess/.
	JournalBytes    int64 `json:"journalBytes"`
	QuarantineBytes int64 `json:"quarantineBytes"`
}

// Metric names. Every series has a command label; the per-tree ones a
// tree label too.
const (
	RunStart        = "pisess_last_run_start_timestamp_seconds"
	RunEnd          = "pisess_last_run_end_timestamp_seconds"
	RunDuration     = "pisess_last_run_duration_seconds"
	RunExitStatus   = "pisess_last_run_exit_status"
	LastSuccess     = "pisess_last_success_timestamp_seconds"
	Sessions        = "pisess_sessions"
	RunSessions     = "pisess_last_run_sessions"
	Refused         = "pisess_refused_sessions"
	ReadBytes       = "pisess_last_run_read_bytes"
	WrittenBytes    = "pisess_last_run_written_bytes"
	JournalBytes    = "pisess_journal_bytes"
	QuarantineBytes = "pisess_quarantine_bytes"
)

// Label names.
const (
	LabelCommand = "command"
	LabelTree    = "tree"
	LabelClass   = "class"
	LabelOutcome = "outcome"
)

type family struct {
	name, help string
	labels     []string
}

var families = []family{
	{RunStart, "When the last run of the command started (Unix time).", []string{LabelCommand}},
	{RunEnd, "When the last run of the command ended (Unix time).", []string{LabelCommand}},
	{RunDuration, "How long the last run of the command took.", []string{LabelCommand}},
	{RunExitStatus, "Exit status of the last run: 0 clean, 1 all problems repaired, 4 problems left, 8 could not run or interrupted, 16 usage error, 32 tree locked.", []string{LabelCommand}},
	{LastSuccess, "When a run of the command last ended with exit status 0 or 1 (Unix time; 0 if none is known).", []string{LabelCommand}},
	{Sessions, "Sessions of the tree by status class (migrated, stale, unmigrated, corrupt, partial), as the last run left them.", []string{LabelCommand, LabelTree, LabelClass}},
	{RunSessions, "Sessions of the tree by what the last run did to them (migrate: done, verified, skipped, left, refused, busy, failed).", []string{LabelCommand, LabelTree, LabelOutcome}},
	{Refused, "Sessions of the tree the reference refuses: notices, pi keeps reading them as JSONL.", []string{LabelCommand, LabelTree}},
	{ReadBytes, "Bytes of the session files the last run read in full (the sessions it migrated, refreshed or verified).", []string{LabelCommand, LabelTree}},
	{WrittenBytes, "Frame bytes of the sidecars the last run installed (a whole sidecar, also when a refresh appended to it).", []string{LabelCommand, LabelTree}},
	{JournalBytes, "Bytes of the tree's journal (.pisess/journal.jsonl).", []string{LabelCommand, LabelTree}},
	{QuarantineBytes, "Bytes held in the tree's quarantine (.pisess/quarantine/).", []string{LabelCommand, LabelTree}},
}

// Family is one metric as the file declares it: its name, its HELP text
// and its labels. The man page lists them from Families.
type Family struct {
	Name, Help string
	Labels     []string
}

// Families are the metrics Write writes, in the file's order.
func Families() []Family {
	out := make([]Family, len(families))
	for i, f := range families {
		out[i] = Family{Name: f.name, Help: f.help, Labels: append([]string(nil), f.labels...)}
	}
	return out
}

// Write replaces the metrics file at path with the series of run and
// trees, and those of other commands found in the file it replaces. When
// the run did not succeed, its last success time is carried over from
// that file too.
func Write(path string, run Run, trees []Tree) error {
	unlock, err := lockDir(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer unlock()
	prev, err := Read(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		// A file that does not parse is replaced: what it held is lost,
		// what this run says is not.
		prev = nil
	}
	reg := prometheus.NewRegistry()
	vecs := map[string]*prometheus.GaugeVec{}
	for _, f := range families {
		vecs[f.name] = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: f.name, Help: f.help}, f.labels)
		reg.MustRegister(vecs[f.name])
	}
	cmd := run.Command
	vecs[RunStart].WithLabelValues(cmd).Set(unixSeconds(run.Start))
	vecs[RunEnd].WithLabelValues(cmd).Set(unixSeconds(run.End))
	vecs[RunDuration].WithLabelValues(cmd).Set(run.End.Sub(run.Start).Seconds())
	vecs[RunExitStatus].WithLabelValues(cmd).Set(float64(run.ExitStatus))
	success := 0.0
	if run.Succeeded() {
		success = unixSeconds(run.End)
	} else if v, ok := Value(prev, LastSuccess, map[string]string{LabelCommand: cmd}); ok {
		success = v
	}
	vecs[LastSuccess].WithLabelValues(cmd).Set(success)
	seen := map[string]bool{}
	for _, t := range trees {
		// A label value must be UTF-8; a path need not be.
		tree := strings.ToValidUTF8(t.Tree, "\uFFFD")
		if seen[tree] {
			continue
		}
		seen[tree] = true
		for class, n := range t.Classes {
			vecs[Sessions].WithLabelValues(cmd, tree, class).Set(float64(n))
		}
		for outcome, n := range t.Outcomes {
			vecs[RunSessions].WithLabelValues(cmd, tree, outcome).Set(float64(n))
		}
		if t.Refused != nil {
			vecs[Refused].WithLabelValues(cmd, tree).Set(float64(*t.Refused))
		}
		if t.ReadBytes != nil {
			vecs[ReadBytes].WithLabelValues(cmd, tree).Set(float64(*t.ReadBytes))
		}
		if t.WrittenBytes != nil {
			vecs[WrittenBytes].WithLabelValues(cmd, tree).Set(float64(*t.WrittenBytes))
		}
		vecs[JournalBytes].WithLabelValues(cmd, tree).Set(float64(t.JournalBytes))
		vecs[QuarantineBytes].WithLabelValues(cmd, tree).Set(float64(t.QuarantineBytes))
	}
	carried := carriedOver(prev, cmd)
	if err := prometheus.WriteToTextfile(path, prometheus.Gatherers{reg, carried}); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// carriedOver is the series of the previous file that belong to other
// commands, under the names and help this version writes (a name it no
// longer writes is dropped).
func carriedOver(prev map[string]*dto.MetricFamily, cmd string) prometheus.GathererFunc {
	return func() ([]*dto.MetricFamily, error) {
		var out []*dto.MetricFamily
		for _, f := range families {
			old, ok := prev[f.name]
			if !ok || old.GetType() != dto.MetricType_GAUGE {
				continue
			}
			mf := &dto.MetricFamily{Name: old.Name, Help: &f.help, Type: old.Type}
			for _, m := range old.Metric {
				if labels := labelMap(m); labels[LabelCommand] != "" && labels[LabelCommand] != cmd && sameNames(labels, f.labels) {
					sort.Slice(m.Label, func(i, j int) bool { return m.Label[i].GetName() < m.Label[j].GetName() })
					mf.Metric = append(mf.Metric, m)
				}
			}
			if len(mf.Metric) > 0 {
				out = append(out, mf)
			}
		}
		return out, nil
	}
}

// Read parses a metrics file with the Prometheus text parser.
func Read(path string) (map[string]*dto.MetricFamily, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(f)
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", path, err)
	}
	return mfs, nil
}

// Value is the value of the series of family name whose labels are
// exactly labels.
func Value(mfs map[string]*dto.MetricFamily, name string, labels map[string]string) (float64, bool) {
	mf, ok := mfs[name]
	if !ok {
		return 0, false
	}
	for _, m := range mf.Metric {
		got := labelMap(m)
		if len(got) != len(labels) {
			continue
		}
		match := true
		for k, v := range labels {
			if got[k] != v {
				match = false
				break
			}
		}
		if match {
			switch {
			case m.Gauge != nil:
				return m.Gauge.GetValue(), true
			case m.Untyped != nil:
				return m.Untyped.GetValue(), true
			case m.Counter != nil:
				return m.Counter.GetValue(), true
			}
		}
	}
	return 0, false
}

func labelMap(m *dto.Metric) map[string]string {
	out := make(map[string]string, len(m.Label))
	for _, l := range m.Label {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

// sameNames reports whether labels has exactly the names given.
func sameNames(labels map[string]string, names []string) bool {
	if len(labels) != len(names) {
		return false
	}
	for _, n := range names {
		if _, ok := labels[n]; !ok {
			return false
		}
	}
	return true
}

func unixSeconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

// lockDir takes an advisory lock on the metrics file's directory, so that
// two runs (migrate and prune, say) never both read the same previous file
// and one of them drop the other's series. The directory rather than a
// lock file beside the metrics: nothing is left in the collector's
// directory.
func lockDir(dir string) (func(), error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", dir, err)
	}
	if err := unix.Flock(fd, unix.LOCK_EX); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("lock %s: %w", dir, err)
	}
	return func() { unix.Close(fd) }, nil
}

// Check reports whether a metrics file can be written at path: its
// directory exists and this process may create files in it. A run checks
// before it starts, so that a wrong --metrics-file fails the run at once
// (as a wrong --log-file does) rather than after the work.
func Check(path string) error {
	dir := filepath.Dir(path)
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return fmt.Errorf("%s is a directory", path)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory", dir)
	}
	if err := unix.Access(dir, unix.W_OK|unix.X_OK); err != nil {
		return fmt.Errorf("%s: cannot create files in it: %w", dir, err)
	}
	return nil
}
