package verify

import (
	"fmt"
	"pisess/readers/discover"
	"strings"
)

// Repair actions: what fsck --repair does about a finding. A finding's
// Action names one; its Repair says it in words (or, for ActionNone, what
// a person has to do instead).
type RepairAction string

const (
	// ActionNone: nothing pisess can do (a symlinked ancestor, a source the
	// reference refuses); Repair says what to do instead.
	ActionNone RepairAction = "none"
	// ActionCutTail: truncate a segment, the index or the store ledger
	// after its last whole line; the cut bytes go to the quarantine first.
	ActionCutTail RepairAction = "cut-torn-tail"
	// ActionRebuildIndex: rewrite index/offsets.jsonl from the frames (the
	// old index is copied to the quarantine first).
	ActionRebuildIndex RepairAction = "rebuild-index"
	// ActionRecomputeManifest: rewrite manifest.json from the frames (the
	// old one is copied to the quarantine first).
	ActionRecomputeManifest RepairAction = "recompute-manifest"
	// ActionChmod: directories 0700, files 0600.
	ActionChmod RepairAction = "chmod"
	// ActionChown: give the store to the session file's owner (as root).
	ActionChown RepairAction = "chown"
	// ActionFinishRollback: roll a pending rollback intent forward.
	ActionFinishRollback RepairAction = "finish-rollback"
	// ActionQuarantine: move the directory into the tree's quarantine.
	ActionQuarantine RepairAction = "quarantine"
	// ActionRestoreBackup: put a verified backup back as the sidecar.
	ActionRestoreBackup RepairAction = "restore-backup"
	// ActionRebuild: rebuild the sidecar from its source through the
	// migrate pipeline; the old one goes to the quarantine.
	ActionRebuild RepairAction = "rebuild-sidecar"
	// ActionRefresh: the same for a stale sidecar (pisess migrate does it
	// too: stale is pi's everyday state, not damage).
	ActionRefresh RepairAction = "refresh-sidecar"
	// ActionClearLock: take over the stale tree lock, whose holder died.
	ActionClearLock RepairAction = "clear-tree-lock"
	// ActionAcknowledge: copy an unparsable journal line to the quarantine
	// and acknowledge it with a journal note; the journal itself is never
	// rewritten.
	ActionAcknowledge RepairAction = "acknowledge-journal-line"
)

// Codes of the findings fsck adds to verify's (Code*): the tree's.
const (
	CodeTreeStaging   = "tree.staging"    // a <stem>.v2.staging.* left by an interrupted run
	CodeTreeBackup    = "tree.backup"     // a <stem>.v2.backup.* left by an interrupted cutover
	CodeTreeOrphan    = "tree.orphan"     // a sidecar, staging or backup directory whose session file is gone
	CodeTreeStaleLock = "tree.stale-lock" // .pisess/lock names a holder that died holding it
	CodeTreeJournal   = "tree.journal-line"
	CodeTreeUnknown   = "tree.unreadable" // something in the tree fsck could not examine
	CodeTreeWrongType = "tree.wrong-type" // .pisess, its lock or its journal is not of its type
	// CodeMoved is a move fsck --repair made that no other finding names
	// (the sidecar a rebuild displaced into the quarantine): every move
	// is reported.
	CodeMoved = "fsck.moved"
)

// FsckFinding is one thing fsck found: the file, the check that failed
// (Code: a verify code such as "index.torn-tail" or one of fsck's tree.*
// codes) and the repair that applies. A Notice is reported but is not a
// problem: it does not count toward the exit status (a source that the
// reference refuses, which pi keeps using as JSONL, is one).
type FsckFinding struct {
	Code    string       `json:"code"`
	Class   string       `json:"class,omitempty"` // the status class it implies, "" for none
	Session string       `json:"session,omitempty"`
	Path    string       `json:"path"`
	Segment uint64       `json:"segment,omitempty"`
	Offset  int64        `json:"offset,omitempty"`
	Line    int64        `json:"line,omitempty"`
	Detail  string       `json:"detail"`
	Action  RepairAction `json:"action"`
	Repair  string       `json:"repair"`
	Notice  bool         `json:"notice,omitempty"`
	// Repaired is set by --repair once the re-check no longer finds it.
	Repaired bool `json:"repaired"`
	// RepairError says why a repair that was tried did not succeed.
	RepairError string `json:"repairError,omitempty"`
}

func (f FsckFinding) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "[%s] %s", f.Code, f.Path)
	switch {
	case f.Segment > 0:
		fmt.Fprintf(&b, " (segment %d, offset %d)", f.Segment, f.Offset)
	case f.Line > 0:
		fmt.Fprintf(&b, " (line %d)", f.Line)
	}
	if f.Detail != "" {
		b.WriteString(": ")
		b.WriteString(f.Detail)
	}
	return b.String()
}

// Key identifies a finding across a check and its re-check.
func (f FsckFinding) Key() string { return f.Code + "\x00" + f.Path }

// FsckSession is one session as fsck saw it: its class before any repair
// and, with --repair, after.
type FsckSession struct {
	Path     string        `json:"path"`
	Format   string        `json:"sourceFormat"`
	Version  int           `json:"version"`
	Class    Class         `json:"class"`
	After    Class         `json:"classAfterRepair,omitempty"`
	Findings []FsckFinding `json:"findings"`
}

// FsckTree is one session tree: its own findings (lock, journal,
// leftovers without a session) and its sessions.
type FsckTree struct {
	Root     string        `json:"root"`
	Findings []FsckFinding `json:"findings"`
	Sessions []FsckSession `json:"sessions"`
	// Skipped are entries that are not sessions (notices).
	Skipped []discover.Skipped `json:"skippedEntries"`
}

// FsckTotals sums an fsck run's trees (SumFsck).
type FsckTotals struct {
	Sessions int           `json:"sessions"`
	Classes  map[Class]int `json:"classes"`
	Problems int           `json:"problems"`
	Repaired int           `json:"repaired"`
	Left     int           `json:"left"`
	Notices  int           `json:"notices"`
	// Moved counts what the repairs moved into the quarantine that no
	// finding names (CodeMoved: the sidecars rebuilds displaced).
	Moved int `json:"moved,omitempty"`
}

// SumFsck sums trees: each session counted under its class after repair
// (before, without one), each finding as a problem repaired or left, a
// notice, or a move.
func SumFsck(trees []FsckTree) FsckTotals {
	t := FsckTotals{Classes: map[Class]int{}}
	count := func(fs []FsckFinding) {
		for _, f := range fs {
			switch {
			case f.Code == CodeMoved:
				// A record of what a repair moved, not a problem found.
				t.Moved++
			case f.Notice:
				t.Notices++
			case f.Repaired:
				t.Problems++
				t.Repaired++
			default:
				t.Problems++
				t.Left++
			}
		}
	}
	for _, tr := range trees {
		count(tr.Findings)
		for _, s := range tr.Sessions {
			t.Sessions++
			c := s.Class
			if s.After != "" {
				c = s.After
			}
			t.Classes[c]++
			count(s.Findings)
		}
	}
	return t
}

// RunTotals are t by name, as a repair run's end record keeps them
// (ledger.RunRecord.Totals).
func (t FsckTotals) RunTotals() map[string]int64 {
	return map[string]int64{"sessions": int64(t.Sessions), "problems": int64(t.Problems), "repaired": int64(t.Repaired),
		"left": int64(t.Left), "notices": int64(t.Notices)}
}
