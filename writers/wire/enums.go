package wire

// Schema constants (the first member of every document).
const (
	SchemaFrame          = "pi.session_store_v2.segment_frame.v1"
	SchemaIndexRow       = "pi.session_store_v2.offset_index.v1"
	SchemaManifest       = "pi.session_store_v2.manifest.v1"
	SchemaCheckpoint     = "pi.session_store_v2.checkpoint.v1"
	SchemaMigrationEvent = "pi.session_store_v2.migration_event.v1"
	SchemaSourceState    = "pi.session_store_v2.source_state.v1"
	SchemaRollbackIntent = "pi.session_store_v2.rollback_intent.v1"
	SchemaContract       = "pi.session_store_v2.contract.v1"
)

// StoreVersion is the manifest's storeVersion.
const StoreVersion = 2

// Manifest files members: fixed values the reference checks (§5).
const (
	FilesSegmentDir          = "segments/"
	FilesIndexPath           = "index/offsets.jsonl"
	FilesCheckpointDir       = "checkpoints/"
	FilesMigrationLedgerPath = "migrations/ledger.jsonl"
)

// EntryType is a frame's entryType (§2).
type EntryType string

const (
	EntryMessage             EntryType = "message"
	EntryModelChange         EntryType = "model_change"
	EntryThinkingLevelChange EntryType = "thinking_level_change"
	EntryCompaction          EntryType = "compaction"
	EntryBranchSummary       EntryType = "branch_summary"
	EntryLabel               EntryType = "label"
	EntrySessionInfo         EntryType = "session_info"
	EntryCustom              EntryType = "custom"
)

// Valid reports whether t is one of the reference's eight entry types.
func (t EntryType) Valid() bool {
	switch t {
	case EntryMessage, EntryModelChange, EntryThinkingLevelChange, EntryCompaction,
		EntryBranchSummary, EntryLabel, EntrySessionInfo, EntryCustom:
		return true
	}
	return false
}

// SourceFormat is a manifest's sourceFormat and a migration event's
// sourceFormat and targetFormat.
type SourceFormat string

const (
	FormatJSONLv3  SourceFormat = "jsonl_v3"
	FormatSQLitev1 SourceFormat = "sqlite_v1"
	FormatNativeV2 SourceFormat = "native_v2"
)

func (f SourceFormat) Valid() bool {
	switch f {
	case FormatJSONLv3, FormatSQLitev1, FormatNativeV2:
		return true
	}
	return false
}

// RowState is an index row's state. The contract admits three values; the
// reference writes and accepts only RowActive, and so does ParseIndexRow.
type RowState string

const (
	RowActive     RowState = "active"
	RowCompacted  RowState = "compacted"
	RowSuperseded RowState = "superseded"
)

// Valid reports whether s is one of the contract's values.
func (s RowState) Valid() bool {
	switch s {
	case RowActive, RowCompacted, RowSuperseded:
		return true
	}
	return false
}

// CheckpointReason is a checkpoint's reason (§6).
type CheckpointReason string

const (
	ReasonPeriodic      CheckpointReason = "periodic"
	ReasonManual        CheckpointReason = "manual"
	ReasonPreMigration  CheckpointReason = "pre_migration"
	ReasonPostMigration CheckpointReason = "post_migration"
	ReasonRecovery      CheckpointReason = "recovery"
)

func (r CheckpointReason) Valid() bool {
	switch r {
	case ReasonPeriodic, ReasonManual, ReasonPreMigration, ReasonPostMigration, ReasonRecovery:
		return true
	}
	return false
}

// Phase is a migration event's phase (§7).
type Phase string

const (
	PhasePlanned        Phase = "planned"
	PhaseStagingCopy    Phase = "staging_copy"
	PhaseIntegrityCheck Phase = "integrity_check"
	PhaseCutoverCommit  Phase = "cutover_commit"
	PhaseRollback       Phase = "rollback"
	PhaseCompleted      Phase = "completed"
	PhaseFailed         Phase = "failed"
)

func (p Phase) Valid() bool {
	switch p {
	case PhasePlanned, PhaseStagingCopy, PhaseIntegrityCheck, PhaseCutoverCommit,
		PhaseRollback, PhaseCompleted, PhaseFailed:
		return true
	}
	return false
}

// Outcome is a migration event's outcome.
type Outcome string

const (
	OutcomeOK               Outcome = "ok"
	OutcomeRecoverableError Outcome = "recoverable_error"
	OutcomeFatalError       Outcome = "fatal_error"
)

func (o Outcome) Valid() bool {
	switch o {
	case OutcomeOK, OutcomeRecoverableError, OutcomeFatalError:
		return true
	}
	return false
}

// ErrorClass is a migration event's errorClass; "" means absent.
type ErrorClass string

const (
	ErrorClassIntegrityMismatch  ErrorClass = "integrity_mismatch"
	ErrorClassIndexCorruption    ErrorClass = "index_corruption"
	ErrorClassIOFailure          ErrorClass = "io_failure"
	ErrorClassAtomicityViolation ErrorClass = "atomicity_violation"
)

// Valid reports whether c is one of the four classes (not "").
func (c ErrorClass) Valid() bool {
	switch c {
	case ErrorClassIntegrityMismatch, ErrorClassIndexCorruption, ErrorClassIOFailure,
		ErrorClassAtomicityViolation:
		return true
	}
	return false
}

// SourceStatus is source-state.json's state (§8).
type SourceStatus string

const (
	SourceClean SourceStatus = "clean"
	SourceDirty SourceStatus = "dirty"
)

func (s SourceStatus) Valid() bool { return s == SourceClean || s == SourceDirty }
