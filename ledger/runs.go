package ledger

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"pisess/writers/wire"
)

// RunInfo is one run of a tree's journal, as `pisess runs` lists it. A run
// with run records (RunRecord) is described by them: its command, its
// start and end, its counts (the end's summary); a rollback of it is not
// part of it. For a journal of an older pisess, the run's other records
// say what they can.
type RunInfo struct {
	CorrelationID string `json:"correlationId"`
	// Command is what the run was: migrate, upgrade or fsck --repair
	// (from its start record; else guessed from its records, "" when they
	// do not say).
	Command string `json:"command"`
	Start   string `json:"start"` // its start record's time, else its first record's
	End     string `json:"end"`   // its end record's time, else its last record's (rollback records excluded)
	// Sessions is how many sessions the run has records of.
	Sessions  int `json:"sessions"`
	Completed int `json:"completed"` // completed/ok events: sidecars installed
	Failed    int `json:"failed"`
	Upgraded  int `json:"upgraded"`
	Repairs   int `json:"repairs"` // repair and quarantined notes
	// Discarded is how many displaced sidecars the run did not keep.
	Discarded  int    `json:"discarded"`
	RolledBack bool   `json:"rolledBack"`
	RollbackAt string `json:"rollbackAt,omitempty"`
	// Interrupted: the run began and never ended in order (killed: its
	// start record has no end, the golang-migrate "dirty" bit), or ended
	// stopped by an interrupt. HealedBy is the later run that healed what
	// a killed one left (its end record names it), "" while none has.
	Interrupted bool   `json:"interrupted"`
	HealedBy    string `json:"healedBy,omitempty"`
	// QuarantineBytes is what the run's quarantine directory holds.
	QuarantineBytes int64 `json:"quarantineBytes"`
}

// runAcc accumulates one run's records.
type runAcc struct {
	info       RunInfo
	start, end time.Time
	lastAny    time.Time // the last record, rollback records included
	sessions   map[string]bool
	planned    bool
	badTime    bool
	// From its run records: started (a start record), ended (an end
	// record, end), and whether a rollback's bracket is open.
	started, ended bool
	endRec         *RunRecord
	inRollback     bool
}

// TreeRuns is one tree's runs, oldest first.
type TreeRuns struct {
	Root string    `json:"root"`
	Runs []RunInfo `json:"runs"`
	// BadLines is how many journal lines do not parse (fsck reports them).
	BadLines int `json:"badLines"`
}

// Runs lists the runs the journal of each tree at roots records (issue
// 12, item 7), in the order of roots. It only reads: no lock, nothing
// written.
func Runs(ctx context.Context, roots []string) ([]TreeRuns, error) {
	out := []TreeRuns{}
	for _, root := range roots {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		runs, bad, err := JournalRuns(root)
		if err != nil {
			return out, err
		}
		out = append(out, TreeRuns{Root: root, Runs: runs, BadLines: bad})
	}
	return out, nil
}

// JournalRuns reads a tree's journal into runs, oldest first.
func JournalRuns(root string) ([]RunInfo, int, error) {
	accs, order, bad, err := scanRuns(root)
	if err != nil {
		return nil, 0, err
	}
	healedBy := map[string]string{}
	for _, id := range order {
		if e := accs[id].endRec; e != nil {
			for _, h := range e.Healed {
				healedBy[h] = id
			}
		}
	}
	out := make([]RunInfo, 0, len(order))
	for _, id := range order {
		a := accs[id]
		a.info.Sessions = len(a.sessions)
		switch {
		case a.started:
			// Command from the start record.
		case a.info.Upgraded > 0:
			a.info.Command = "upgrade"
		case a.info.Repairs > 0:
			// fsck --repair (or migrate's self-healing) also rebuilds
			// through the migrate pipeline; only repairs write these.
			a.info.Command = "fsck --repair"
		case a.planned:
			a.info.Command = "migrate"
		}
		if !a.start.IsZero() {
			a.info.Start = wire.FormatTimestamp(a.start)
			a.info.End = wire.FormatTimestamp(a.end)
		}
		if e := a.endRec; e != nil {
			// The run's own summary, not a count of its records (a
			// refusal is journaled as a failed event).
			a.info.Completed, a.info.Failed = int(e.Totals["installed"]), int(e.Totals["failed"])
			a.info.Interrupted = e.Interrupted
		}
		if a.started && !a.ended {
			a.info.Interrupted, a.info.HealedBy = true, healedBy[id]
		}
		a.info.QuarantineBytes = DirBytes(Quarantine(root, id))
		out = append(out, a.info)
	}
	return out, bad, nil
}

// scanRuns groups the journal's records by correlation id.
func scanRuns(root string) (map[string]*runAcc, []string, int, error) {
	j, err := OpenJournal(root)
	if err != nil {
		return nil, nil, 0, fmt.Errorf("journal of %s: %w", root, err)
	}
	accs := map[string]*runAcc{}
	var order []string
	badLines, err := j.Scan(func(r Record) error {
		id := r.CorrelationID()
		a := accs[id]
		if a == nil {
			a = &runAcc{info: RunInfo{CorrelationID: id}, sessions: map[string]bool{}}
			accs[id] = a
			order = append(order, id)
		}
		if rr := r.Run; rr != nil {
			a.runRecord(rr)
			return nil
		}
		at, session := "", r.Session()
		rollbackRec := a.inRollback
		if ev := r.Event; ev != nil {
			at = ev.At
			switch ev.Phase {
			case wire.PhasePlanned:
				a.planned = true
			case wire.PhaseCompleted:
				if ev.Outcome == wire.OutcomeOK {
					a.info.Completed++
				}
			case wire.PhaseFailed:
				a.info.Failed++
			case wire.PhaseRollback:
				rollbackRec = true
				a.info.RolledBack = true
			}
		}
		if n := r.Note; n != nil {
			at = n.At
			switch n.Kind {
			case NoteUpgraded:
				a.info.Upgraded++
			case NoteRepair, NoteQuarantined:
				// A rollback's notes (of an older pisess: no bracket)
				// are the rollback's, not repairs of the run.
				if !rollbackRec && !strings.HasPrefix(n.Detail, rollbackDetail) {
					a.info.Repairs++
				} else {
					rollbackRec = true
				}
			case NoteRestored:
				rollbackRec = rollbackRec || strings.HasPrefix(n.Detail, rollbackDetail)
			case NoteDiscarded:
				a.info.Discarded++
			}
		}
		t, err := time.Parse(time.RFC3339Nano, at)
		if err != nil {
			a.badTime = true
			return nil
		}
		if t.After(a.lastAny) {
			a.lastAny = t
		}
		if rollbackRec {
			if a.info.RollbackAt == "" || at > a.info.RollbackAt {
				a.info.RollbackAt = at
			}
			return nil
		}
		if session != "" {
			a.sessions[session] = true
		}
		a.saw(t)
		return nil
	})
	if err != nil {
		return nil, nil, 0, fmt.Errorf("journal of %s: %w", root, err)
	}
	return accs, order, len(badLines), nil
}

// rollbackDetail begins the detail of every note a rollback writes.
const rollbackDetail = "rollback"

// runRecord accounts one run record of the run.
func (a *runAcc) runRecord(r *RunRecord) {
	t, err := time.Parse(time.RFC3339Nano, r.At)
	if err != nil {
		a.badTime = true
		return
	}
	if t.After(a.lastAny) {
		a.lastAny = t
	}
	switch {
	case r.Command == "rollback" && r.Phase == RunStart:
		a.inRollback = true
	case r.Command == "rollback":
		a.inRollback = false
		a.info.RollbackAt = r.At
	case r.Phase == RunStart:
		a.started, a.info.Command = true, r.Command
		a.start = t
	default:
		a.ended, a.endRec = true, r
		a.info.Command = cmp.Or(a.info.Command, r.Command)
		a.endAt(t)
	}
}

// saw widens the run's span by a record of time t; once its end record is
// read, that is its end.
func (a *runAcc) saw(t time.Time) {
	if a.start.IsZero() || t.Before(a.start) && !a.started {
		a.start = t
	}
	if t.After(a.end) && !a.ended {
		a.end = t
	}
}

// endAt sets the run's end from its end record.
func (a *runAcc) endAt(t time.Time) {
	a.end = t
	if a.start.IsZero() {
		a.start = t
	}
}

// UnendedRuns returns the runs of j that began (a start record) and never
// ended: runs that died, since a run that holds the tree lock is the only
// one running.
func UnendedRuns(j *Journal) []string {
	open := map[string]bool{}
	var order []string
	_, _ = j.Scan(func(r Record) error {
		rr := r.Run
		if rr == nil || rr.Command == "rollback" {
			return nil
		}
		switch rr.Phase {
		case RunStart:
			if !open[rr.CorrelationID] {
				order = append(order, rr.CorrelationID)
			}
			open[rr.CorrelationID] = true
		case RunEnd:
			open[rr.CorrelationID] = false
		}
		return nil
	})
	var out []string
	for _, id := range order {
		if open[id] {
			out = append(out, id)
		}
	}
	return out
}

// TreeSummary is what `pisess status` says of a tree as a whole: its
// journal and quarantine sizes and its last run.
type TreeSummary struct {
	Root            string   `json:"root"`
	JournalBytes    int64    `json:"journalBytes"`
	QuarantineBytes int64    `json:"quarantineBytes"`
	Runs            int      `json:"runs"`
	LastRun         *RunInfo `json:"lastRun,omitempty"`
}

// Summary reads a tree's journal for its runs and sizes its journal and
// quarantine (read-only: a tree without .pisess has none). A journal that
// cannot be read is an error, never a tree without runs.
func Summary(root string) (TreeSummary, error) {
	st := TreeSummary{Root: root}
	if fi, err := os.Lstat(JournalPath(root)); err == nil {
		st.JournalBytes = fi.Size()
	}
	st.QuarantineBytes = DirBytes(filepath.Join(root, PisessDir, QuarantineDir))
	runs, _, err := JournalRuns(root)
	if err != nil {
		return st, err
	}
	if len(runs) > 0 {
		st.Runs = len(runs)
		last := runs[0]
		for _, r := range runs[1:] {
			if r.End > last.End {
				last = r
			}
		}
		st.LastRun = &last
	}
	return st, nil
}

// DirBytes is the size of the regular files under dir (0 when missing);
// symlinks are not followed.
func DirBytes(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// LastMigrations maps each session path of a tree to the correlation id
// of the last run that completed its migration, reading the journal once
// (LastMigration per session would read it once per session). A journal
// that cannot be read is an error, never a tree without runs.
func LastMigrations(tree string) (map[string]string, error) {
	out := map[string]string{}
	j, err := OpenJournal(tree)
	if err != nil {
		return out, err
	}
	_, err = j.Scan(func(r Record) error {
		if ev := r.Event; ev != nil && ev.Phase == wire.PhaseCompleted && ev.Outcome == wire.OutcomeOK {
			out[filepath.Clean(ev.SourcePath)] = ev.CorrelationID
		}
		return nil
	})
	return out, err
}
