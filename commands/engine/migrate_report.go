package engine

import (
	"pisess/readers/discover"
	"pisess/verify"
)

// What Migrate returns: a result per session and the run's totals (which
// each tree's end record keeps too).

// PlanAction is what migrate plans for one session.
type PlanAction string

const (
	PlanMigrate     PlanAction = "migrate"      // no sidecar yet
	PlanRefresh     PlanAction = "refresh"      // the sidecar is stale (pi wrote the session since)
	PlanSkip        PlanAction = "skip"         // the sidecar is fresh
	PlanNeedsRepair PlanAction = "needs_repair" // corrupt or partial sidecar, or leftovers: fsck's
	PlanRefuse      PlanAction = "refuse"       // the session cannot be migrated
)

// Outcome is what happened to one session.
type Outcome string

const (
	OutcomeDone    Outcome = "done"     // migrated or refreshed, verified, installed
	OutcomeChecked Outcome = "verified" // dry run: built and verified outside the tree
	OutcomeSkipped Outcome = "skipped"  // nothing to do
	OutcomeLeft    Outcome = "left"     // needs repair: reported, left for fsck
	OutcomeRefused Outcome = "refused"
	OutcomeBusy    Outcome = "busy"   // the session lock stayed held
	OutcomeFailed  Outcome = "failed" // an error; nothing installed
	// An interrupted run's sessions (issue 34 §3), begun (nothing
	// installed) or not: no failure, the next run does them.
	OutcomeInterrupted Outcome = "interrupted"
	OutcomeNotStarted  Outcome = "not_started"
)

// ErrorInfo is a session's error, for --json.
type ErrorInfo struct {
	Class   string `json:"class"`
	Message string `json:"message"`
	Line    int64  `json:"line,omitempty"`
}

// VerificationInfo is the three verification flags, for --json.
type VerificationInfo struct {
	EntryCountMatch bool `json:"entryCountMatch"`
	HashChainMatch  bool `json:"hashChainMatch"`
	IndexConsistent bool `json:"indexConsistent"`
}

// SessionResult is one session of a migrate run.
type SessionResult struct {
	Path         string     `json:"path"`
	SourceFormat string     `json:"sourceFormat"`
	Action       PlanAction `json:"action"`
	// Class is the sidecar's status class as the run found it, when the
	// plan read it (the metrics count sessions by class).
	Class        verify.Class      `json:"class,omitempty"`
	Reason       string            `json:"reason"`
	Outcome      Outcome           `json:"outcome"`
	Entries      uint64            `json:"entries"`
	Bytes        uint64            `json:"bytes"`
	SourceBytes  int64             `json:"sourceBytes"`
	Verification *VerificationInfo `json:"verification,omitempty"`
	Sidecar      string            `json:"sidecar,omitempty"`
	Displaced    string            `json:"displaced,omitempty"`
	Notes        []string          `json:"notes,omitempty"`
	Error        *ErrorInfo        `json:"error,omitempty"`
	// Incremental: refreshed in place (refresh.go). Healed: the sidecar was
	// damaged and rebuilt, the damaged one quarantined (issue 34 §2).
	Incremental bool `json:"incremental,omitempty"`
	Healed      bool `json:"healed,omitempty"`
	heal        bool // the plan's
	// For rollback.Displaced's Database rule: the entries of the sidecar a
	// SQLite session's build replaces, the new chain after as many, and the
	// session's id.
	prefixEntries         uint64
	prefixChain, headerID string
	// syncDirs are the directories the move of a kept displaced sidecar
	// changed, synced once at the end of the run.
	syncDirs []string
}

// Problem reports whether the session counts against a clean exit. A
// refused session is one only when strict: real trees always hold some,
// pi keeps using them as JSONL, and a cron run must not fail on them
// forever.
func (s SessionResult) Problem(strict bool) bool {
	switch s.Outcome {
	case OutcomeFailed, OutcomeBusy, OutcomeLeft:
		return true
	case OutcomeRefused:
		return strict
	}
	return false
}

// MigrateTotals counts sessions by outcome and action.
type MigrateTotals struct {
	Sessions  int `json:"sessions"`
	Migrated  int `json:"migrated"`
	Refreshed int `json:"refreshed"`
	// Healed counts the refreshed sidecars that were damaged (Healed).
	Healed      int    `json:"healed"`
	Verified    int    `json:"verified"` // dry run
	Skipped     int    `json:"skipped"`
	NeedsRepair int    `json:"needsRepair"`
	Refused     int    `json:"refused"`
	Busy        int    `json:"busy"`
	Failed      int    `json:"failed"`
	Interrupted int    `json:"interrupted"`
	NotStarted  int    `json:"notStarted"`
	Entries     uint64 `json:"entries"`
	Bytes       uint64 `json:"bytes"`
	SourceBytes int64  `json:"sourceBytes"`
}

// MigrateReport is the result of Migrate.
type MigrateReport struct {
	CorrelationID string          `json:"correlationId"`
	DryRun        bool            `json:"dryRun"`
	Trees         []string        `json:"trees"`
	Sessions      []SessionResult `json:"sessions"`
	Totals        MigrateTotals   `json:"totals"`
	// Skipped are entries discovery did not take as sessions.
	Skipped []discover.Skipped `json:"skippedEntries,omitempty"`
	// Strict: sessions the reference refuses count as problems (exit 4);
	// without it they are notices (pi keeps reading them as JSONL).
	Strict bool `json:"strict"`
	// Healed is what the run repaired of an interrupted run's leftovers
	// before planning, one per tree that had any.
	Healed []HealReport `json:"healed,omitempty"`
}

// Tally implements Report: refused, failed, busy and needs-repair sessions
// are problems left.
func (r MigrateReport) Tally() Tally {
	n := 0
	for _, s := range r.Sessions {
		if s.Problem(r.Strict) {
			n++
		}
	}
	return Tally{Problems: n}
}

// counts are t by name, as the run's end record keeps them: installed is
// what `pisess runs` lists as the sidecars a run installed.
func (t MigrateTotals) counts() map[string]int64 {
	return map[string]int64{"sessions": int64(t.Sessions), "installed": int64(t.Migrated + t.Refreshed),
		"migrated": int64(t.Migrated), "refreshed": int64(t.Refreshed), "healed": int64(t.Healed),
		"skipped": int64(t.Skipped), "needsRepair": int64(t.NeedsRepair), "refused": int64(t.Refused),
		"busy": int64(t.Busy), "failed": int64(t.Failed), "interrupted": int64(t.Interrupted), "notStarted": int64(t.NotStarted)}
}

func totals(list []SessionResult) MigrateTotals {
	var t MigrateTotals
	t.Sessions = len(list)
	for _, s := range list {
		t.Entries += s.Entries
		t.Bytes += s.Bytes
		t.SourceBytes += s.SourceBytes
		switch s.Outcome {
		case OutcomeDone:
			if s.Action == PlanRefresh || s.Displaced != "" {
				t.Refreshed++
				if s.Healed {
					t.Healed++
				}
			} else {
				t.Migrated++
			}
		case OutcomeChecked:
			t.Verified++
		case OutcomeSkipped:
			t.Skipped++
		case OutcomeLeft:
			t.NeedsRepair++
		case OutcomeRefused:
			t.Refused++
		case OutcomeBusy:
			t.Busy++
		case OutcomeFailed:
			t.Failed++
		case OutcomeInterrupted:
			t.Interrupted++
		case OutcomeNotStarted:
			t.NotStarted++
		}
	}
	return t
}

// ClassSourceChanged is the report's error class of a session whose
// source changed while the run read it (readers.ErrSourceChanged).
const ClassSourceChanged = "source_changed"
