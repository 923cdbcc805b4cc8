package rollback

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/uuid"

	"pisess/ledger"
	"pisess/verify"
	"pisess/writers/durable"
	"pisess/writers/store"
	"pisess/writers/wire"
)

// CutoverSpec says what Cutover installs where.
type CutoverSpec struct {
	// SessionPath is the session file the store was built from.
	SessionPath string
	// StagingDir is the verified staging store, a sibling of SidecarDir
	// (<stem>.v2.staging.<uuid>), so that the install is one rename.
	StagingDir string
	// SidecarDir is <stem>.v2.
	SidecarDir string
	// Tree is the session tree, whose .pisess/quarantine receives a
	// displaced sidecar.
	Tree string
	// CorrelationID is the run's id, carried by every record.
	CorrelationID string
	// RelPath is the session's path relative to Tree (it names the
	// quarantine place, ledger.QuarantinePath).
	RelPath string
	// OwnerUID and OwnerGID own everything Cutover creates (and the
	// installed store) when pisess runs as root: the session's owner.
	OwnerUID, OwnerGID int
	// OwnerSet says the caller already gave the staging store to OwnerUID
	// and OwnerGID (and created anything since through durable's creates,
	// which inherit the directory's owner): Cutover does not walk it to
	// give it again.
	OwnerSet bool
	// Ops performs every file operation; the zero value is durable.OS.
	Ops durable.Ops
	// Journal is the tree journal that records the cutover.
	Journal *ledger.Journal
	// Clock stamps the records; nil means time.Now.
	Clock func() time.Time
	// DeferQuarantineSync leaves the move of a displaced sidecar into the
	// quarantine (directories made, the rename) and its displaced note
	// unsynced: the caller syncs CutoverResult.SyncDirs and the journal
	// once for its run, or not at all for a copy it then removes. The
	// install itself is synced as ever; a crash before the caller's syncs
	// can only leave the displaced copy at its backup name, where rollback
	// and fsck look for it too.
	DeferQuarantineSync bool
}

// CutoverResult says what Cutover did.
type CutoverResult struct {
	// Displaced is where the store the new sidecar replaced now is: its
	// quarantine path; "" when there was none. When the move into the
	// quarantine failed after the install, it is the backup sibling
	// (<stem>.v2.backup.<hex>) and Warning says why.
	Displaced string
	// Warning reports a problem after the cutover committed: the new
	// sidecar is installed and the old one kept, but not where it should
	// be. fsck recognises the backup; a rollback of the run finds it.
	Warning string
	// SyncDirs, with CutoverSpec.DeferQuarantineSync, are the directories
	// whose entries the move of the displaced sidecar changed: the
	// session's directory and the quarantine's, from .pisess/ down.
	SyncDirs []string
}

func (c CutoverSpec) check() error {
	switch {
	case c.SessionPath == "" || c.StagingDir == "" || c.SidecarDir == "" || c.Tree == "" || c.RelPath == "":
		return errors.New("cutover: session, staging, sidecar, tree and relative path are all required")
	case !wire.ValidCorrelationID(c.CorrelationID):
		return fmt.Errorf("cutover: %w: %q", ErrBadCorrelationID, c.CorrelationID)
	case c.Journal == nil:
		return errors.New("cutover: a journal is required: a cutover must be recorded")
	case filepath.Dir(filepath.Clean(c.StagingDir)) != filepath.Dir(filepath.Clean(c.SidecarDir)):
		return fmt.Errorf("cutover: staging %s is not a sibling of %s: the install must be one rename", c.StagingDir, c.SidecarDir)
	}
	return nil
}

func (c CutoverSpec) now() string { return stamp(c.Clock) }

// stamp is the time a record carries: clock's, or the wall clock's.
func stamp(clock func() time.Time) string {
	if clock != nil {
		return wire.FormatTimestamp(clock())
	}
	return wire.FormatTimestamp(time.Now())
}

// Cutover installs the verified staging store c.StagingDir as the sidecar
// c.SidecarDir (STYLE.md §5, FORMAT.md §9 INV-007). The caller holds the
// session lock. In order:
//
//  1. the journal records cutover_commit (the intent: ledger.Unfinished
//     reads a cutover_commit without an outcome as "the sidecar may be new
//     or old") and an installed note naming the staging directory's
//     identity, which a rename keeps, so that a rollback can tell the store
//     this run installed from any other;
//  2. an existing sidecar is renamed to BackupPath (no replace; parent
//     fsynced);
//  3. the staging directory is renamed to the sidecar (no replace; parent
//     fsynced); if that fails, the backup is renamed back;
//  4. the backup is moved into <tree>/.pisess/quarantine/<id>/ and a
//     displaced note records where, so that a rollback can put it back.
//
// A crash leaves the old sidecar (before 2), no sidecar and the backup
// (between 2 and 3: rollback, or fsck, renames it back), or the new sidecar
// with the backup beside it or in the quarantine. Nothing is deleted. The
// caller records the outcome (completed or failed) after it returns.
//
// p proves that the staging store was verified against its source; only
// package verify can make one.
func Cutover(ctx context.Context, p verify.Passed, c CutoverSpec) (CutoverResult, error) {
	if err := c.check(); err != nil {
		return CutoverResult{}, err
	}
	if err := checkPassed(p, c); err != nil {
		return CutoverResult{}, fmt.Errorf("cutover %s: %w", c.SidecarDir, err)
	}
	if err := ctx.Err(); err != nil {
		return CutoverResult{}, fmt.Errorf("cutover %s: %w", c.SidecarDir, err)
	}
	ops := c.Ops
	if k, err := lstatKind(c.StagingDir); err != nil || k != kindDir {
		return CutoverResult{}, fmt.Errorf("cutover %s: staging %s is not a directory (%v)", c.SidecarDir, c.StagingDir, err)
	}
	st, err := store.Open(c.StagingDir, store.ReadOptions{Ops: ops})
	if err != nil {
		return CutoverResult{}, fmt.Errorf("cutover %s: %w", c.SidecarDir, err)
	}
	m, err := st.Manifest()
	if err != nil {
		return CutoverResult{}, fmt.Errorf("cutover %s: staging manifest: %w", c.SidecarDir, err)
	}
	if k, err := lstatKind(store.SourceStatePath(c.StagingDir)); err != nil {
		return CutoverResult{}, fmt.Errorf("cutover %s: %w", c.SidecarDir, err)
	} else if k == kindMissing {
		// A sidecar is installed with the clean fingerprint it was verified
		// against (DESIGN.md): without one pi would verify it all again.
		fp := p.Fingerprint()
		if err := store.WriteSourceState(ops, c.StagingDir, wire.SourceState{State: wire.SourceClean, SourceFingerprint: &fp}); err != nil {
			return CutoverResult{}, fmt.Errorf("cutover %s: %w", c.SidecarDir, err)
		}
	}
	if os.Geteuid() == 0 && !c.OwnerSet {
		// pi's open fails outright on a store it cannot read (FORMAT.md §1):
		// whatever created the staging store, it must be the session owner's.
		if err := ops.ChownTree(c.StagingDir, c.OwnerUID, c.OwnerGID); err != nil {
			return CutoverResult{}, fmt.Errorf("cutover %s: %w", c.SidecarDir, err)
		}
	}
	stagingID, err := ledger.InodeOf(c.StagingDir)
	if err != nil {
		return CutoverResult{}, fmt.Errorf("cutover %s: %w", c.SidecarDir, err)
	}

	old, err := lstatKind(c.SidecarDir)
	if err != nil {
		return CutoverResult{}, fmt.Errorf("cutover %s: %w", c.SidecarDir, err)
	}
	// What is at the sidecar's path and is no store (a regular file, a
	// FIFO, a symlink: pi refuses each) is displaced as a store is: the
	// entry itself (never a link's target) is renamed, kept, recorded
	// (issue 32 §3: such a sidecar was left alone, and no rebuild could
	// ever replace it).
	what := displacedWhat(c.SidecarDir, old)
	backup := BackupPath(c.SidecarDir, c.CorrelationID)
	if k, err := lstatKind(backup); err != nil || k != kindMissing {
		return CutoverResult{}, fmt.Errorf("cutover %s: %s already exists (a cutover of this run was interrupted): run fsck --repair", c.SidecarDir, backup)
	}

	durable.Failpoint(fpBeforeCutoverRecord)
	ev := cutoverEvent(c.SessionPath, c.SidecarDir, m.SourceFormat, c.CorrelationID, c.now())
	// The intent and the installed note reach the disk together, with the
	// note's fsync, before anything is renamed.
	if err := c.Journal.AppendUnsynced(ledger.EventRecord(ev)); err != nil {
		return CutoverResult{}, fmt.Errorf("cutover %s: %w", c.SidecarDir, err)
	}
	installed := ledger.Note{
		CorrelationID: c.CorrelationID, At: c.now(), Session: c.SessionPath, Kind: ledger.NoteInstalled,
		Path:   c.SidecarDir,
		Detail: fmt.Sprintf("verified staging %s installed as the sidecar (%s)", filepath.Base(c.StagingDir), stagingID),
	}
	if err := c.Journal.Append(ledger.NoteRecord(installed)); err != nil {
		return CutoverResult{}, fmt.Errorf("cutover %s: %w", c.SidecarDir, err)
	}
	durable.Failpoint(fpAfterCutoverRecord)

	if old != kindMissing {
		durable.Failpoint(fpBeforeBackupRename)
		if err := ops.RenameNoReplace(c.SidecarDir, backup); err != nil {
			return CutoverResult{}, c.undoBackup(backup, fmt.Errorf("cutover %s: displace the old sidecar: %w", c.SidecarDir, err))
		}
		durable.Failpoint(fpAfterBackupRename)
	}

	durable.Failpoint(fpBeforeInstallRename)
	if err := ops.RenameNoReplace(c.StagingDir, c.SidecarDir); err != nil {
		err = fmt.Errorf("cutover %s: install: %w", c.SidecarDir, err)
		if k, _ := lstatKind(c.StagingDir); k == kindMissing {
			// The rename happened and only the directory fsync failed: the
			// verified store is visible, the backup stays for fsck.
			return CutoverResult{Displaced: c.backupIf(old, backup)}, err
		}
		if old != kindMissing {
			return CutoverResult{}, c.undoBackup(backup, err)
		}
		return CutoverResult{}, err
	}
	durable.Failpoint(fpAfterInstallRename)

	if old == kindMissing {
		return CutoverResult{}, nil
	}
	q := ledger.QuarantinePath(c.Tree, c.CorrelationID, c.RelPath, kindDisplaced)
	where, err := c.quarantineBackup(backup, q, what)
	res := CutoverResult{Displaced: where}
	if c.DeferQuarantineSync {
		res.SyncDirs = append(quarantineDirs(c.Tree, filepath.Dir(q)), filepath.Dir(c.SidecarDir))
	}
	var unrecorded *unrecordedError
	if errors.As(err, &unrecorded) {
		// The new sidecar is installed, the old one kept, but the journal
		// does not say where: a rollback of this run could not put it
		// back. Not a cutover to report done (issue 32 §4).
		return res, fmt.Errorf("cutover %s: %w", c.SidecarDir, err)
	}
	if err != nil {
		res.Warning = err.Error()
	}
	return res, nil
}

// unrecordedError is a displaced sidecar kept in the quarantine whose
// displaced note could not be written.
type unrecordedError struct {
	where string
	err   error
}

func (e *unrecordedError) Error() string {
	return fmt.Sprintf("the new sidecar is installed and the old one is at %s, but the journal could not record it "+
		"(pisess rollback of this run cannot put it back; move it back by hand to undo): %v", e.where, e.err)
}

func (e *unrecordedError) Unwrap() error { return e.err }

// displacedWhat says what a sidecar path that is no store holds, for the
// displaced note ("" for a store: a directory, or nothing).
func displacedWhat(path string, k kind) string {
	switch k {
	case kindMissing, kindDir:
		return ""
	case kindFile:
		return "a regular file, not a store"
	}
	fi, err := os.Lstat(path)
	switch {
	case err != nil:
		return "not a store"
	case fi.Mode()&os.ModeSymlink != 0:
		target, _ := os.Readlink(path)
		return fmt.Sprintf("a symlink to %s (the link itself is kept here, its target is untouched)", target)
	}
	return fmt.Sprintf("a special file (%v), not a store", fi.Mode().Type())
}

// cutoverEvent is the cutover_commit event (the intent) of a verified
// store about to become session's sidecar.
func cutoverEvent(session, sidecar string, format wire.SourceFormat, correlationID, at string) wire.MigrationEvent {
	return wire.MigrationEvent{
		MigrationID: uuid.NewString(), Phase: wire.PhaseCutoverCommit, At: at,
		SourcePath: session, TargetPath: sidecar,
		SourceFormat: format, TargetFormat: wire.FormatNativeV2,
		Verification:  wire.Verification{EntryCountMatch: true, HashChainMatch: true, IndexConsistent: true},
		Outcome:       wire.OutcomeOK,
		CorrelationID: correlationID,
	}
}

// quarantineDirs lists dir and its parents up to the tree's .pisess/,
// outermost first (dir lies under it: ledger.QuarantinePath).
func quarantineDirs(tree, dir string) []string {
	top := filepath.Join(tree, ledger.PisessDir)
	var out []string
	for d := filepath.Clean(dir); strings.HasPrefix(d, top) && d != filepath.Dir(d); d = filepath.Dir(d) {
		out = append([]string{d}, out...)
		if d == top {
			break
		}
	}
	return out
}

// Quarantine kinds (ledger.QuarantinePath's last name part).
const (
	kindDisplaced        = "displaced"           // the sidecar a refresh replaced
	kindRolledBackStore  = "rolled-back-sidecar" // the sidecar a rolled-back run had installed
	kindRolledBackSource = "rolled-back-source"  // the upgraded source a rollback replaced by its original
	kindChangedSource    = "changed-source"      // a copy of a source pi changed after its upgrade
)

func (c CutoverSpec) backupIf(old kind, backup string) string {
	if old != kindMissing {
		return backup
	}
	return ""
}

// undoBackup puts a displaced sidecar back after a failed install, as the
// reference does, and returns cause (joined with the restore's error).
func (c CutoverSpec) undoBackup(backup string, cause error) error {
	if k, _ := lstatKind(backup); k == kindMissing {
		return cause
	}
	if k, _ := lstatKind(c.SidecarDir); k != kindMissing {
		return cause
	}
	if err := c.Ops.RenameNoReplace(backup, c.SidecarDir); err != nil {
		return fmt.Errorf("%w; the old sidecar stays at %s: %v", cause, backup, err)
	}
	return cause
}

// quarantineBackup moves the backup into the quarantine and records it,
// returning where the displaced store is; what says what it was when it
// was no store. A note that cannot be written is an *unrecordedError.
func (c CutoverSpec) quarantineBackup(backup, q, what string) (string, error) {
	ops := c.Ops
	ops.DeferSync = ops.DeferSync || c.DeferQuarantineSync
	if err := mkdirQuarantine(ops, c.Tree, filepath.Dir(q), c.OwnerUID, c.OwnerGID); err != nil {
		return backup, fmt.Errorf("cutover committed, the old sidecar stays at %s: %w", backup, err)
	}
	durable.Failpoint(fpBeforeQuarantineBkp)
	if err := ops.RenameNoReplace(backup, q); err != nil {
		if k, _ := lstatKind(backup); k == kindMissing {
			return q, fmt.Errorf("cutover committed, the old sidecar is at %s: %w", q, err)
		}
		return backup, fmt.Errorf("cutover committed, the old sidecar stays at %s: %w", backup, err)
	}
	durable.Failpoint(fpAfterQuarantineBackup)
	n := ledger.Note{
		CorrelationID: c.CorrelationID, At: c.now(), Session: c.SessionPath, Kind: ledger.NoteDisplaced,
		Path: c.SidecarDir, QuarantinePath: q,
		Detail: "the sidecar this cutover replaced, kept for a rollback",
	}
	if what != "" {
		n.Detail = "what was at the sidecar's path, " + what + ", which pi refuses: displaced by this cutover, kept for a rollback"
	}
	appendNote := c.Journal.Append
	if c.DeferQuarantineSync {
		appendNote = c.Journal.AppendUnsynced
	}
	if err := appendNote(ledger.NoteRecord(n)); err != nil {
		return q, &unrecordedError{where: q, err: err}
	}
	durable.Failpoint(fpAfterDisplacedNote)
	return q, nil
}

// checkPassed binds the proof to this cutover: it must be valid and be
// about this staging store and this session.
func checkPassed(p verify.Passed, c CutoverSpec) error {
	switch {
	case !p.Valid():
		return errors.New("the staging store was not verified (no valid verify.Passed)")
	case filepath.Clean(p.StagingDir()) != filepath.Clean(c.StagingDir):
		return fmt.Errorf("the verification was of %s, not %s", p.StagingDir(), c.StagingDir)
	case filepath.Clean(p.SessionPath()) != filepath.Clean(c.SessionPath):
		return fmt.Errorf("the verification was against %s, not %s", p.SessionPath(), c.SessionPath)
	}
	return nil
}
