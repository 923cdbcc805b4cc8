package verify

import (
	"fmt"
	"path/filepath"
	"strings"
)

// Class is one of the reference's five status classes (FORMAT.md §9).
type Class string

const (
	ClassUnmigrated Class = "unmigrated"
	ClassMigrated   Class = "migrated"
	ClassStale      Class = "stale"
	ClassCorrupt    Class = "corrupt"
	ClassPartial    Class = "partial"
)

// Finding is one thing a check found. Code is a stable name of the rule
// that failed; Class the status class it implies ("" for findings that do
// not change the class, such as a torn ledger line, which the reference's
// status ignores); Repair names what would mend it, or why nothing can.
type Finding struct {
	Code    string
	Class   Class
	Session string // the session file
	Path    string // the file or directory at fault
	Segment uint64 // segment number, 0 when not in a segment
	Offset  int64  // byte offset in Segment, or in Path
	Line    int64  // 1-based line of an index, ledger or source, 0 when none
	Detail  string
	Repair  string
}

func (f Finding) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "[%s] %s", f.Code, f.Path)
	if f.Segment > 0 {
		fmt.Fprintf(&b, " segment %d offset %d", f.Segment, f.Offset)
	}
	if f.Line > 0 {
		fmt.Fprintf(&b, " line %d", f.Line)
	}
	if f.Detail != "" {
		b.WriteString(": ")
		b.WriteString(f.Detail)
	}
	if f.Repair != "" {
		b.WriteString(" (")
		b.WriteString(f.Repair)
		b.WriteString(")")
	}
	return b.String()
}

// Codes. Acceptance codes are FORMAT.md §11's rules; index, segment,
// manifest, chain and checkpoint codes are the store's integrity (§2–§6);
// the INV codes are §9's invariants; source codes carry the reader's class
// ("source." + readers.Class).
const (
	CodeSymlinkAncestor  = "acceptance.symlink-ancestor"
	CodeSymlink          = "acceptance.symlink"
	CodeSpecialFile      = "acceptance.special-file"
	CodeNotDirectory     = "acceptance.not-directory"
	CodeMissing          = "acceptance.missing"
	CodeMode             = "acceptance.mode"
	CodeOwner            = "acceptance.owner"
	CodeUnreadable       = "acceptance.unreadable"
	CodeUnindexedSegment = "acceptance.unindexed-segment"
	CodeState            = "acceptance.state"
	CodeSegmentSize      = "acceptance.segment-size"
	CodeSessionID        = "acceptance.session-id"
	CodeSourceFormat     = "acceptance.source-format"
	CodeRollbackIntent   = "acceptance.rollback-intent"
	// CodeWrongType: a named entry of the store is a directory where a
	// regular file belongs, or the reverse (its Class says whether pi's
	// open meets it).
	CodeWrongType = "acceptance.wrong-type"

	CodeIndexMissing        = "index.missing"
	CodeIndexMissingSegment = "index.missing-segment"
	CodeIndexTorn           = "index.torn-tail"
	CodeIndexInvalid        = "index.invalid"
	CodeIndexCRC            = "index.crc"
	CodeIndexOutOfBounds    = "index.out-of-bounds"
	CodeIndexLagging        = "index.lagging"
	CodeIndexUncovered      = "index.uncovered"
	CodeSegmentTorn         = "segment.torn-tail"
	CodeSegmentInvalid      = "segment.invalid"
	CodeSegmentBytes        = "segment.bytes-mismatch"
	CodeManifestMissing     = "manifest.missing"
	CodeManifestInvalid     = "manifest.invalid"
	CodeManifestMismatch    = "manifest.mismatch"
	CodeManifestInvariant   = "manifest.invariant-false"
	CodeChainBreak          = "chain.break"
	CodeChainSource         = "chain.source-mismatch"
	CodeEntriesSource       = "chain.entries-mismatch"
	CodePayloadSource       = "chain.payload-mismatch"
	CodePayloadTyped        = "chain.payload-typed"
	CodeParents             = "chain.parents"
	CodeCheckpoint          = "checkpoint.invalid"
	CodeLedger              = "ledger.invalid"
	CodeLedgerTorn          = "ledger.torn-tail"
	CodeLedgerEmpty         = "ledger.empty"
	CodeSourceStateInvalid  = "fingerprint.state-invalid"
	CodeSourceStale         = "fingerprint.stale"
	CodeSourceChanged       = "fingerprint.changed"
	CodeStaging             = "store.staging"
	CodeStoreOther          = "store.invalid"
)

// Invariant codes (FORMAT.md §9).
const (
	INV001 = "INV-001" // parent links closed
	INV002 = "INV-002" // entry sequence +1 each frame
	INV003 = "INV-003" // index rows in bounds
	INV004 = "INV-004" // checkpoint head matches the manifest head at its creation
	INV005 = "INV-005" // hash chain continuous
	INV006 = "INV-006" // branch heads indexed: every segment byte covered
	INV007 = "INV-007" // cutover atomic
)

// InvariantCodes lists the invariants in order.
var InvariantCodes = []string{INV001, INV002, INV003, INV004, INV005, INV006, INV007}

// SourceCode returns the code of a reader refusal of class c.
func SourceCode(c string) string { return "source." + c }

// Repairs, worded once.
const (
	RepairChmod        = "fsck --repair: chmod 0700 (directories) / 0600 (files)"
	RepairChown        = "fsck --repair (as root): chown to the session file's owner"
	RepairRebuild      = "fsck --repair: rebuild the sidecar from the source"
	RepairRebuildIndex = "fsck --repair: rebuild index from frames"
	RepairCutTail      = "fsck --repair: cut the torn tail (the cut bytes go to quarantine)"
	RepairManifest     = "fsck --repair: recompute the manifest"
	RepairIntent       = "fsck --repair: finish the pending rollback (roll forward)"
	RepairRefresh      = "pisess migrate: refresh the stale sidecar from the source"
	RepairSource       = "cannot repair: the source itself is refused; pi keeps using the JSONL"
	RepairLedger       = "fsck --repair: cut the torn ledger line (kept in quarantine)"
	RepairStaging      = "fsck --repair: quarantine the leftover staging directory"
)

// RepairSymlinkAncestor is the repair text for a store under a symlinked
// directory: nothing pisess can do.
func RepairSymlinkAncestor(link string) string {
	return "cannot repair: move the tree out from under the symlink " + link
}

// findings collects findings, at most maxPerCode of each code, so that a
// store broken in every frame cannot make a report grow without bound.
type findings struct {
	session string
	list    []Finding
	count   map[string]int
}

const maxPerCode = 50

func (fs *findings) add(f Finding) {
	if fs.count == nil {
		fs.count = map[string]int{}
	}
	fs.count[f.Code]++
	switch n := fs.count[f.Code]; {
	case n <= maxPerCode:
		if f.Session == "" {
			f.Session = fs.session
		}
		fs.list = append(fs.list, f)
	case n == maxPerCode+1:
		fs.list = append(fs.list, Finding{Code: f.Code, Class: f.Class, Session: fs.session,
			Path: f.Path, Detail: fmt.Sprintf("more findings of %s left out", f.Code)})
	}
}

func (fs *findings) has(pred func(Finding) bool) bool {
	for _, f := range fs.list {
		if pred(f) {
			return true
		}
	}
	return false
}

func (fs *findings) first(pred func(Finding) bool) *Finding {
	for i := range fs.list {
		if pred(fs.list[i]) {
			f := fs.list[i]
			return &f
		}
	}
	return nil
}

func codeIs(codes ...string) func(Finding) bool {
	return func(f Finding) bool {
		for _, c := range codes {
			if f.Code == c {
				return true
			}
		}
		return false
	}
}

// rel returns path relative to root with slashes, "" outside it.
func rel(root, path string) string {
	r, err := filepath.Rel(root, path)
	if err != nil || strings.HasPrefix(r, "..") {
		return ""
	}
	return filepath.ToSlash(r)
}

// FirstFindings names the first n findings of list, and how many more
// there are, on one line: what an error message has room for.
func FirstFindings(list []Finding, n int) string {
	var parts []string
	for i, f := range list {
		if i == n {
			parts = append(parts, fmt.Sprintf("and %d more", len(list)-n))
			break
		}
		parts = append(parts, f.String())
	}
	return strings.Join(parts, "; ")
}
