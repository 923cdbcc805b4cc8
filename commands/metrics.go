package commands

import (
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"pisess/commands/engine"
	"pisess/commands/metrics"
	"pisess/ledger"
	"pisess/verify"
	"pisess/writers/upgrade"
)

// --metrics-file: the commands that act on trees write their run's metrics
// (package metrics) at the end of every run, a failed or interrupted one
// included. The values come from the run's typed report; only the sizes of
// each tree's journal and quarantine, which the reports of most commands do
// not carry, are measured, by the process that ran the command (as the
// tree's owner when root runs it over someone else's tree).

// envMetricsFD is the descriptor on which a child run as a tree's owner
// hands its trees' metrics to the root parent, which alone may write the
// metrics file.
const envMetricsFD = "PISESS_METRICS_FD"

// maxChildMetrics bounds what the parent reads from a child: the child
// runs as the tree's owner, who may be hostile.
const maxChildMetrics = 16 << 20

// runMetrics is a run's metrics: where they go and what its children sent.
type runMetrics struct {
	file     string   // --metrics-file, absolute; "" in a child
	toParent *os.File // in a child run as a tree's owner
	mu       sync.Mutex
	children []metrics.Tree
}

// setupMetrics checks --metrics-file before the run starts (Before).
func (r *run) setupMetrics(c *cli.Context) error {
	cmd := findCommand(c.App, c.Args().First())
	if cmd == nil {
		return nil
	}
	if _, onTrees := treeCommands[cmd.Name]; !onTrees {
		return nil
	}
	if os.Getenv(envOwnerChild) != "" {
		// The parent writes the file; the child hands it its trees.
		if n, err := strconv.Atoi(os.Getenv(envMetricsFD)); err == nil && n > 2 {
			r.metrics = &runMetrics{toParent: os.NewFile(uintptr(n), "metrics")}
		}
		return nil
	}
	file := c.String("metrics-file")
	if file == "" || dryRunArg(r.args) {
		// A dry run is not the job the metrics watch: it would pass for
		// one, and a success at that.
		return nil
	}
	abs, err := filepath.Abs(file)
	if err == nil {
		err = metrics.Check(abs)
	}
	if err != nil {
		return fmt.Errorf("--metrics-file: %w", err)
	}
	r.metrics = &runMetrics{file: abs}
	return nil
}

// dryRunArg reports whether --dry-run (-n) appears among the arguments
// before "--", as wantsJSON looks for --json: a root parent that runs
// the command in children never parses the command's flags.
func dryRunArg(args []string) bool {
	for _, a := range args[min(1, len(args)):] {
		switch a {
		case "--":
			return false
		case "--dry-run", "-dry-run", "-n", "--n", "--dry-run=true", "-dry-run=true", "-n=true":
			return true
		}
	}
	return false
}

// finishMetrics writes the run's metrics file, or, in a child, hands its
// trees to the parent; it returns the run's exit status, made 8 when the
// file cannot be written (the monitoring would go blind), unless a more
// urgent status already stands.
func (r *run) finishMetrics(code int) int {
	m := r.metrics
	if m == nil || r.command == "" {
		return code
	}
	m.mu.Lock()
	trees := append(m.children, treeMetrics(r.report)...)
	m.mu.Unlock()
	if m.toParent != nil {
		// Nothing to do if the parent went away: the run's outcome is
		// the exit status.
		_ = json.NewEncoder(m.toParent).Encode(trees)
		_ = m.toParent.Close()
		return code
	}
	run := metrics.Run{Command: r.command, Start: r.started, End: time.Now(), ExitStatus: code}
	if err := metrics.Write(m.file, run, trees); err != nil {
		fmt.Fprintf(r.stderr, "pisess: --metrics-file: %v\n", err)
		if code != ExitUsage && code != ExitLocked {
			return ExitOperational
		}
	}
	return code
}

// childMetrics lets cmd, a child run as uid, hand its trees' metrics back
// through a pipe; the returned function, called once the child has exited,
// adds them to the run's. A tree is taken only if uid owns it: the child
// is the owner's process, and may say anything of other trees.
func (r *run) childMetrics(cmd *exec.Cmd, uid int) (collect func()) {
	m := r.metrics
	if m == nil || m.file == "" {
		return func() {}
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		// The run goes on; its metrics will lack these trees.
		r.log.Warn().Err(err).Msg("metrics pipe to the tree owner's run")
		return func() {}
	}
	cmd.ExtraFiles = append(cmd.ExtraFiles, pw)
	cmd.Env = append(cmd.Env, fmt.Sprintf("%s=%d", envMetricsFD, 2+len(cmd.ExtraFiles)))
	var got []metrics.Tree
	done := make(chan struct{})
	go func() {
		// Read while the child runs: it may write more than a pipe holds.
		defer close(done)
		defer pr.Close()
		var trees []metrics.Tree
		if err := json.NewDecoder(io.LimitReader(pr, maxChildMetrics)).Decode(&trees); err != nil {
			return
		}
		for _, t := range trees {
			if ownedDir(t.Tree, uid) {
				got = append(got, t)
			}
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	return func() {
		_ = pw.Close()
		<-done
		m.mu.Lock()
		m.children = append(m.children, got...)
		m.mu.Unlock()
	}
}

// ownedDir reports whether path is a clean absolute path to a directory
// that uid owns.
func ownedDir(path string, uid int) bool {
	if !filepath.IsAbs(path) || filepath.Clean(path) != path {
		return false
	}
	fi, err := os.Lstat(path)
	if err != nil || !fi.IsDir() {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && int(st.Uid) == uid
}

// treeMetrics turns a command's report into one metrics.Tree per tree.
func treeMetrics(rep engine.Report) []metrics.Tree {
	var ts treeSet
	switch rep := rep.(type) {
	case engine.MigrateReport:
		ts = treeSet{outcomes: migrateOutcomes, classes: true, migrate: true}
		ts.roots(rep.Trees)
		for _, s := range rep.Sessions {
			t := ts.of(s.Path)
			t.Outcomes[string(s.Outcome)]++
			if c := classAfterMigrate(s); c != "" {
				t.Classes[string(c)]++
			}
			switch s.Outcome {
			case engine.OutcomeRefused:
				*t.Refused++
			case engine.OutcomeDone:
				*t.WrittenBytes += int64(s.Bytes)
				*t.ReadBytes += s.SourceBytes
			case engine.OutcomeChecked:
				*t.ReadBytes += s.SourceBytes
			}
		}
	case statusReport:
		// The report has the sizes: nothing is measured again.
		ts = treeSet{classes: true, sized: true}
		for _, tr := range rep.Trees {
			t := ts.add(tr.Root)
			t.JournalBytes, t.QuarantineBytes = tr.JournalBytes, tr.QuarantineBytes
		}
		for _, s := range rep.Sessions {
			ts.of(s.Tree).Classes[string(s.Class)]++
		}
	case fsckReport:
		ts = treeSet{outcomes: fsckOutcomes, classes: true}
		for _, tr := range rep.Trees {
			t := ts.add(tr.Root)
			for _, s := range tr.Sessions {
				class := s.Class
				if s.After != "" {
					class = s.After
				}
				t.Classes[string(class)]++
				t.Outcomes[fsckOutcome(s.Findings)]++
			}
		}
	case verifyReport:
		ts = treeSet{outcomes: verifyOutcomes}
		ts.roots(rep.Trees)
		for _, s := range rep.Sessions {
			outcome := "failed"
			switch {
			case s.Skipped:
				outcome = "skipped"
			case s.Verified:
				outcome = "verified"
			case s.Stale:
				outcome = "stale"
			}
			ts.of(s.Path).Outcomes[outcome]++
		}
	case upgradeReport:
		ts = treeSet{outcomes: upgradeOutcomes, refused: true}
		ts.roots(rep.Trees)
		for _, f := range rep.Files {
			t := ts.of(f.Path)
			t.Outcomes[string(f.Status)]++
			if f.Status == upgrade.StatusRefused {
				*t.Refused++
			}
		}
	case rollbackReport:
		ts = treeSet{outcomes: rollbackOutcomes}
		for _, s := range rep.Sessions {
			ts.of(s.Tree).Outcomes[s.Action]++
		}
	case pruneReport:
		for _, tr := range rep.Trees {
			ts.add(tr.Root)
		}
	case runsReport:
		for _, tr := range rep.Trees {
			ts.add(tr.Root)
		}
	}
	if !ts.sized {
		for i := range ts.list {
			t := &ts.list[i]
			t.JournalBytes, t.QuarantineBytes = treeBytes(t.Tree)
		}
	}
	return ts.list
}

// The outcomes each command reports, every one written (zeros included)
// so that a series never vanishes from the monitoring between runs.
var (
	migrateOutcomes = []string{string(engine.OutcomeDone), string(engine.OutcomeChecked), string(engine.OutcomeSkipped),
		string(engine.OutcomeLeft), string(engine.OutcomeRefused), string(engine.OutcomeBusy), string(engine.OutcomeFailed),
		string(engine.OutcomeInterrupted), string(engine.OutcomeNotStarted)}
	fsckOutcomes     = []string{"clean", "repaired", "left"}
	verifyOutcomes   = []string{"verified", "stale", "failed", "skipped"}
	upgradeOutcomes  = []string{string(upgrade.StatusUpgraded), string(upgrade.StatusPlanned), string(upgrade.StatusCurrent), string(upgrade.StatusSkipped), string(upgrade.StatusRefused), string(upgrade.StatusBusy), string(upgrade.StatusChanged), string(upgrade.StatusFailed)}
	rollbackOutcomes = []string{"rolled-back", "already-rolled-back", "nothing-installed", "would-roll-back", "refused", "busy", "failed"}
	statusClasses    = []verify.Class{verify.ClassMigrated, verify.ClassStale, verify.ClassUnmigrated, verify.ClassCorrupt, verify.ClassPartial}
)

// classAfterMigrate is a session's status class once migrate is done with
// it: a sidecar it installed or found fresh is migrated; otherwise the
// class it found; unmigrated when it found no sidecar or the session is
// refused (pisess status says the same of both); "" when it did not look
// (leftovers of an interrupted run, which only fsck examines: counted by
// outcome only).
func classAfterMigrate(s engine.SessionResult) verify.Class {
	switch {
	case s.Outcome == engine.OutcomeDone || s.Outcome == engine.OutcomeSkipped:
		return verify.ClassMigrated
	case s.Class != "":
		return s.Class
	case s.Action == engine.PlanMigrate || s.Outcome == engine.OutcomeRefused:
		return verify.ClassUnmigrated
	}
	return ""
}

// fsckOutcome is what fsck did to a session: left (a problem it did not
// repair), repaired (it repaired something: a problem, or a stale sidecar
// it refreshed) or clean.
func fsckOutcome(fs []verify.FsckFinding) string {
	out := "clean"
	for _, f := range fs {
		switch {
		case !f.Notice && !f.Repaired:
			return "left"
		case f.Repaired:
			out = "repaired"
		}
	}
	return out
}

// treeSet collects a report's trees in their order, each with the
// measures its command takes, at zero until counted.
type treeSet struct {
	outcomes []string // every outcome the command reports; nil: none
	classes  bool     // the command classifies sessions
	refused  bool     // it counts refused sessions
	migrate  bool     // refused sessions, bytes read and written
	sized    bool     // the report gave the .pisess sizes
	list     []metrics.Tree
	idx      map[string]int
}

func (ts *treeSet) roots(roots []string) {
	for _, r := range roots {
		ts.add(r)
	}
}

// add returns the tree of root, adding it when it is new.
func (ts *treeSet) add(root string) *metrics.Tree {
	if i, ok := ts.idx[root]; ok {
		return &ts.list[i]
	}
	if ts.idx == nil {
		ts.idx = map[string]int{}
	}
	t := metrics.Tree{Tree: root}
	if ts.outcomes != nil {
		t.Outcomes = map[string]int{}
		for _, o := range ts.outcomes {
			t.Outcomes[o] = 0
		}
	}
	if ts.classes {
		t.Classes = map[string]int{}
		for _, c := range statusClasses {
			t.Classes[string(c)] = 0
		}
	}
	if ts.refused || ts.migrate {
		t.Refused = new(int)
	}
	if ts.migrate {
		t.ReadBytes, t.WrittenBytes = new(int64), new(int64)
	}
	ts.idx[root] = len(ts.list)
	ts.list = append(ts.list, t)
	return &ts.list[len(ts.list)-1]
}

// of returns the tree path lies in: the longest known root it is in, or
// the path itself taken as a root.
func (ts *treeSet) of(path string) *metrics.Tree {
	best := ""
	for root := range ts.idx {
		if (path == root || strings.HasPrefix(path, strings.TrimSuffix(root, "/")+"/")) && len(root) > len(best) {
			best = root
		}
	}
	if best == "" {
		best = path
	}
	return ts.add(best)
}

// treeBytes sizes a tree's journal and quarantine, without following a
// link (the tree's owner may have planted one).
func treeBytes(root string) (journal, quarantine int64) {
	if fi, err := os.Lstat(ledger.JournalPath(root)); err == nil && fi.Mode().IsRegular() {
		journal = fi.Size()
	}
	_ = filepath.WalkDir(filepath.Join(root, ledger.PisessDir, ledger.QuarantineDir), func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				quarantine += fi.Size()
			}
		}
		return nil
	})
	return journal, quarantine
}
