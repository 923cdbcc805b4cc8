package engine

import (
	"strings"

	"pisess/verify"
)

// Repair texts of fsck's own actions, worded once.
const (
	repairQuarantine    = "fsck --repair: move it into the tree's quarantine (.pisess/quarantine/<run id>/)"
	repairRestoreBackup = "fsck --repair: verify it and put it back as the sidecar (no sidecar is installed)"
	repairClearLock     = "fsck --repair: take the tree lock over (its holder is dead) and clear it"
	repairAcknowledge   = "fsck --repair: copy the line to the quarantine and acknowledge it with a journal note (the journal is never rewritten)"
	repairRebuild       = "fsck --repair: rebuild the sidecar from its source (the old one goes to the quarantine)"
	repairRefresh       = "pisess migrate (refresh), or fsck --repair: rebuild the stale sidecar from its source"
)

// actionFor maps a verify finding to the repair fsck applies to it (FORMAT.md
// §11 and the fsck section of the rollback/fsck issue). The rule: mend in
// place what can be mended without losing data (a torn tail, an index or a
// manifest derived from the frames, modes, owner, a pending rollback); for
// anything else rebuild the sidecar from the source, which is
// authoritative. A refused source and a symlinked ancestor cannot be
// repaired by pisess at all.
func actionFor(f verify.Finding) (RepairAction, string) {
	switch {
	case strings.HasPrefix(f.Code, "source."):
		return ActionNone, verify.RepairSource
	}
	switch f.Code {
	case verify.CodeSymlinkAncestor:
		if f.Repair != "" {
			return ActionNone, f.Repair
		}
		return ActionNone, verify.RepairSymlinkAncestor(f.Path)
	case verify.CodeMode:
		return ActionChmod, verify.RepairChmod
	case verify.CodeOwner:
		return ActionChown, verify.RepairChown
	case verify.CodeRollbackIntent:
		return ActionFinishRollback, verify.RepairIntent
	case verify.CodeIndexTorn, verify.CodeSegmentTorn, verify.CodeLedgerTorn:
		return ActionCutTail, verify.RepairCutTail
	case verify.CodeIndexMissing, verify.CodeIndexLagging, verify.CodeIndexInvalid, verify.CodeIndexOutOfBounds:
		return ActionRebuildIndex, verify.RepairRebuildIndex
	case verify.CodeManifestMissing, verify.CodeManifestInvalid, verify.CodeManifestMismatch,
		verify.CodeManifestInvariant, verify.CodeChainBreak:
		return ActionRecomputeManifest, verify.RepairManifest
	case verify.CodeSourceStale, verify.CodeSourceChanged:
		return ActionRefresh, repairRefresh
	case verify.CodeStaging:
		return ActionQuarantine, repairQuarantine
	}
	return ActionRebuild, repairRebuild
}

// inPlace reports whether an action mends the store where it is (under
// the store's mutation lock), as opposed to replacing or moving it.
func inPlace(a RepairAction) bool {
	switch a {
	case ActionCutTail, ActionRebuildIndex, ActionRecomputeManifest, ActionChmod, ActionChown, ActionFinishRollback:
		return true
	}
	return false
}

// fromVerify turns a verify finding into an fsck finding with its repair.
func fromVerify(f verify.Finding) FsckFinding {
	action, repair := actionFor(f)
	out := FsckFinding{
		Code:    f.Code,
		Class:   string(f.Class),
		Session: f.Session,
		Path:    f.Path,
		Segment: f.Segment,
		Offset:  f.Offset,
		Line:    f.Line,
		Detail:  f.Detail,
		Action:  action,
		Repair:  repair,
	}
	if strings.HasPrefix(f.Code, "source.") {
		// pi keeps using such a session as JSONL: reported, not a
		// problem of the store system (else every tree holding a
		// session the reference cannot migrate would fail fsck forever).
		out.Notice = true
	}
	if f.Code == verify.CodeSourceStale || f.Code == verify.CodeSourceChanged {
		// Stale is not damage: pi marks a sidecar dirty on every save and
		// reads the source until a refresh (FORMAT.md §8). Reported as a
		// notice (exit 0); --repair still refreshes it, as migrate does.
		out.Notice = true
	}
	return out
}
