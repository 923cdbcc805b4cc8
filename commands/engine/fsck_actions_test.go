package engine

import (
	"testing"

	"pisess/verify"
)

// TestActionFor pins the repair of every verify code: in place what the
// frames or the metadata can mend, a rebuild from the source otherwise,
// nothing for what pisess cannot mend.
func TestActionFor(t *testing.T) {
	tests := map[string]RepairAction{
		verify.CodeSymlinkAncestor:     ActionNone,
		verify.SourceCode("torn_line"): ActionNone,
		verify.CodeMode:                ActionChmod,
		verify.CodeOwner:               ActionChown,
		verify.CodeRollbackIntent:      ActionFinishRollback,
		verify.CodeSegmentTorn:         ActionCutTail,
		verify.CodeIndexTorn:           ActionCutTail,
		verify.CodeLedgerTorn:          ActionCutTail,
		verify.CodeIndexMissing:        ActionRebuildIndex,
		verify.CodeIndexLagging:        ActionRebuildIndex,
		verify.CodeIndexInvalid:        ActionRebuildIndex,
		verify.CodeIndexOutOfBounds:    ActionRebuildIndex,
		verify.CodeManifestMissing:     ActionRecomputeManifest,
		verify.CodeManifestMismatch:    ActionRecomputeManifest,
		verify.CodeManifestInvalid:     ActionRecomputeManifest,
		verify.CodeManifestInvariant:   ActionRecomputeManifest,
		verify.CodeChainBreak:          ActionRecomputeManifest,
		verify.CodeSourceStale:         ActionRefresh,
		verify.CodeSourceChanged:       ActionRefresh,
		verify.CodeIndexCRC:            ActionRebuild,
		verify.CodeIndexUncovered:      ActionRebuild,
		verify.CodeUnindexedSegment:    ActionRebuild,
		verify.CodeSymlink:             ActionRebuild,
		verify.CodeSpecialFile:         ActionRebuild,
		verify.CodeSessionID:           ActionRebuild,
		verify.CodeSourceStateInvalid:  ActionRebuild,
		verify.CodeCheckpoint:          ActionRebuild,
		verify.CodeEntriesSource:       ActionRebuild,
		verify.CodeChainSource:         ActionRebuild,
	}
	for code, want := range tests {
		f := fromVerify(verify.Finding{Code: code, Path: "/p"})
		if f.Action != want || f.Repair == "" {
			t.Errorf("%s: action %s (repair %q), want %s", code, f.Action, f.Repair, want)
		}
		if notice := code == verify.SourceCode("torn_line") || code == verify.CodeSourceStale || code == verify.CodeSourceChanged; f.Notice != notice {
			t.Errorf("%s: notice %t, want %t", code, f.Notice, notice)
		}
	}
}
