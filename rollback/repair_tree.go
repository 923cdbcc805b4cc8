package rollback

import (
	"fmt"

	"pisess/ledger"
	"pisess/verify"
)

// acknowledgeJournalLine copies the line to the quarantine and appends the
// repair note that acknowledges it.
func acknowledgeJournalLine(q *ledger.Quarantiner, f verify.FsckFinding) error {
	lines, err := ledger.ReadLines(f.Path, map[int64]bool{f.Line: true})
	if err != nil {
		return err
	}
	line := lines[f.Line]
	dst, _, err := q.Keep(f.Path, fmt.Sprintf("line-%d", f.Line), line)
	if err != nil {
		return err
	}
	return q.Note(ledger.Note{
		Kind:           ledger.NoteRepair,
		Path:           f.Path,
		QuarantinePath: dst,
		SHA256:         ledger.LineDigest(line),
		Detail:         fmt.Sprintf("journal line %d does not parse; a copy is in the quarantine and this note acknowledges it (the journal is never rewritten)", f.Line),
	})
}

// Mended records where fsck --repair moved the objects of .pisess/ that
// were of the wrong type (ledger.MendPisess, before it could take the
// tree lock): the new journal's first records say where the old objects
// went. found are their findings (verify.MendedFindings), in mended's
// order; one whose note cannot be written is not repaired.
func (r *Repairer) Mended(mended []ledger.Mended, found []verify.FsckFinding) {
	for i, m := range mended {
		n := ledger.Note{Kind: ledger.NoteRepair, Path: m.Path,
			Detail: fmt.Sprintf("fsck moved aside %s, which was %s, not %s, to %s", m.Path, m.Is, m.Want, m.To)}
		if err := r.Q.Note(n); err != nil {
			found[i].Repaired, found[i].RepairError = false, err.Error()
		}
	}
}

// TookOverLock records the repair of f, a stale tree lock whose holder
// died holding it: taking the lock over was the repair.
func (r *Repairer) TookOverLock(f *verify.FsckFinding, holder string) {
	f.Repaired = true
	if err := r.Q.Note(ledger.Note{Kind: ledger.NoteRepair, Path: f.Path,
		Detail: "stale tree lock taken over and cleared; its holder was: " + holder}); err != nil {
		f.Repaired, f.RepairError = false, err.Error()
	}
}

// Tree mends the tree's own findings: the journal lines and the
// orphaned directories (the stale lock was mended by taking it).
func (r *Repairer) Tree(fs []verify.FsckFinding) {
	for i := range fs {
		f := &fs[i]
		if f.Repaired || f.Notice {
			continue
		}
		var err error
		switch f.Action {
		case verify.ActionAcknowledge:
			err = acknowledgeJournalLine(r.Q, *f)
		case verify.ActionQuarantine:
			_, err = r.Q.Move(r.Root, f.Path, "orphan", f.Detail)
		default:
			continue
		}
		if err != nil {
			f.RepairError = err.Error()
			r.Log.Warn().Err(err).Str("path", f.Path).Str("code", f.Code).Msg("repair failed")
			continue
		}
		f.Repaired = true
	}
	// Re-check the journal: only lines that are still unacknowledged stay.
	left, err := verify.JournalFindings(r.Journal)
	if err != nil {
		return
	}
	still := map[int64]bool{}
	for _, f := range left {
		still[f.Line] = true
	}
	for i := range fs {
		if fs[i].Code == verify.CodeTreeJournal && still[fs[i].Line] {
			fs[i].Repaired = false
		}
	}
}
