package verify

import (
	"os"
	"sort"
	"time"

	"pisess/readers"
	"pisess/readers/discover"
)

// StatusEntry is one session's line of `pisess status` (StatusOf).
type StatusEntry struct {
	Path string `json:"path"`
	Tree string `json:"tree"`
	// Modified is the session file's modification time (RFC 3339).
	Modified string `json:"modified,omitempty"`
	// SidecarBytes is the sidecar's frame bytes (its manifest), 0 without.
	SidecarBytes uint64 `json:"sidecarBytes"`
	SourceFormat string `json:"sourceFormat"`
	Version      int    `json:"version"`
	// Entries is the sidecar manifest's entriesTotal; for a session
	// without a usable manifest, the source's entry lines (JSONL) when
	// they were counted. HasEntries says whether it is known.
	Entries    uint64 `json:"entries"`
	HasEntries bool   `json:"entriesKnown"`
	Size       int64  `json:"size"` // the session file's bytes
	Class      Class  `json:"class"`
	// Reason is the first finding behind a class other than migrated and
	// unmigrated.
	Reason string `json:"reason,omitempty"`
	// Name is the session's name from its last session_info entry.
	Name *string `json:"name"`
	// LastMigration is the correlation id of the last run that completed
	// a migration of the session (the tree journal), "" when none.
	LastMigration string `json:"lastMigration,omitempty"`
	// Error says why the session could not be classified.
	Error string `json:"error,omitempty"`
}

// StatusOf is one session's status entry, fc the tree's fresh cache (nil:
// none). The class is the reference's, exactly (Status: every check, every
// frame read; issue 34 §2: a shallower status called a truncated sidecar
// migrated), except where fc vouches for the sidecar: every file of it
// unchanged since a status as deep as pi's open (or the run that wrote it)
// found it sound, so only the session file is judged again, if it changed
// (the steady state stays fast).
//
// The name and, for a session without a sidecar, the entry count come
// from one pass over the JSONL source that parses only session_info lines
// (a SQLite session's name is not read). The caller fills Tree and
// LastMigration.
func StatusOf(s discover.Session, fc *FreshCache) StatusEntry {
	e := StatusEntry{Path: s.Path, SourceFormat: string(s.Format), Version: s.Version, Size: s.Size}
	if fi, err := os.Lstat(s.Path); err == nil {
		e.Modified = fi.ModTime().UTC().Format(time.RFC3339)
	}
	if s.Refusal != nil && s.Refusal.Class != discover.ClassSymlinkAncestor {
		// A symlinked session file, or a .sqlite shadowed by its .jsonl:
		// pisess reads neither, so it has no status beyond that.
		e.Class = ClassUnmigrated
		if s.Sidecar != "" {
			e.Class = ClassCorrupt
		}
		e.Reason = s.Refusal.Reason
		return e
	}
	st, ok := fc.Vouched(s)
	var err error
	if !ok {
		st, err = Status(s.Path)
	}
	if err != nil {
		e.Class, e.Error = ClassCorrupt, err.Error()
		return e
	}
	e.Class = st.Class
	if st.Version != 0 {
		e.Version = st.Version
	}
	if st.Class != ClassMigrated && st.Class != ClassUnmigrated && len(st.Findings) > 0 {
		f := decisive(st)
		e.Reason = f.Code + ": " + f.Detail
	}
	e.SidecarBytes = st.Bytes
	if st.Entries > 0 || st.Class == ClassMigrated || st.Class == ClassStale {
		e.Entries, e.HasEntries = st.Entries, true
	}
	if s.Format == readers.FormatJSONLv3 && (s.Size <= statusScanLimit || !e.HasEntries) && s.Size <= statusScanMax {
		name, lines, err := ScanJSONL(s.Path)
		if err == nil {
			e.Name = name
			if !e.HasEntries {
				e.Entries, e.HasEntries = lines, true
			}
		}
	}
	if st.Name != nil {
		e.Name = st.Name
	}
	return e
}

// statusClasses lists the classes in the order reports show them.
var statusClasses = []Class{ClassMigrated, ClassStale, ClassUnmigrated, ClassPartial, ClassCorrupt}

// ClassOrder returns the classes of totals in the order reports show
// them: the five in a fixed order, then any other sorted.
func ClassOrder(totals map[Class]int) []Class {
	var out []Class
	known := map[Class]bool{}
	for _, c := range statusClasses {
		known[c] = true
		if totals[c] > 0 {
			out = append(out, c)
		}
	}
	var rest []Class
	for c := range totals {
		if !known[c] {
			rest = append(rest, c)
		}
	}
	sort.Slice(rest, func(i, j int) bool { return rest[i] < rest[j] })
	return append(out, rest...)
}

// Status stays fast whatever a session's size (issue 14): the source is
// scanned for its name (and, without a sidecar, its entry count) only up
// to these sizes; above them the entry count comes from the sidecar's
// manifest and the name is not shown (the JSON has it as null).
const (
	statusScanLimit = 16 << 20  // with a sidecar: name only
	statusScanMax   = 256 << 20 // without one: the entry count too
)

// decisive is the first finding of st's class (the one that gives the
// session its class), else the first.
func decisive(st StatusReport) Finding {
	for _, f := range st.Findings {
		if f.Class == st.Class {
			return f
		}
	}
	return st.Findings[0]
}
