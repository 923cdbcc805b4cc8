package verify

import (
	"testing"
)

// TestActionFor pins the repair of every verify code: in place what the
// frames or the metadata can mend, a rebuild from the source otherwise,
// nothing for what pisess cannot mend.
func TestActionFor(t *testing.T) {
	tests := map[string]RepairAction{
		CodeSymlinkAncestor:     ActionNone,
		SourceCode("torn_line"): ActionNone,
		CodeMode:                ActionChmod,
		CodeOwner:               ActionChown,
		CodeRollbackIntent:      ActionFinishRollback,
		CodeSegmentTorn:         ActionCutTail,
		CodeIndexTorn:           ActionCutTail,
		CodeLedgerTorn:          ActionCutTail,
		CodeIndexMissing:        ActionRebuildIndex,
		CodeIndexLagging:        ActionRebuildIndex,
		CodeIndexInvalid:        ActionRebuildIndex,
		CodeIndexOutOfBounds:    ActionRebuildIndex,
		CodeManifestMissing:     ActionRecomputeManifest,
		CodeManifestMismatch:    ActionRecomputeManifest,
		CodeManifestInvalid:     ActionRecomputeManifest,
		CodeManifestInvariant:   ActionRecomputeManifest,
		CodeChainBreak:          ActionRecomputeManifest,
		CodeSourceStale:         ActionRefresh,
		CodeSourceChanged:       ActionRefresh,
		CodeIndexCRC:            ActionRebuild,
		CodeIndexUncovered:      ActionRebuild,
		CodeUnindexedSegment:    ActionRebuild,
		CodeSymlink:             ActionRebuild,
		CodeSpecialFile:         ActionRebuild,
		CodeSessionID:           ActionRebuild,
		CodeSourceStateInvalid:  ActionRebuild,
		CodeCheckpoint:          ActionRebuild,
		CodeEntriesSource:       ActionRebuild,
		CodeChainSource:         ActionRebuild,
	}
	for code, want := range tests {
		f := fromVerify(Finding{Code: code, Path: "/p"})
		if f.Action != want || f.Repair == "" {
			t.Errorf("%s: action %s (repair %q), want %s", code, f.Action, f.Repair, want)
		}
		if notice := code == SourceCode("torn_line") || code == CodeSourceStale || code == CodeSourceChanged; f.Notice != notice {
			t.Errorf("%s: notice %t, want %t", code, f.Notice, notice)
		}
	}
}
