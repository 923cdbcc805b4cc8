package store

import (
	"path/filepath"

	"pisess/writers/wire"
)

// The names inside a store (FORMAT.md §1). Paths are built by the functions
// below; no call site formats one.
const (
	ManifestName     = "manifest.json"
	SegmentsDir      = "segments"
	IndexDir         = "index"
	IndexName        = "offsets.jsonl"
	CheckpointsDir   = "checkpoints"
	MigrationsDir    = "migrations"
	LedgerName       = "ledger.jsonl"
	SourceStateName  = "source-state.json"
	TmpDir           = "tmp"
	MutationLockName = "store.mutation.lock"
	// BackupSuffix marks a segment (or checkpoint) that a rollback or repair
	// set aside: "<name>.bak" or "<name>.bak.N". Readers ignore them.
	BackupSuffix = ".bak"
)

// StoreDirs are the directories Create makes, in creation order.
var StoreDirs = []string{SegmentsDir, IndexDir, CheckpointsDir, MigrationsDir, TmpDir}

// ManifestPath returns <root>/manifest.json.
func ManifestPath(root string) string { return filepath.Join(root, ManifestName) }

// SegmentsPath returns <root>/segments.
func SegmentsPath(root string) string { return filepath.Join(root, SegmentsDir) }

// SegmentPath returns <root>/segments/<seq 16 digits>.seg.
func SegmentPath(root string, seq uint64) string {
	return filepath.Join(root, SegmentsDir, wire.SegmentFileName(seq))
}

// IndexDirPath returns <root>/index.
func IndexDirPath(root string) string { return filepath.Join(root, IndexDir) }

// IndexPath returns <root>/index/offsets.jsonl.
func IndexPath(root string) string { return filepath.Join(root, IndexDir, IndexName) }

// CheckpointsPath returns <root>/checkpoints.
func CheckpointsPath(root string) string { return filepath.Join(root, CheckpointsDir) }

// CheckpointPath returns <root>/checkpoints/<seq 16 digits>.json.
func CheckpointPath(root string, seq uint64) string {
	return filepath.Join(root, CheckpointsDir, wire.CheckpointFileName(seq))
}

// LedgerPath returns <root>/migrations/ledger.jsonl.
func LedgerPath(root string) string { return filepath.Join(root, MigrationsDir, LedgerName) }

// SourceStatePath returns <root>/source-state.json.
func SourceStatePath(root string) string { return filepath.Join(root, SourceStateName) }

// TmpPath returns <root>/tmp, where atomic writes prepare their files.
func TmpPath(root string) string { return filepath.Join(root, TmpDir) }

// MutationLockPath returns <root>/store.mutation.lock.
func MutationLockPath(root string) string { return filepath.Join(root, MutationLockName) }
