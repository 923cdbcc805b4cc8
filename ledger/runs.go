package ledger

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"pisess/writers/wire"
)

// RunInfo is one run of a tree's journal, as `pisess runs` lists it.
type RunInfo struct {
	CorrelationID string `json:"correlationId"`
	// Command is what the run's records show it was: migrate, upgrade or
	// fsck --repair ("" when they do not say).
	Command string `json:"command"`
	Start   string `json:"start"` // the first record's time
	End     string `json:"end"`   // the last record's time, rollback records excluded
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
}

// JournalRuns reads a tree's journal into runs, oldest first.
func JournalRuns(root string) ([]RunInfo, int, error) {
	accs, order, bad, err := scanRuns(root)
	if err != nil {
		return nil, 0, err
	}
	out := make([]RunInfo, 0, len(order))
	for _, id := range order {
		a := accs[id]
		a.info.Sessions = len(a.sessions)
		switch {
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
		at, session := "", r.Session()
		rollbackRec := false
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
				a.info.Repairs++
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
		if a.start.IsZero() || t.Before(a.start) {
			a.start = t
		}
		if t.After(a.end) {
			a.end = t
		}
		return nil
	})
	if err != nil {
		return nil, nil, 0, fmt.Errorf("journal of %s: %w", root, err)
	}
	return accs, order, len(badLines), nil
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
