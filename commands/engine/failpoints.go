package engine

import "pisess/writers/durable"

// The failpoints of the per-session pipeline (build), in the order they
// are met, fsck --repair's rebuild included; the crash harness
// (commands/crash_test.go, -tags failpoints) kills pisess at each. The
// crash story is doc.go's.
var (
	fpBeforeStage       = durable.Register("engine.before-stage")        // session locked and fingerprinted, no staging directory yet
	fpAfterStage        = durable.Register("engine.after-stage")         // staging store written (not yet durable), staging_copy not yet recorded
	fpBeforeVerify      = durable.Register("engine.before-verify")       // staging_copy recorded, staging owned by the session's owner
	fpAfterVerify       = durable.Register("engine.after-verify")        // verified, integrity_check recorded
	fpBeforeSourceState = durable.Register("engine.before-source-state") // the store's own ledger written, no source-state.json
	fpAfterSourceState  = durable.Register("engine.after-source-state")  // clean source-state.json in the staging store, not yet sealed
	fpAfterStagingSeal  = durable.Register("engine.after-staging-seal")  // the staging store and the journal so far durable (one syncfs)
	fpBeforeCutover     = durable.Register("engine.before-cutover")      // the source's fingerprint re-checked: about to cut over
	fpAfterCutover      = durable.Register("engine.after-cutover")       // installed, completed not yet recorded
	fpAfterCompleted    = durable.Register("engine.after-completed")     // completed recorded, session lock still held
	// The displaced sidecars of a run's refreshes: the reproducible ones
	// are removed while the run goes on (rollback.Discarder, whose
	// failpoint engine.before-discards is), the moves of the kept ones
	// made durable after its last session (one sync per directory).
	fpAfterDiscards = durable.Register("engine.after-discards") // reproducible copies removed, kept ones synced
)
