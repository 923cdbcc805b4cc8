package store

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"time"

	"pisess/writers/durable"
	"pisess/writers/wire"
)

// The documents a Writer writes besides frames: manifest, ledger, source
// state, checkpoints (FORMAT.md §5–§8).

// invariants derives the manifest invariants from what this writer wrote.
// A Writer is the only writer of the store it created (Create refuses a
// non-empty directory), so the sequence, bounds, coverage and chain
// invariants hold by construction; what the entries themselves can break is
// checked here: every parent present, no parent cycle (a cycle fails the
// reference's integrity check, hence indexWithinSegmentBounds).
func (w *Writer) invariants() wire.Invariants {
	iv := wire.AllInvariants()
	if w.vouched != nil {
		return iv // the caller checked the links (Options.Branches)
	}
	if _, _, missing := w.graph.MissingParent(); missing {
		iv.ParentLinksClosed = false
	}
	if w.graph.HasCycle() {
		iv.IndexWithinSegmentBounds = false
	}
	return iv
}

// WriteManifest writes manifest.json for the store as written so far:
// counters, head, chain and invariants from the writer's state, createdAt
// kept from a manifest already in the store (else equal to updatedAt),
// published atomically through tmp/manifest.json.tmp. sessionID must parse
// as a UUID (any form FORMAT.md §5 lists) and sourceFormat be one of the
// three; an invariant that would be false is refused, never written.
func (w *Writer) WriteManifest(sessionID, sourceFormat string) (wire.Manifest, error) {
	m, err := w.writeManifest(sessionID, wire.SourceFormat(sourceFormat))
	if err != nil {
		return wire.Manifest{}, fmt.Errorf("write manifest %s: %w", ManifestPath(w.root), err)
	}
	return m, nil
}

func (w *Writer) writeManifest(sessionID string, format wire.SourceFormat) (wire.Manifest, error) {
	if !wire.ValidUUID(sessionID) {
		return wire.Manifest{}, fmt.Errorf("session id %q is not a UUID: the reference refuses to write such a manifest", sessionID)
	}
	if !format.Valid() {
		return wire.Manifest{}, fmt.Errorf("source format %q is not jsonl_v3, sqlite_v1 or native_v2", format)
	}
	if err := w.flush(); err != nil {
		return wire.Manifest{}, err
	}
	iv := w.invariants()
	if bad := iv.False(); len(bad) > 0 {
		return wire.Manifest{}, fmt.Errorf("invariants %s would be false", strings.Join(bad, ", "))
	}
	now := wire.FormatTimestamp(w.clock())
	createdAt := now
	// A store continued in place is the store a rebuild would write now:
	// its manifest is created now too.
	if !w.inPlace {
		switch old, err := readManifest(w.ops, w.root); {
		case err == nil:
			createdAt = old.CreatedAt
		case !errors.Is(err, fs.ErrNotExist):
			return wire.Manifest{}, fmt.Errorf("read the existing manifest: %w", err)
		}
	}
	var segments uint64
	if w.head.EntrySeq > 0 {
		segments = w.segSeq
	}
	m := wire.Manifest{
		SessionID: sessionID, SourceFormat: format, CreatedAt: createdAt, UpdatedAt: now,
		Head: w.head, Counters: w.Counters(), Files: wire.StoreFiles(segments),
		Integrity:  wire.Integrity{ChainHash: w.chain, LastCRC32C: w.lastCRC},
		Invariants: iv,
	}
	m.Integrity.ManifestHash = wire.ManifestHash(m)
	data := wire.AppendManifest(nil, m)
	if len(data) > wire.MaxDocumentBytes {
		return wire.Manifest{}, fmt.Errorf("manifest of %d bytes exceeds 1 MiB", len(data))
	}
	durable.Failpoint(fpBeforeManifestWrite)
	if err := w.ops.WriteFileAtomic(w.root, TmpPath(w.root), ManifestName, data, 0o600); err != nil {
		return wire.Manifest{}, err
	}
	w.manifestSHA = hexSHA256(data)
	durable.Failpoint(fpAfterManifestWrite)
	return m, nil
}

// AppendLedger appends a migration event to migrations/ledger.jsonl,
// durably (file and, when created, directory fsync). An empty At is set
// from the clock. The existing ledger is read first and the append refused
// when it is corrupt or its last line is torn, as the reference does: the
// ledger is evidence, and a line must never be glued onto a broken one.
func (w *Writer) AppendLedger(ev wire.MigrationEvent) error {
	return AppendLedger(w.ops, w.root, ev, w.clock)
}

// AppendLedger is Writer.AppendLedger for any store root (the caller holds
// the store mutation lock when the store is installed).
func AppendLedger(ops durable.Ops, root string, ev wire.MigrationEvent, clock func() time.Time) error {
	path := LedgerPath(root)
	if ev.At == "" {
		if clock == nil {
			clock = time.Now
		}
		ev.At = wire.FormatTimestamp(clock())
	}
	if err := wire.CheckMigrationEvent(ev); err != nil {
		return fmt.Errorf("append to %s: %w", path, err)
	}
	if _, err := readLedger(ops, path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("append to %s: the existing ledger is unusable: %w", path, err)
	}
	durable.Failpoint(fpBeforeLedgerAppend)
	if err := ops.AppendLine(path, wire.AppendMigrationEvent(nil, ev)); err != nil {
		return err
	}
	durable.Failpoint(fpAfterLedgerAppend)
	return nil
}

// WriteSourceState writes source-state.json in place, as the reference
// does (create-exclusive when new, else truncate; mode 0600; file and
// directory fsync): not atomic, which is acceptable because a damaged state
// file reads as "stale" (FORMAT.md §8).
func (w *Writer) WriteSourceState(s wire.SourceState) error {
	return WriteSourceState(w.ops, w.root, s)
}

// WriteSourceState is Writer.WriteSourceState for any store root.
func WriteSourceState(ops durable.Ops, root string, s wire.SourceState) error {
	path := SourceStatePath(root)
	if !s.State.Valid() {
		return fmt.Errorf("write %s: state %q is not clean or dirty", path, s.State)
	}
	if fp := s.SourceFingerprint; fp != nil && !wire.ValidSHA256Hex(fp.SHA256) {
		return fmt.Errorf("write %s: fingerprint sha256 is not 64 lower-case hex digits", path)
	}
	data := wire.AppendSourceState(nil, s)
	if len(data) > wire.MaxSourceStateBytes {
		return fmt.Errorf("write %s: %d bytes exceeds 4096", path, len(data))
	}
	durable.Failpoint(fpBeforeSourceStateWrite)
	if err := ops.WriteFileInPlace(path, data, 0o600); err != nil {
		return err
	}
	durable.Failpoint(fpAfterSourceStateWrite)
	return nil
}

// WriteCheckpoint publishes a checkpoint of the current head, numbered one
// above the highest checkpoint in the store, with a rename that never
// replaces an existing file. The store must not be empty, and the new
// checkpoint's head must not be below the previous one's (§6). Buffered
// frames are flushed first; as everything else in a staging store they are
// made durable by Seal, not here (the reference fsyncs the segments before
// a checkpoint because its store is live).
func (w *Writer) WriteCheckpoint(reason wire.CheckpointReason) (wire.Checkpoint, error) {
	c, err := w.writeCheckpoint(reason)
	if err != nil {
		return wire.Checkpoint{}, fmt.Errorf("write checkpoint: %w", err)
	}
	return c, nil
}

func (w *Writer) writeCheckpoint(reason wire.CheckpointReason) (wire.Checkpoint, error) {
	if !reason.Valid() {
		return wire.Checkpoint{}, fmt.Errorf("reason %q is not one of the five", reason)
	}
	if w.head.EntrySeq == 0 {
		return wire.Checkpoint{}, errors.New("cannot checkpoint an empty store")
	}
	if err := w.flush(); err != nil {
		return wire.Checkpoint{}, err
	}
	existing, err := listCheckpoints(w.ops, w.root)
	if err != nil {
		return wire.Checkpoint{}, err
	}
	seq, prevHead := w.checkpointSeq, w.checkpointHead
	if n := len(existing); n > 0 && existing[n-1].seq >= seq {
		last := existing[n-1]
		c, err := readCheckpoint(w.ops, last.path, last.seq)
		if err != nil {
			return wire.Checkpoint{}, err
		}
		seq, prevHead = last.seq, c.HeadEntrySeq
	}
	if prevHead > w.head.EntrySeq {
		return wire.Checkpoint{}, fmt.Errorf("the head (%d) is below checkpoint %d's (%d)", w.head.EntrySeq, seq, prevHead)
	}
	seq++
	c := wire.Checkpoint{
		CheckpointSeq: seq, At: wire.FormatTimestamp(w.clock()),
		HeadEntrySeq: w.head.EntrySeq, HeadEntryID: w.head.EntryID,
		SnapshotRef: wire.SnapshotRef(seq), ChainHash: w.chain, Reason: reason,
	}
	if err := wire.CheckCheckpoint(c); err != nil {
		return wire.Checkpoint{}, err
	}
	data := wire.AppendCheckpoint(nil, c)
	if len(data) > wire.MaxDocumentBytes {
		return wire.Checkpoint{}, fmt.Errorf("checkpoint of %d bytes exceeds 1 MiB", len(data))
	}
	durable.Failpoint(fpBeforeCheckpointPublish)
	if err := w.ops.CreateNoReplace(CheckpointsPath(w.root), TmpPath(w.root), wire.CheckpointFileName(seq), data); err != nil {
		return wire.Checkpoint{}, err
	}
	durable.Failpoint(fpAfterCheckpointPublish)
	w.checkpointSeq, w.checkpointHead = seq, c.HeadEntrySeq
	return c, nil
}
