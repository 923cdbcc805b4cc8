package rollback

import "pisess/writers/durable"

// The failpoints of Cutover, in the order they are met. A crash at any of
// them leaves the old sidecar, or the new one plus a backup or quarantined
// store that the journal names; between the two renames of a refresh it
// leaves no sidecar and the backup, which a rollback (or fsck) puts back.
const (
	fpBeforeCutoverRecord   = "rollback.before-cutover-record"    // nothing done yet
	fpAfterCutoverRecord    = "rollback.after-cutover-record"     // cutover_commit and the installed note in the journal
	fpBeforeBackupRename    = "rollback.before-backup-rename"     // old sidecar still in place
	fpAfterBackupRename     = "rollback.after-backup-rename"      // old sidecar renamed to the backup, no sidecar
	fpBeforeInstallRename   = "rollback.before-install-rename"    // staging complete, not yet in place
	fpAfterInstallRename    = "rollback.after-install-rename"     // new sidecar in place, backup beside it
	fpBeforeQuarantineBkp   = "rollback.before-quarantine-backup" // backup about to move to the quarantine
	fpAfterQuarantineBackup = "rollback.after-quarantine-backup"  // backup in the quarantine, note not yet written
	fpAfterDisplacedNote    = "rollback.after-displaced-note"     // displaced note written: cutover complete
)

// The failpoints of PrepareInPlace (and markDirty's) and CommitInPlace.
const (
	fpBeforeInPlaceRecord = "rollback.before-in-place-record" // the sidecar checked, nothing written
	fpAfterInPlaceRecord  = "rollback.after-in-place-record"  // cutover_commit, installed and discarded notes appended (unsynced); sidecar untouched
	fpAfterInPlaceClean   = "rollback.after-in-place-clean"   // clean source-state written: committed
)

// The failpoints of ByCorrelation.
const (
	fpBeforeGrownCopy         = "rollback.before-grown-copy"         // a changed upgraded source is about to be copied aside
	fpAfterGrownCopy          = "rollback.after-grown-copy"          // the copy is in the quarantine
	fpBeforeSidecarQuarantine = "rollback.before-sidecar-quarantine" // the run's sidecar still installed
	fpAfterSidecarQuarantine  = "rollback.after-sidecar-quarantine"  // moved into the quarantine, no sidecar
	fpBeforeSourceLink        = "rollback.before-source-link"        // upgraded source not yet kept in the quarantine
	fpAfterSourceLink         = "rollback.after-source-link"         // upgraded source has a second name in the quarantine
	fpBeforeSourceRestore     = "rollback.before-source-restore"     // original about to replace the upgraded source
	fpAfterSourceRestore      = "rollback.after-source-restore"      // original back in place
	fpBeforeDisplacedRestore  = "rollback.before-displaced-restore"  // displaced sidecar about to come back
	fpAfterDisplacedRestore   = "rollback.after-displaced-restore"   // displaced sidecar back in place
	fpAfterRollbackRecord     = "rollback.after-rollback-record"     // one step's receipt appended to the journal
)

// The failpoints of ToCheckpoint and FinishPending.
const (
	fpBeforeStageIndex         = "rollback.before-stage-index"          // nothing written
	fpAfterStageIndex          = "rollback.after-stage-index"           // tmp/offsets.rollback.stage written, no intent
	fpBeforeIntentPublish      = "rollback.before-intent-publish"       // tmp/rollback.intent.tmp written
	fpAfterIntentPublish       = "rollback.after-intent-publish"        // intent published: recovery rolls forward from here
	fpBeforeMarkDirty          = "rollback.before-mark-dirty"           // sidecar's source-state not yet dirty
	fpAfterMarkDirty           = "rollback.after-mark-dirty"            // sidecar marked dirty, store untouched
	fpBeforeIndexInstall       = "rollback.before-index-install"        // staged index about to replace the index
	fpAfterIndexInstall        = "rollback.after-index-install"         // retained index in place, segments still long
	fpBeforeSegmentTruncate    = "rollback.before-segment-truncate"     // a segment about to be cut to its retained length
	fpAfterSegmentTruncate     = "rollback.after-segment-truncate"      // that segment cut
	fpBeforeSegmentSetAside    = "rollback.before-segment-set-aside"    // a later segment about to become .bak
	fpAfterSegmentSetAside     = "rollback.after-segment-set-aside"     // it is .bak
	fpBeforeCheckpointSetAside = "rollback.before-checkpoint-set-aside" // a newer checkpoint about to become .bak
	fpAfterCheckpointSetAside  = "rollback.after-checkpoint-set-aside"  // it is .bak
	fpBeforeManifestRewrite    = "rollback.before-manifest-rewrite"     // store cut, manifest still the old one
	fpAfterManifestRewrite     = "rollback.after-manifest-rewrite"      // manifest describes the retained store
	fpBeforeLedgerEvent        = "rollback.before-ledger-event"         // rollback/ok not yet in the store ledger
	fpAfterLedgerEvent         = "rollback.after-ledger-event"          // rollback/ok recorded
	fpBeforeIntentRemove       = "rollback.before-intent-remove"        // intent still pending
	fpAfterIntentRemove        = "rollback.after-intent-remove"         // done
)

var (
	cutoverFailpoints = []string{
		fpBeforeCutoverRecord, fpAfterCutoverRecord,
		fpBeforeBackupRename, fpAfterBackupRename,
		fpBeforeInstallRename, fpAfterInstallRename,
		fpBeforeQuarantineBkp, fpAfterQuarantineBackup,
		fpAfterDisplacedNote,
	}
	inPlaceFailpoints     = []string{fpBeforeInPlaceRecord, fpAfterInPlaceRecord, fpAfterInPlaceClean}
	correlationFailpoints = []string{
		fpBeforeGrownCopy, fpAfterGrownCopy,
		fpBeforeSidecarQuarantine, fpAfterSidecarQuarantine,
		fpBeforeSourceLink, fpAfterSourceLink,
		fpBeforeSourceRestore, fpAfterSourceRestore,
		fpBeforeDisplacedRestore, fpAfterDisplacedRestore,
		fpAfterRollbackRecord,
	}
	checkpointFailpoints = []string{
		fpBeforeStageIndex, fpAfterStageIndex,
		fpBeforeIntentPublish, fpAfterIntentPublish,
		fpBeforeMarkDirty, fpAfterMarkDirty,
		fpBeforeIndexInstall, fpAfterIndexInstall,
		fpBeforeSegmentTruncate, fpAfterSegmentTruncate,
		fpBeforeSegmentSetAside, fpAfterSegmentSetAside,
		fpBeforeCheckpointSetAside, fpAfterCheckpointSetAside,
		fpBeforeManifestRewrite, fpAfterManifestRewrite,
		fpBeforeLedgerEvent, fpAfterLedgerEvent,
		fpBeforeIntentRemove, fpAfterIntentRemove,
	}
)

func init() {
	for _, list := range [][]string{cutoverFailpoints, inPlaceFailpoints, correlationFailpoints, checkpointFailpoints} {
		for _, name := range list {
			durable.Register(name)
		}
	}
}

// CutoverFailpoints returns the failpoints of Cutover, in the order met.
func CutoverFailpoints() []string { return append([]string(nil), cutoverFailpoints...) }

// CorrelationFailpoints returns the failpoints of ByCorrelation.
func CorrelationFailpoints() []string { return append([]string(nil), correlationFailpoints...) }

// CheckpointFailpoints returns the failpoints of ToCheckpoint and
// FinishPending, in the order met.
func CheckpointFailpoints() []string { return append([]string(nil), checkpointFailpoints...) }

// Failpoints returns every failpoint of this package.
func Failpoints() []string {
	out := CutoverFailpoints()
	out = append(out, inPlaceFailpoints...)
	out = append(out, correlationFailpoints...)
	return append(out, checkpointFailpoints...)
}
