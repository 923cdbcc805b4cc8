package rollback

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"pisess/ledger"
	"pisess/verify"
	"pisess/writers/durable"
	"pisess/writers/store"
	"pisess/writers/wire"
)

// InPlaceSpec says which sidecar CommitInPlace commits.
type InPlaceSpec struct {
	// SessionPath is the session file; SidecarDir its sidecar, which
	// writers.AppendInPlace continued where it lies.
	SessionPath, SidecarDir string
	// SourceFormat is the session's format (the cutover event's).
	SourceFormat wire.SourceFormat
	// CorrelationID is the run's id, carried by every record.
	CorrelationID string
	// BaseEntries and Appended count the sidecar's entries before the run
	// and those it appended (for the notes).
	BaseEntries, Appended uint64
	// Ops performs every file operation; the zero value is durable.OS.
	Ops durable.Ops
	// Journal is the tree journal that records the commit.
	Journal *ledger.Journal
	// Clock stamps the records; nil means time.Now.
	Clock func() time.Time
}

// PrepareInPlace readies a sidecar for a refresh that continues it in
// place (writers.AppendInPlace), before its first byte changes. The caller
// holds the session lock and the store mutation lock. In order:
//
//  1. the journal records cutover_commit (the intent: the sidecar may be
//     old or new until the run's outcome), an installed note naming the
//     sidecar's identity (a rollback acts on that directory only) and a
//     discarded note (the sidecar as it is, its first c.BaseEntries
//     entries, is not kept: the session file still holds them, so a
//     rollback of the run, or a crash, leaves pi reading the session file),
//     appended together without a sync: the caller makes them durable
//     (ledger.Journal.Sync) with the appended store's seal, before
//     CommitInPlace — off the path of the next session's work (issue 14);
//  2. the sidecar is marked dirty (FORMAT.md §8), without a sync of its
//     own: the seal of the appended store makes it durable with the rest,
//     and until then pi judges the sidecar stale anyway (a session that
//     grew no longer has the length its fingerprint claims).
//
// A power loss may so keep some of the sidecar's new bytes and lose the
// records, or the dirty mark: the sidecar is then dirty, or stale by its
// fingerprint (the session grew), never clean, and the next run rebuilds
// it; a rollback of the run finds nothing of it to undo.
//
// From here pi reads the session file until CommitInPlace.
func PrepareInPlace(c InPlaceSpec) error {
	if err := c.check(); err != nil {
		return err
	}
	id, err := ledger.InodeOf(c.SidecarDir)
	if err != nil {
		return fmt.Errorf("prepare %s: %w", c.SidecarDir, err)
	}
	ev := cutoverEvent(c.SessionPath, c.SidecarDir, c.SourceFormat, c.CorrelationID, c.now())
	notes := []ledger.Note{{
		CorrelationID: c.CorrelationID, At: c.now(), Session: c.SessionPath, Kind: ledger.NoteInstalled, Path: c.SidecarDir,
		Detail: fmt.Sprintf("continued in place: %d entries appended to the %d of the sidecar (%s)", c.Appended, c.BaseEntries, id),
	}, {
		CorrelationID: c.CorrelationID, At: c.now(), Session: c.SessionPath, Kind: ledger.NoteDiscarded, Path: c.SidecarDir,
		Detail: fmt.Sprintf("continued in place: the sidecar before this run was its first %d entries, which the session file still holds", c.BaseEntries),
	}}
	durable.Failpoint(fpBeforeInPlaceRecord)
	if err := c.Journal.AppendAllUnsynced(ledger.EventRecord(ev), ledger.NoteRecord(notes[0]), ledger.NoteRecord(notes[1])); err != nil {
		return fmt.Errorf("prepare %s: %w", c.SidecarDir, err)
	}
	durable.Failpoint(fpAfterInPlaceRecord)
	ops := c.Ops
	ops.DeferSync = true
	// Written without reading the state first: a sidecar pi (Rust) has
	// marked dirty already is written the same bytes.
	if err := writeDirty(ops, c.SidecarDir); err != nil {
		return fmt.Errorf("prepare %s: mark dirty: %w", c.SidecarDir, err)
	}
	return nil
}

func (c InPlaceSpec) check() error {
	switch {
	case c.SessionPath == "" || c.SidecarDir == "":
		return errors.New("refresh in place: session and sidecar are required")
	case !wire.ValidCorrelationID(c.CorrelationID):
		return fmt.Errorf("refresh in place: %w: %q", ErrBadCorrelationID, c.CorrelationID)
	case c.Journal == nil:
		return errors.New("refresh in place: a journal is required: it must be recorded")
	}
	return nil
}

func (c InPlaceSpec) now() string { return stamp(c.Clock) }

// CommitInPlace commits a sidecar that a refresh continued in place
// (PrepareInPlace, then writers.AppendInPlace), verified (p, of
// c.SidecarDir) and sealed: the clean source-state with p's fingerprint is
// written in place, and from then on pi uses the sidecar. It is not synced:
// what it vouches for is durable already, and a state lost to a crash is
// one pi takes for stale (the next run refreshes the sidecar again). The
// caller holds the session lock and the store mutation lock, and records
// completed.
func CommitInPlace(ctx context.Context, p verify.Passed, c InPlaceSpec) error {
	if err := c.check(); err != nil {
		return err
	}
	switch {
	case !p.Valid():
		return fmt.Errorf("commit in place %s: the sidecar was not verified (no valid verify.Passed)", c.SidecarDir)
	case filepath.Clean(p.StagingDir()) != filepath.Clean(c.SidecarDir) || filepath.Clean(p.SessionPath()) != filepath.Clean(c.SessionPath):
		return fmt.Errorf("commit in place %s: the verification was of %s against %s", c.SidecarDir, p.StagingDir(), p.SessionPath())
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("commit in place %s: %w", c.SidecarDir, err)
	}
	ops := c.Ops
	ops.DeferSync = true
	fp := p.Fingerprint()
	if err := store.WriteSourceState(ops, c.SidecarDir, wire.SourceState{State: wire.SourceClean, SourceFingerprint: &fp}); err != nil {
		return fmt.Errorf("commit in place %s: %w", c.SidecarDir, err)
	}
	durable.Failpoint(fpAfterInPlaceClean)
	return nil
}
