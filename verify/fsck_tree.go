package verify

import (
	"fmt"
	"sort"

	"pisess/ledger"
	"pisess/readers/discover"
)

// fsck's findings about a tree as a whole: a stale tree lock, journal lines
// that do not parse (or name a path through a symlink) and that no repair
// note acknowledges, and directories whose session file is gone.

// StaleLockFinding is the finding of a tree lock whose holder died
// holding it.
func StaleLockFinding(tree, holder string) FsckFinding {
	return FsckFinding{
		Code:   CodeTreeStaleLock,
		Path:   ledger.TreeLockPath(tree),
		Detail: "the tree lock names a holder that died holding it (" + holder + ")",
		Action: ActionClearLock,
		Repair: repairClearLock,
	}
}

// JournalFindings reports every journal line that does not parse and has
// not been acknowledged by an earlier fsck --repair (a repair note naming
// the journal and the line's digest). The journal is append-only evidence:
// fsck never rewrites it.
func JournalFindings(j *ledger.Journal) ([]FsckFinding, error) {
	acked := map[string]bool{}
	var linked []ledger.BadLine
	bad, err := j.Scan(func(r ledger.Record) error {
		if n := r.Note; n != nil && n.Kind == ledger.NoteRepair && n.Path == j.Path() && n.SHA256 != "" {
			acked[n.SHA256] = true
		}
		if link, found := ledger.SymlinkOnTheWay(j.Tree(), r); found {
			linked = append(linked, ledger.BadLine{Line: r.Line, Forged: true, CorrelationID: r.CorrelationID(),
				Detail: fmt.Sprintf("the record names a path through the symlink %s, which pisess never follows", link)})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	bad = append(bad, linked...)
	sort.Slice(bad, func(a, b int) bool { return bad[a].Line < bad[b].Line })
	if len(bad) == 0 {
		return nil, nil
	}
	want := map[int64]bool{}
	for _, b := range bad {
		want[b.Line] = true
	}
	lines, err := ledger.ReadLines(j.Path(), want)
	if err != nil {
		return nil, err
	}
	var out []FsckFinding
	for _, b := range bad {
		if acked[ledger.LineDigest(lines[b.Line])] {
			continue
		}
		detail := "journal line does not parse: " + b.Detail
		if b.Forged {
			detail = "journal record refused (no pisess command acts on it): " + b.Detail
		}
		out = append(out, FsckFinding{
			Code:   CodeTreeJournal,
			Path:   j.Path(),
			Line:   b.Line,
			Detail: detail,
			Action: ActionAcknowledge,
			Repair: repairAcknowledge,
		})
	}
	return out, nil
}

// OrphanFindings reports staging, backup and sidecar directories whose
// session file is gone: pi can never use them, nothing will clear them.
func OrphanFindings(t discover.Tree) []FsckFinding {
	var out []FsckFinding
	for _, l := range t.Leftovers {
		out = append(out, FsckFinding{
			Code:   CodeTreeOrphan,
			Path:   l.Path,
			Detail: fmt.Sprintf("a %s directory of %q, whose session file is gone", l.Kind, l.Stem),
			Action: ActionQuarantine,
			Repair: repairQuarantine,
		})
	}
	return out
}

// MendedFindings reports the objects of .pisess/ that fsck --repair found
// of the wrong type (ledger.MendPisess): each moved aside (repaired), or
// left with the command that moves it by hand.
func MendedFindings(mended []ledger.Mended) []FsckFinding {
	var out []FsckFinding
	for _, m := range mended {
		f := FsckFinding{Code: CodeTreeWrongType, Path: m.Path, Action: ActionQuarantine,
			Detail: fmt.Sprintf("%s, not %s: pisess keeps %s there", m.Is, m.Want, m.Role),
			Repair: "fsck --repair: move it aside into the quarantine and start afresh"}
		if m.Err != nil {
			f.RepairError = m.Err.Error()
			f.Repair = "cannot repair: fsck could not move it aside; by hand: " + m.Hand()
		} else {
			f.Repaired = true
			f.Detail += "; moved to " + m.To
		}
		out = append(out, f)
	}
	return out
}
