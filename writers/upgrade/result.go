package upgrade

import (
	"encoding/json"

	"pisess/readers"
)

// Status is what happened to one file.
type Status string

const (
	// StatusUpgraded: the file was rewritten as version 3.
	StatusUpgraded Status = "upgraded"
	// StatusPlanned: a dry run found a version 1 or 2 file; the Result
	// describes exactly what a real run writes.
	StatusPlanned Status = "would_upgrade"
	// StatusCurrent: the file is already version 3; nothing to do.
	StatusCurrent Status = "already_v3"
	// StatusRefused: the file cannot be upgraded without losing or
	// changing data (Problem says why and where); it was not touched.
	StatusRefused Status = "refused"
	// StatusBusy: the session lock stayed held for the whole timeout.
	StatusBusy Status = "busy"
	// StatusChanged: the file changed while it was upgraded (a concurrent
	// writer); it was left as that writer left it.
	StatusChanged Status = "changed"
	// StatusFailed: an operational error (I/O, permissions); Problem says
	// which step. The original is in place, unless Problem says otherwise.
	StatusFailed Status = "failed"
	// StatusSkipped: not a JSONL session (a SQLite one): there is nothing
	// to upgrade. Upgrade never returns it; callers that walk trees do.
	StatusSkipped Status = "skipped"
)

// Valid reports whether s is one of the statuses.
func (s Status) Valid() bool {
	switch s {
	case StatusUpgraded, StatusPlanned, StatusCurrent, StatusRefused, StatusBusy, StatusChanged, StatusFailed, StatusSkipped:
		return true
	}
	return false
}

// Problem is why a file was not upgraded, or why the reference cannot
// migrate the upgraded file. Line is the 1-based line of the original file
// (0 when not tied to a line).
//
// In Result.Reference, Line is a line of the upgraded file (what `pisess
// migrate` will name) and SourceLine the original line it came from.
type Problem struct {
	Line       int64         `json:"line,omitempty"`
	SourceLine int64         `json:"sourceLine,omitempty"`
	Class      readers.Class `json:"class"`
	Reason     string        `json:"reason"`
}

// AssignedID is an id given to an entry of a version-1 file.
type AssignedID struct {
	Line int64  `json:"line"` // line in the original file
	ID   string `json:"id"`
	// Replaced is the entry's own id member, overwritten as pi overwrites
	// it ("" when it had none, the normal case).
	Replaced string `json:"replaced,omitempty"`
	// Untyped is set when the reference's model cannot read the entry (or
	// its reference id is not deterministic): the id is pisess's
	// deterministic one (domain pisess.upgrade.untyped-entry-id.v1), and
	// Reason says why.
	Untyped bool   `json:"untyped,omitempty"`
	Reason  string `json:"reason,omitempty"`
}

// FirstKept is a version-1 compaction's firstKeptEntryIndex and what it
// became.
type FirstKept struct {
	Line  int64           `json:"line"`
	Index json.RawMessage `json:"firstKeptEntryIndex"`
	// ID is the firstKeptEntryId written, as JSON; empty when none is
	// (index 0, a session line, out of range, or a later entry without an
	// id member). Removed tells whether firstKeptEntryIndex was removed (it
	// is not when it is not a number).
	ID      json.RawMessage `json:"firstKeptEntryId,omitempty"`
	Removed bool            `json:"removed"`
}

// Reference says whether the reference can migrate the upgraded file.
type Reference struct {
	Migratable bool     `json:"migratable"`
	Problem    *Problem `json:"problem,omitempty"`
}

// Result is the report for one file.
type Result struct {
	Path   string `json:"path"`
	Status Status `json:"status"`
	// Version is the header version found: 1 (absent, null or 1), 2 or 3.
	Version int      `json:"version,omitempty"`
	Problem *Problem `json:"problem,omitempty"`

	// What was (or, in a dry run, would be) written. NewHeader is the new
	// header line.
	NewHeader     json.RawMessage `json:"newHeader,omitempty"`
	Entries       int             `json:"entries,omitempty"`
	IDs           []AssignedID    `json:"assignedIds,omitempty"`
	ParentsSet    int             `json:"parentsSet,omitempty"`
	RolesRenamed  []int64         `json:"rolesRenamed,omitempty"` // lines
	FirstKept     []FirstKept     `json:"firstKept,omitempty"`
	SessionLines  int             `json:"sessionLines,omitempty"` // header lines given version 3
	BlankLines    int             `json:"blankLinesDropped,omitempty"`
	CRLFLines     int             `json:"crlfLines,omitempty"`
	BOM           bool            `json:"bomDropped,omitempty"`
	NewlineAdded  bool            `json:"finalNewlineAdded,omitempty"`
	SourceSize    int64           `json:"sourceSize,omitempty"`
	SourceSHA256  string          `json:"sourceSha256,omitempty"`
	NewSize       int64           `json:"newSize,omitempty"`
	NewSHA256     string          `json:"newSha256,omitempty"`
	Reference     *Reference      `json:"reference,omitempty"`
	Quarantine    string          `json:"quarantinePath,omitempty"`
	RestoredAfter bool            `json:"restoredAfterConcurrentWrite,omitempty"`
	// LeftoversRemoved counts temps of earlier, interrupted upgrades of
	// this file that were removed.
	LeftoversRemoved int `json:"leftoversRemoved,omitempty"`
}

func (r *Result) refuse(line int64, class readers.Class, reason string) *Result {
	r.Status = StatusRefused
	r.Problem = &Problem{Line: line, Class: class, Reason: reason}
	return r
}

func (r *Result) fail(class readers.Class, reason string) *Result {
	r.Status = StatusFailed
	r.Problem = &Problem{Class: class, Reason: reason}
	return r
}

// Event is a fact the caller records in the tree journal (Options.Record).
type Event struct {
	Kind EventKind
	// Path is the session file.
	Path string
	// QuarantinePath holds the original bytes.
	QuarantinePath string
	// SHA256 is the original's digest, NewSHA256 the upgraded file's.
	SHA256, NewSHA256 string
	Detail            string
}

// EventKind says what an Event records.
type EventKind string

const (
	// EventUpgraded is recorded after the original is durable in the
	// quarantine and before the rename: the file holds either SHA256 (the
	// rename did not happen) or NewSHA256.
	EventUpgraded EventKind = "upgraded"
	// EventRestored is recorded when a change found after the rename made
	// pisess put the concurrent writer's version back at Path.
	EventRestored EventKind = "restored"
)

// Totals counts the files of an upgrade run by status.
type Totals struct {
	Files    int `json:"files"`
	Upgraded int `json:"upgraded"`
	Planned  int `json:"wouldUpgrade"`
	Current  int `json:"alreadyV3"`
	Skipped  int `json:"skipped"`
	Refused  int `json:"refused"`
	Busy     int `json:"busy"`
	Changed  int `json:"changed"`
	Failed   int `json:"failed"`
	// NotMigratable counts upgraded (or, in a dry run, upgradable) files
	// the reference still cannot migrate.
	NotMigratable int `json:"notMigratable"`
}

// Count totals files.
func Count(files []Result) Totals {
	t := Totals{Files: len(files)}
	for _, f := range files {
		switch f.Status {
		case StatusUpgraded:
			t.Upgraded++
		case StatusPlanned:
			t.Planned++
		case StatusCurrent:
			t.Current++
		case StatusSkipped:
			t.Skipped++
		case StatusRefused:
			t.Refused++
		case StatusBusy:
			t.Busy++
		case StatusChanged:
			t.Changed++
		case StatusFailed:
			t.Failed++
		}
		if f.Reference != nil && !f.Reference.Migratable &&
			(f.Status == StatusUpgraded || f.Status == StatusPlanned) {
			t.NotMigratable++
		}
	}
	return t
}

// RunTotals are t by name, as a run's end record keeps them
// (ledger.RunRecord.Totals).
func (t Totals) RunTotals() map[string]int64 {
	return map[string]int64{"files": int64(t.Files), "upgraded": int64(t.Upgraded), "refused": int64(t.Refused),
		"busy": int64(t.Busy), "changed": int64(t.Changed), "failed": int64(t.Failed)}
}
