package store

import "pisess/writers/durable"

// Failpoints of the store writer and its repairs: a crash test kills the
// process at each (durable.Failpoint) and checks that the store is either
// as before or as after the step, or a staging store a re-run replaces.
var (
	fpBeforeManifestWrite     = durable.Register("store.before-manifest-write")
	fpAfterManifestWrite      = durable.Register("store.after-manifest-write")
	fpBeforeSeal              = durable.Register("store.before-seal")
	fpAfterSeal               = durable.Register("store.after-seal")
	fpBeforeLedgerAppend      = durable.Register("store.before-ledger-append")
	fpAfterLedgerAppend       = durable.Register("store.after-ledger-append")
	fpBeforeSourceStateWrite  = durable.Register("store.before-source-state-write")
	fpAfterSourceStateWrite   = durable.Register("store.after-source-state-write")
	fpBeforeCheckpointPublish = durable.Register("store.before-checkpoint-publish")
	fpAfterCheckpointPublish  = durable.Register("store.after-checkpoint-publish")
	fpBeforeTailCut           = durable.Register("store.before-tail-cut")
	fpAfterTailCut            = durable.Register("store.after-tail-cut")
	fpBeforeIndexRebuild      = durable.Register("store.before-index-rebuild")
	fpAfterIndexRebuild       = durable.Register("store.after-index-rebuild")
)
