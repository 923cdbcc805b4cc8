package store

import "pisess/writers/durable"

// Failpoints of the store writer and its repairs: a crash test kills the
// process at each (durable.Failpoint) and checks that the store is either
// as before or as after the step, or a staging store a re-run replaces.
const (
	fpBeforeManifestWrite     = "store.before-manifest-write"
	fpAfterManifestWrite      = "store.after-manifest-write"
	fpBeforeSeal              = "store.before-seal"
	fpAfterSeal               = "store.after-seal"
	fpBeforeLedgerAppend      = "store.before-ledger-append"
	fpAfterLedgerAppend       = "store.after-ledger-append"
	fpBeforeSourceStateWrite  = "store.before-source-state-write"
	fpAfterSourceStateWrite   = "store.after-source-state-write"
	fpBeforeCheckpointPublish = "store.before-checkpoint-publish"
	fpAfterCheckpointPublish  = "store.after-checkpoint-publish"
	fpBeforeTailCut           = "store.before-tail-cut"
	fpAfterTailCut            = "store.after-tail-cut"
	fpBeforeIndexRebuild      = "store.before-index-rebuild"
	fpAfterIndexRebuild       = "store.after-index-rebuild"
)

func init() {
	for _, name := range []string{
		fpBeforeManifestWrite, fpAfterManifestWrite,
		fpBeforeSeal, fpAfterSeal,
		fpBeforeLedgerAppend, fpAfterLedgerAppend,
		fpBeforeSourceStateWrite, fpAfterSourceStateWrite,
		fpBeforeCheckpointPublish, fpAfterCheckpointPublish,
		fpBeforeTailCut, fpAfterTailCut,
		fpBeforeIndexRebuild, fpAfterIndexRebuild,
	} {
		durable.Register(name)
	}
}
