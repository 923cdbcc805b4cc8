package verify

import (
	"strings"

	"pisess/readers"
)

// Repair texts of fsck's own actions, worded once.
const (
	repairQuarantine    = "fsck --repair: move it into the tree's quarantine (.pisess/quarantine/<run id>/)"
	repairRestoreBackup = "fsck --repair: verify it and put it back as the sidecar (no sidecar is installed)"
	repairClearLock     = "fsck --repair: take the tree lock over (its holder is dead) and clear it"
	repairAcknowledge   = "fsck --repair: copy the line to the quarantine and acknowledge it with a journal note (the journal is never rewritten)"
	repairRebuild       = "fsck --repair: rebuild the sidecar from its source (the old one goes to the quarantine)"
	repairRefresh       = "pisess migrate (refresh), or fsck --repair: rebuild the stale sidecar from its source"
	// RepairUnreadable is the repair of a source that could not be read
	// (readers.Class.Transient): no verdict on the session, nothing
	// pisess can mend; the next run reads it again.
	RepairUnreadable = "cannot repair: the source could not be read (an error of this run, not a verdict on the session); " +
		"fix the cause (permission, open-file limit, disk, a lock another process holds) and run again"
)

// unreadableSource reports whether a finding's code is a source error of
// a transient class (source.io, source.locked): a failure of the run that
// met it, which every command counts as a problem, never a refusal
// (issue 32 §2).
func unreadableSource(code string) bool {
	c, ok := strings.CutPrefix(code, "source.")
	return ok && readers.Class(c).Transient()
}

// actionFor maps a verify finding to the repair fsck applies to it (FORMAT.md
// §11 and the fsck section of the rollback/fsck issue). The rule: mend in
// place what can be mended without losing data (a torn tail, an index or a
// manifest derived from the frames, modes, owner, a pending rollback); for
// anything else rebuild the sidecar from the source, which is
// authoritative. A refused source and a symlinked ancestor cannot be
// repaired by pisess at all.
func actionFor(f Finding) (RepairAction, string) {
	switch {
	case unreadableSource(f.Code):
		return ActionNone, RepairUnreadable
	case strings.HasPrefix(f.Code, "source."):
		return ActionNone, RepairSource
	}
	switch f.Code {
	case CodeSymlinkAncestor:
		if f.Repair != "" {
			return ActionNone, f.Repair
		}
		return ActionNone, RepairSymlinkAncestor(f.Path)
	case CodeMode:
		return ActionChmod, RepairChmod
	case CodeOwner:
		return ActionChown, RepairChown
	case CodeRollbackIntent:
		return ActionFinishRollback, RepairIntent
	case CodeIndexTorn, CodeSegmentTorn, CodeLedgerTorn:
		return ActionCutTail, RepairCutTail
	case CodeIndexMissing, CodeIndexLagging, CodeIndexInvalid, CodeIndexOutOfBounds:
		return ActionRebuildIndex, RepairRebuildIndex
	case CodeManifestMissing, CodeManifestInvalid, CodeManifestMismatch,
		CodeManifestInvariant, CodeChainBreak:
		return ActionRecomputeManifest, RepairManifest
	case CodeSourceStale, CodeSourceChanged:
		return ActionRefresh, repairRefresh
	case CodeStaging:
		return ActionQuarantine, repairQuarantine
	}
	return ActionRebuild, repairRebuild
}

// InPlace reports whether an action mends the store where it is (under
// the store's mutation lock), as opposed to replacing or moving it.
func InPlace(a RepairAction) bool {
	switch a {
	case ActionCutTail, ActionRebuildIndex, ActionRecomputeManifest, ActionChmod, ActionChown, ActionFinishRollback:
		return true
	}
	return false
}

// fromVerify turns a verify finding into an fsck finding with its repair.
func fromVerify(f Finding) FsckFinding {
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
	if strings.HasPrefix(f.Code, "source.") && !unreadableSource(f.Code) {
		// pi keeps using such a session as JSONL: reported, not a
		// problem of the store system (else every tree holding a
		// session the reference cannot migrate would fail fsck forever).
		out.Notice = true
	}
	if f.Code == CodeSourceStale || f.Code == CodeSourceChanged {
		// Stale is not damage: pi marks a sidecar dirty on every save and
		// reads the source until a refresh (FORMAT.md §8). Reported as a
		// notice (exit 0); --repair still refreshes it, as migrate does.
		out.Notice = true
	}
	return out
}

// Rebuildable reports whether a rebuild from the source mends every one of
// list's findings: damage to the store's own bytes (frames, index,
// manifest, a missing part), which fsck mends in place or by a rebuild,
// and staleness. It is false for what only fsck may decide (modes, owner,
// a pending rollback, a symlink or special file, a staging directory) and
// for a source the reference refuses: migrate reports those as needing
// repair. An empty list is not rebuildable (nothing to mend).
func Rebuildable(list []Finding) bool {
	for _, f := range list {
		if preflightCodes[f.Code] {
			return false
		}
		switch a, _ := actionFor(f); a {
		case ActionRebuild, ActionCutTail, ActionRebuildIndex, ActionRecomputeManifest, ActionRefresh:
		default:
			return false
		}
	}
	return len(list) > 0
}

// OnlySourceStateInvalid reports whether the only findings are an invalid
// source-state.json: a store otherwise sound, which a refresh mends as
// pi's resume reads it (stale, FORMAT.md §8).
func OnlySourceStateInvalid(list []Finding) bool {
	for _, f := range list {
		if f.Code != CodeSourceStateInvalid {
			return false
		}
	}
	return len(list) > 0
}
