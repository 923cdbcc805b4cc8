package engine

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	"pisess/ledger"
	"pisess/readers"
	"pisess/readers/discover"
	"pisess/verify"
)

// StatusOptions configure Status.
type StatusOptions struct {
	// Paths are session files or trees; none means discover.DefaultRoots.
	Paths []string
}

// StatusEntry is one session's line of `pisess status`.
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
	Entries    uint64       `json:"entries"`
	HasEntries bool         `json:"entriesKnown"`
	Size       int64        `json:"size"` // the session file's bytes
	Class      verify.Class `json:"class"`
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

// StatusReport is every session's status, in tree order.
type StatusReport struct {
	Sessions []StatusEntry        `json:"sessions"`
	Totals   map[verify.Class]int `json:"totals"`
	// Trees is each tree's own state: its journal and quarantine sizes
	// and its last run.
	Trees []StatusTree `json:"trees"`
	// Skipped are entries that are not sessions (notices).
	Skipped []discover.Skipped `json:"skippedEntries"`
}

// StatusTree is what status says of a tree as a whole.
type StatusTree struct {
	Root            string          `json:"root"`
	JournalBytes    int64           `json:"journalBytes"`
	QuarantineBytes int64           `json:"quarantineBytes"`
	Runs            int             `json:"runs"`
	LastRun         *ledger.RunInfo `json:"lastRun,omitempty"`
}

// Tally: status is informational; whatever it finds, it has run cleanly.
func (StatusReport) Tally() Tally { return Tally{} }

// Status lists the status of every session under opt.Paths, one entry
// each: path, source format and version, entries, size, the reference's
// status class, the session's name and the last migration run. It never
// writes and never locks.
//
// The class is the reference's, exactly (verify.Status: every check, every
// frame read; issue 34 §2: a shallower status called a truncated sidecar
// migrated), except where the tree's fresh cache vouches for the sidecar:
// every file of it unchanged since a status as deep as pi's open (or the
// run that wrote it) found it sound, so only the session file is judged
// again, if it changed (the steady state stays fast).
//
// The name and, for a session without a sidecar, the entry count come
// from one pass over the JSONL source that parses only session_info lines
// (a SQLite session's name is not read). An error means the trees could
// not be walked; a session that cannot be classified has its Error set.
func Status(ctx context.Context, opt StatusOptions) (StatusReport, error) {
	roots := opt.Paths
	if len(roots) == 0 {
		var err error
		if roots, err = discover.DefaultRoots(); err != nil {
			return StatusReport{}, err
		}
	}
	trees, err := discover.Walk(roots)
	if err != nil {
		return StatusReport{}, fmt.Errorf("status: %w", err)
	}
	rep := StatusReport{Sessions: []StatusEntry{}, Totals: map[verify.Class]int{}, Skipped: []discover.Skipped{}}
	for _, t := range trees {
		// A journal status cannot read is said (exit 8, naming it), not
		// shown as a tree without runs (issue 32 §4).
		st, err := statusTree(t.Root)
		if err != nil {
			return rep, fmt.Errorf("status %s: %w", t.Root, err)
		}
		rep.Trees = append(rep.Trees, st)
		rep.Skipped = append(rep.Skipped, t.Skipped...)
		last, err := ledger.LastMigrations(t.Root)
		if err != nil {
			return rep, fmt.Errorf("status %s: %w", t.Root, err)
		}
		var fc *verify.FreshCache
		if t.SymlinkAncestor == "" {
			fc = verify.LoadFreshCache(t.Root, verify.DefaultFreshJudges())
		}
		for _, s := range t.Sessions {
			if err := ctx.Err(); err != nil {
				return rep, err
			}
			e := statusOf(s, fc)
			e.Tree = t.Root
			e.LastMigration = last[filepath.Clean(s.Path)]
			rep.Sessions = append(rep.Sessions, e)
			rep.Totals[e.Class]++
		}
	}
	return rep, nil
}

// statusTree reads a tree's journal for its runs and sizes its journal
// and quarantine (read-only: a tree without .pisess has none).
func statusTree(root string) (StatusTree, error) {
	st := StatusTree{Root: root}
	if fi, err := os.Lstat(ledger.JournalPath(root)); err == nil {
		st.JournalBytes = fi.Size()
	}
	st.QuarantineBytes = ledger.DirBytes(filepath.Join(root, ledger.PisessDir, ledger.QuarantineDir))
	runs, _, err := ledger.JournalRuns(root)
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

// statusOf is one session's entry, fc the tree's fresh cache (nil: none).
func statusOf(s discover.Session, fc *verify.FreshCache) StatusEntry {
	e := StatusEntry{Path: s.Path, SourceFormat: string(s.Format), Version: s.Version, Size: s.Size}
	if fi, err := os.Lstat(s.Path); err == nil {
		e.Modified = fi.ModTime().UTC().Format(time.RFC3339)
	}
	if s.Refusal != nil && s.Refusal.Class != discover.ClassSymlinkAncestor {
		// A symlinked session file, or a .sqlite shadowed by its .jsonl:
		// pisess reads neither, so it has no status beyond that.
		e.Class = verify.ClassUnmigrated
		if s.Sidecar != "" {
			e.Class = verify.ClassCorrupt
		}
		e.Reason = s.Refusal.Reason
		return e
	}
	st, ok := fc.Vouched(s)
	var err error
	if !ok {
		st, err = verify.Status(s.Path)
	}
	if err != nil {
		e.Class, e.Error = verify.ClassCorrupt, err.Error()
		return e
	}
	e.Class = st.Class
	if st.Version != 0 {
		e.Version = st.Version
	}
	if st.Class != verify.ClassMigrated && st.Class != verify.ClassUnmigrated && len(st.Findings) > 0 {
		f := decisive(st)
		e.Reason = f.Code + ": " + f.Detail
	}
	e.SidecarBytes = st.Bytes
	if st.Entries > 0 || st.Class == verify.ClassMigrated || st.Class == verify.ClassStale {
		e.Entries, e.HasEntries = st.Entries, true
	}
	if s.Format == readers.FormatJSONLv3 && (s.Size <= statusScanLimit || !e.HasEntries) && s.Size <= statusScanMax {
		name, lines, err := verify.ScanJSONL(s.Path)
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
var statusClasses = []verify.Class{verify.ClassMigrated, verify.ClassStale, verify.ClassUnmigrated,
	verify.ClassPartial, verify.ClassCorrupt}

// ClassOrder returns the classes of totals in the order reports show
// them: the five in a fixed order, then any other sorted.
func ClassOrder(totals map[verify.Class]int) []verify.Class {
	var out []verify.Class
	known := map[verify.Class]bool{}
	for _, c := range statusClasses {
		known[c] = true
		if totals[c] > 0 {
			out = append(out, c)
		}
	}
	var rest []verify.Class
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
func decisive(st verify.StatusReport) verify.Finding {
	for _, f := range st.Findings {
		if f.Class == st.Class {
			return f
		}
	}
	return st.Findings[0]
}
