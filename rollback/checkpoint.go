package rollback

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"syscall"

	"pisess/ledger"
	"pisess/writers/durable"
	"pisess/writers/store"
	"pisess/writers/wire"
)

// The rollback's files in a store's tmp/ (FORMAT.md §6).
const (
	intentName    = "rollback.intent.json"
	intentTmpName = "rollback.intent.tmp"
	stageName     = "offsets.rollback.stage"
)

// IntentPath returns <store>/tmp/rollback.intent.json: a rollback to a
// checkpoint is pending while it exists (fsck reports it, FinishPending
// finishes it).
func IntentPath(storeDir string) string { return filepath.Join(store.TmpPath(storeDir), intentName) }

func stagePath(storeDir string) string { return filepath.Join(store.TmpPath(storeDir), stageName) }

// Result is what ToCheckpoint did (or, in a dry run, would do).
type Result struct {
	Store      string
	Checkpoint wire.Checkpoint
	DryRun     bool
	// Recovered is true when a pending rollback (a crashed earlier one)
	// was finished first; in a dry run, Pending says one would be.
	Recovered, Pending bool
	// Retained and Dropped count the entries kept and cut.
	Retained, Dropped uint64
	// Truncated names the segments cut to their retained length; SetAside
	// the segments and checkpoints renamed to .bak (their new names) and
	// the files that keep the bytes cut from a segment (<seg>.tail.bak).
	Truncated []string
	SetAside  []string
	// MarkedDirty is true when the store is a sidecar and its
	// source-state.json now says dirty, so pi reads the source (which still
	// holds every entry) rather than the shortened store.
	MarkedDirty bool
	// Event is the rollback event appended to the store's ledger.
	Event wire.MigrationEvent
}

// ToCheckpoint rolls the store at storeDir back to its checkpoint
// checkpointSeq, as the reference's rollback_to_checkpoint does (FORMAT.md
// §6), under the store's store.mutation.lock (and, for a sidecar, the
// session lock first):
//
//  1. a pending rollback is finished first (FinishPendingLocked);
//  2. preflight: the checkpoints are monotonic, the checkpoint exists, the
//     index rows up to its head are a contiguous prefix whose frames read
//     back and whose hash chain and head id are the checkpoint's;
//  3. the retained rows are staged in tmp/offsets.rollback.stage and the
//     intent tmp/rollback.intent.json is published (through
//     tmp/rollback.intent.tmp, never replacing one);
//  4. the intent is carried out (see finishIntent): the sidecar is marked
//     dirty, the staged index installed, segments cut to their retained
//     length, later segments and newer checkpoints renamed to .bak, the
//     manifest rewritten, rollback/ok appended, the intent removed. From
//     the intent on, a crash is finished by the next FinishPending, never
//     undone.
//
// One deliberate difference from the reference: before a segment is cut,
// the bytes it loses are copied to segments/<name>.tail.bak (readers ignore
// *.bak), because pisess never drops a byte; the reference truncates
// without a copy. For a sidecar, marking source-state.json dirty is
// pisess's addition too (FORMAT.md §6): pi then reads the source, which
// still holds every entry, instead of resuming a shortened store.
//
// A preflight refusal changes nothing; a failure after it appends a
// rollback/fatal_error event to the store's ledger and leaves the intent
// for recovery. With opt.DryRun only the preflight runs.
func ToCheckpoint(ctx context.Context, storeDir string, checkpointSeq uint64, opt Options) (Result, error) {
	res := Result{Store: storeDir, DryRun: opt.DryRun}
	cid := opt.CorrelationID
	if cid == "" {
		cid = ledger.NewCorrelationID()
	}
	if !wire.ValidCorrelationID(cid) {
		return res, fmt.Errorf("rollback %s to checkpoint %d: %w: %q", storeDir, checkpointSeq, ErrBadCorrelationID, cid)
	}
	mid := opt.migrationID()
	if !wire.ValidUUID(mid) {
		return res, fmt.Errorf("rollback %s to checkpoint %d: migration id %q is not a UUID", storeDir, checkpointSeq, mid)
	}
	if k, err := lstatKind(storeDir); err != nil || k != kindDir {
		return res, fmt.Errorf("rollback %s to checkpoint %d: not a store directory (%v)", storeDir, checkpointSeq, err)
	}
	if opt.DryRun {
		k, err := lstatKind(IntentPath(storeDir))
		if err != nil {
			return res, err
		}
		res.Pending = k != kindMissing
	} else {
		unlock, err := lockStore(ctx, storeDir, opt)
		if err != nil {
			return res, fmt.Errorf("rollback %s to checkpoint %d: %w", storeDir, checkpointSeq, err)
		}
		defer unlock()
		recovered, err := FinishPendingLocked(ctx, storeDir, opt)
		if err != nil {
			return res, fmt.Errorf("rollback %s to checkpoint %d: finish the pending rollback first: %w", storeDir, checkpointSeq, err)
		}
		res.Recovered = recovered
	}

	st, err := store.Open(storeDir, store.ReadOptions{Ops: opt.Ops})
	if err != nil {
		return res, preflightErr(checkpointSeq, err)
	}
	cp, err := findCheckpoint(st, checkpointSeq)
	if err != nil {
		return res, preflightErr(checkpointSeq, err)
	}
	res.Checkpoint = cp
	p, err := buildPlan(st, cp)
	if err != nil {
		return res, preflightErr(checkpointSeq, err)
	}
	ctxManifest, err := manifestContext(st)
	if err != nil {
		return res, preflightErr(checkpointSeq, err)
	}
	res.Retained, res.Dropped = cp.HeadEntrySeq, p.total-cp.HeadEntrySeq
	if opt.DryRun {
		res.Truncated, res.SetAside = p.describe(storeDir, cp)
		return res, nil
	}

	intent, err := publishIntent(storeDir, cp, p, mid, cid, ctxManifest, opt)
	if err != nil {
		return res, recordFailure(storeDir, cp.CheckpointSeq, mid, cid, opt, err)
	}
	done, err := finishIntent(storeDir, intent, opt)
	done.Recovered, done.Dropped = res.Recovered, res.Dropped
	if err != nil {
		return done, recordFailure(storeDir, cp.CheckpointSeq, mid, cid, opt, err)
	}
	return done, nil
}

func preflightErr(seq uint64, err error) error {
	return fmt.Errorf("rollback preflight rejected checkpoint %d: %w", seq, err)
}

// findCheckpoint reads every checkpoint (each must be a valid document
// whose number matches its name), checks that numbers and heads never go
// backwards, and returns number seq.
func findCheckpoint(st *store.Store, seq uint64) (wire.Checkpoint, error) {
	cps, err := st.Checkpoints()
	if err != nil {
		return wire.Checkpoint{}, err
	}
	var found *wire.Checkpoint
	for i, c := range cps {
		if i > 0 && (c.HeadEntrySeq < cps[i-1].HeadEntrySeq || c.CompactedBeforeEntrySeq < cps[i-1].CompactedBeforeEntrySeq) {
			return wire.Checkpoint{}, fmt.Errorf("checkpoint %d goes back from checkpoint %d", c.CheckpointSeq, cps[i-1].CheckpointSeq)
		}
		if c.CheckpointSeq == seq {
			found = &cps[i]
		}
	}
	if found == nil {
		return wire.Checkpoint{}, fmt.Errorf("%w: %s", ErrNoCheckpoint, store.CheckpointPath(st.Root(), seq))
	}
	return *found, nil
}

// plan is what a rollback keeps of a store.
type plan struct {
	retained []wire.IndexRow
	total    uint64            // rows in the index now
	keep     map[uint64]uint64 // segment → retained length
	segments []segmentFile     // every *.seg, by number
}

type segmentFile struct {
	seq  uint64
	path string
	size int64
}

// buildPlan validates the checkpoint's prefix of the index as the
// reference's build_rollback_plan does and computes what to keep: the rows
// up to the head must be entries 1..head, their frames must read back
// (CRC, document, coordinates) with parents inside the prefix, and their
// hash chain and last id must be the checkpoint's.
func buildPlan(st *store.Store, cp wire.Checkpoint) (plan, error) {
	rows, err := st.ReadIndex()
	if err != nil {
		return plan{}, err
	}
	p := plan{total: uint64(len(rows)), keep: map[uint64]uint64{}}
	for _, r := range rows {
		if r.EntrySeq <= cp.HeadEntrySeq {
			p.retained = append(p.retained, r)
		}
	}
	if uint64(len(p.retained)) != cp.HeadEntrySeq {
		return plan{}, fmt.Errorf("checkpoint head %d is outside the contiguous index prefix (%d rows up to it)", cp.HeadEntrySeq, len(p.retained))
	}
	it := st.Entries()
	defer it.Close()
	chain, last := wire.ChainGenesis, ""
	ids := map[string]bool{}
	for i := range p.retained {
		if !it.Next() {
			if err := it.Err(); err != nil {
				return plan{}, err
			}
			return plan{}, fmt.Errorf("the index ends before entry %d", i+1)
		}
		f, r := it.Frame(), it.Row()
		if r != p.retained[i] {
			return plan{}, fmt.Errorf("rollback prefix is not contiguous at entrySeq %d", r.EntrySeq)
		}
		if f.ParentEntryID != "" && !ids[f.ParentEntryID] {
			return plan{}, fmt.Errorf("entry %q names parent %q outside the retained prefix", f.EntryID, f.ParentEntryID)
		}
		ids[f.EntryID] = true
		chain, last = wire.ChainStep(chain, f.PayloadSHA256), f.EntryID
		if end := r.End(); end > p.keep[r.SegmentSeq] {
			p.keep[r.SegmentSeq] = end
		}
	}
	if last != cp.HeadEntryID {
		return plan{}, fmt.Errorf("checkpoint head id %q does not match the retained prefix's %q", cp.HeadEntryID, last)
	}
	if chain != cp.ChainHash {
		return plan{}, fmt.Errorf("checkpoint chain hash does not match the retained prefix at entrySeq %d", cp.HeadEntrySeq)
	}
	if p.segments, err = listSegments(st.Root()); err != nil {
		return plan{}, err
	}
	for _, s := range p.segments {
		if keep, ok := p.keep[s.seq]; ok && int64(keep) > s.size {
			return plan{}, fmt.Errorf("retained length %d exceeds the size of %s (%d)", keep, s.path, s.size)
		}
	}
	return p, nil
}

// listSegments lists segments/*.seg whose stem is a number, as the
// reference does (set-aside *.seg.bak files are not segments).
func listSegments(root string) ([]segmentFile, error) {
	dir := store.SegmentsPath(root)
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []segmentFile
	for _, e := range entries {
		seq, ok, numeric := wire.ParseSegmentFileName(e.Name())
		if !ok || !numeric {
			continue
		}
		fi, err := e.Info()
		if err != nil {
			return nil, err
		}
		if !fi.Mode().IsRegular() {
			return nil, fmt.Errorf("%s is not a regular file", filepath.Join(dir, e.Name()))
		}
		out = append(out, segmentFile{seq: seq, path: filepath.Join(dir, e.Name()), size: fi.Size()})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].seq < out[j].seq })
	return out, nil
}

// describe lists, for a dry run, the segments that would be cut and the
// files that would be set aside.
func (p plan) describe(root string, cp wire.Checkpoint) (truncated, setAside []string) {
	for _, s := range p.segments {
		keep, ok := p.keep[s.seq]
		switch {
		case ok && keep > 0 && int64(keep) < s.size:
			truncated = append(truncated, fmt.Sprintf("%s: %d → %d bytes (the cut bytes kept in %s.tail.bak)", s.path, s.size, keep, filepath.Base(s.path)))
		case !ok || keep == 0:
			setAside = append(setAside, s.path)
		}
	}
	cps, _ := checkpointFiles(root)
	for _, c := range cps {
		if c.seq > cp.CheckpointSeq {
			setAside = append(setAside, c.path)
		}
	}
	return truncated, setAside
}

// manifestContext is what the rollback keeps of the manifest: nil when the
// store has none; a manifest that cannot be read refuses the rollback.
func manifestContext(st *store.Store) (*wire.IntentManifest, error) {
	m, err := st.Manifest()
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &wire.IntentManifest{SessionID: m.SessionID, SourceFormat: m.SourceFormat, CreatedAt: m.CreatedAt}, nil
}

// publishIntent stages the retained index and publishes the intent.
func publishIntent(root string, cp wire.Checkpoint, p plan, mid, cid string, m *wire.IntentManifest, opt Options) (wire.RollbackIntent, error) {
	var rows []byte
	for _, r := range p.retained {
		rows = wire.AppendIndexRow(rows, r)
	}
	d := sha256Hex(rows)
	intent := wire.RollbackIntent{
		Checkpoint: cp, MigrationID: mid, CorrelationID: cid,
		RetainedIndexSHA256: d, RetainedIndexBytes: uint64(len(rows)),
		Manifest: m,
	}
	if err := wire.CheckRollbackIntent(intent); err != nil {
		return intent, err
	}
	doc := wire.AppendRollbackIntent(nil, intent)
	if len(doc) > wire.MaxDocumentBytes {
		return intent, fmt.Errorf("rollback intent of %d bytes exceeds 1 MiB", len(doc))
	}
	tmp := store.TmpPath(root)
	if err := opt.Ops.MkdirPrivate(tmp); err != nil {
		return intent, err
	}
	if k, err := lstatKind(IntentPath(root)); err != nil || k != kindMissing {
		return intent, fmt.Errorf("pending rollback intent already exists: %s", IntentPath(root))
	}
	durable.Failpoint(fpBeforeStageIndex)
	if err := opt.Ops.WriteFileInPlace(stagePath(root), rows, 0o600); err != nil {
		return intent, err
	}
	durable.Failpoint(fpAfterStageIndex)
	// The reference writes the intent to tmp/rollback.intent.tmp, fsyncs it
	// and publishes it with a rename that never replaces: written in place
	// here (create or truncate, fsync file and directory), then renamed.
	if err := opt.Ops.WriteFileInPlace(filepath.Join(tmp, intentTmpName), doc, 0o600); err != nil {
		return intent, err
	}
	durable.Failpoint(fpBeforeIntentPublish)
	if err := opt.Ops.RenameNoReplace(filepath.Join(tmp, intentTmpName), IntentPath(root)); err != nil {
		return intent, err
	}
	durable.Failpoint(fpAfterIntentPublish)
	return intent, nil
}

// FinishPending finishes a rollback to a checkpoint that a crash left
// pending in storeDir (its intent exists), taking the session lock (for a
// sidecar) and the store mutation lock, and reports whether there was one.
// Every pisess command that changes a store calls it first, as every
// changing open of the reference recovers a pending intent first; a store
// without an intent costs one lstat and takes no lock. Recovery only rolls
// forward; a failure appends rollback/fatal_error to the store's ledger and
// is returned, the intent staying for the next attempt.
func FinishPending(ctx context.Context, storeDir string) (bool, error) {
	return FinishPendingWith(ctx, storeDir, Options{})
}

// FinishPendingWith is FinishPending with options (lock timeout, ops,
// clock).
func FinishPendingWith(ctx context.Context, storeDir string, opt Options) (bool, error) {
	if k, err := lstatKind(IntentPath(storeDir)); err != nil || k == kindMissing {
		return false, err
	}
	if opt.DryRun {
		return true, nil
	}
	unlock, err := lockStore(ctx, storeDir, opt)
	if err != nil {
		return true, fmt.Errorf("finish pending rollback of %s: %w", storeDir, err)
	}
	defer unlock()
	return FinishPendingLocked(ctx, storeDir, opt)
}

// FinishPendingLocked is FinishPending for a caller that already holds the
// store's locks (the session lock for a sidecar, then store.mutation.lock):
// taking them again would wait for itself.
func FinishPendingLocked(ctx context.Context, storeDir string, opt Options) (bool, error) {
	b, err := readIntent(opt.Ops, storeDir)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return true, fmt.Errorf("finish pending rollback of %s: %w", storeDir, err)
	}
	if err := ctx.Err(); err != nil {
		return true, err
	}
	if _, err := finishIntent(storeDir, b, opt); err != nil {
		return true, recordFailure(storeDir, b.Checkpoint.CheckpointSeq, b.MigrationID, b.CorrelationID, opt,
			fmt.Errorf("finish pending rollback of %s: %w", storeDir, err))
	}
	return true, nil
}

func readIntent(ops durable.Ops, root string) (wire.RollbackIntent, error) {
	f, err := ops.OpenNoFollow(IntentPath(root), syscall.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return wire.RollbackIntent{}, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return wire.RollbackIntent{}, err
	}
	if !fi.Mode().IsRegular() {
		return wire.RollbackIntent{}, fmt.Errorf("%s is not a regular file", IntentPath(root))
	}
	if fi.Size() > wire.MaxDocumentBytes {
		return wire.RollbackIntent{}, fmt.Errorf("%s exceeds 1 MiB", IntentPath(root))
	}
	b := make([]byte, fi.Size())
	if _, err := f.ReadAt(b, 0); err != nil {
		return wire.RollbackIntent{}, err
	}
	return wire.ParseRollbackIntent(b)
}

// finishIntent carries out a published intent. Every step is keyed off the
// intent and checks what is done, so it can run again from any point:
//
//  1. a sidecar's source-state.json is marked dirty (first: from here pi
//     must read the source, which holds every entry);
//  2. the staged index replaces the index (when still staged, and only if
//     its size and SHA-256 are the intent's; else the index must be);
//  3. the plan is rebuilt from that index and checked again; segments are
//     cut to their retained length, segments with nothing retained and
//     checkpoints newer than the target are renamed to .bak (.bak.N);
//  4. the store is read back: entry count, hash chain and index;
//  5. the manifest is recomputed (createdAt kept), when there was one;
//  6. rollback/ok goes to the store's ledger, unless recorded already;
//  7. the intent is removed.
func finishIntent(root string, intent wire.RollbackIntent, opt Options) (Result, error) {
	res := Result{Store: root, Checkpoint: intent.Checkpoint, Retained: intent.Checkpoint.HeadEntrySeq}
	if err := wire.CheckRollbackIntent(intent); err != nil {
		return res, err
	}
	if _, ok := sourceOfSidecar(root); ok {
		if err := markDirty(opt.Ops, root); err != nil {
			return res, fmt.Errorf("mark the sidecar dirty: %w", err)
		}
		res.MarkedDirty = true
	}
	if err := installIndex(root, intent, opt.Ops); err != nil {
		return res, err
	}
	st, err := store.Open(root, store.ReadOptions{Ops: opt.Ops})
	if err != nil {
		return res, err
	}
	p, err := buildPlan(st, intent.Checkpoint)
	if err != nil {
		return res, fmt.Errorf("rebuild the rollback plan: %w", err)
	}
	if res.Truncated, res.SetAside, err = cutSegments(root, p, opt.Ops); err != nil {
		return res, err
	}
	set, err := setAsideCheckpoints(root, intent.Checkpoint.CheckpointSeq, opt.Ops)
	res.SetAside = append(res.SetAside, set...)
	if err != nil {
		return res, err
	}
	v, err := verifyRetained(st, intent.Checkpoint)
	if err != nil {
		return res, err
	}
	if m := intent.Manifest; m != nil {
		durable.Failpoint(fpBeforeManifestRewrite)
		got, err := store.RecomputeManifest(root, m.SessionID, m.SourceFormat)
		if err != nil {
			return res, err
		}
		durable.Failpoint(fpAfterManifestRewrite)
		if got.CreatedAt != m.CreatedAt {
			return res, fmt.Errorf("rollback manifest reconciliation changed createdAt from %s to %s", m.CreatedAt, got.CreatedAt)
		}
	}
	ev := wire.MigrationEvent{
		MigrationID: intent.MigrationID, Phase: wire.PhaseRollback, At: opt.now(),
		SourcePath: intent.Checkpoint.SnapshotRef, TargetPath: absPath(root),
		SourceFormat: wire.FormatNativeV2, TargetFormat: wire.FormatNativeV2,
		Verification: v, Outcome: wire.OutcomeOK, CorrelationID: intent.CorrelationID,
	}
	recorded, err := findEvent(root, intent.MigrationID, intent.CorrelationID, wire.OutcomeOK)
	if err != nil {
		return res, err
	}
	if recorded != nil {
		ev = *recorded
	} else {
		durable.Failpoint(fpBeforeLedgerEvent)
		if err := ledger.AppendStoreEventWith(opt.Ops, root, ev); err != nil {
			return res, err
		}
		durable.Failpoint(fpAfterLedgerEvent)
	}
	res.Event = ev
	durable.Failpoint(fpBeforeIntentRemove)
	if err := removeFile(opt.Ops, IntentPath(root)); err != nil {
		return res, err
	}
	if err := opt.Ops.SyncDir(store.TmpPath(root)); err != nil {
		return res, err
	}
	durable.Failpoint(fpAfterIntentRemove)
	return res, nil
}

// markDirty writes a dirty source-state.json in place, unless it already
// says dirty (so that recovery run twice writes it once).
func markDirty(ops durable.Ops, root string) error {
	if st, err := store.Open(root, store.ReadOptions{Ops: ops}); err == nil {
		if ss, err := st.SourceState(); err == nil && ss.State == wire.SourceDirty {
			return nil
		}
	}
	return writeDirty(ops, root)
}

// writeDirty writes the dirty source state, whatever the state was (a
// dirty one is written again, the same bytes).
func writeDirty(ops durable.Ops, root string) error {
	durable.Failpoint(fpBeforeMarkDirty)
	if err := store.WriteSourceState(ops, root, wire.SourceState{State: wire.SourceDirty}); err != nil {
		return err
	}
	durable.Failpoint(fpAfterMarkDirty)
	return nil
}

// installIndex puts the staged index in place, or checks that it is.
func installIndex(root string, intent wire.RollbackIntent, ops durable.Ops) error {
	stage := stagePath(root)
	k, err := lstatKind(stage)
	if err != nil {
		return err
	}
	matches := func(path string) (bool, error) {
		d, err := fileDigest(ops, path, "")
		if err != nil {
			return false, err
		}
		return uint64(d.size) == intent.RetainedIndexBytes && d.sha == intent.RetainedIndexSHA256, nil
	}
	if k == kindMissing {
		ok, err := matches(store.IndexPath(root))
		if err != nil {
			return fmt.Errorf("active rollback index: %w", err)
		}
		if !ok {
			return errors.New("active rollback index does not match durable intent")
		}
		return nil
	}
	ok, err := matches(stage)
	if err != nil {
		return fmt.Errorf("staged rollback index: %w", err)
	}
	if !ok {
		return errors.New("staged rollback index does not match durable intent")
	}
	durable.Failpoint(fpBeforeIndexInstall)
	if err := ops.Rename(stage, store.IndexPath(root)); err != nil {
		return err
	}
	durable.Failpoint(fpAfterIndexInstall)
	return nil
}

// cutSegments truncates each segment to its retained length, first
// keeping the bytes it cuts (keepTail), and sets aside the segments with
// nothing retained.
func cutSegments(root string, p plan, ops durable.Ops) (truncated, setAside []string, err error) {
	for _, s := range p.segments {
		keep, ok := p.keep[s.seq]
		if ok && keep > 0 {
			if int64(keep) < s.size {
				tail, err := keepTail(ops, root, s, keep)
				if err != nil {
					return truncated, setAside, err
				}
				setAside = append(setAside, tail)
				durable.Failpoint(fpBeforeSegmentTruncate)
				if err := ops.Truncate(s.path, int64(keep)); err != nil {
					return truncated, setAside, err
				}
				durable.Failpoint(fpAfterSegmentTruncate)
				truncated = append(truncated, s.path)
			}
			continue
		}
		bak, err := setAsideName(s.path)
		if err != nil {
			return truncated, setAside, err
		}
		durable.Failpoint(fpBeforeSegmentSetAside)
		if err := ops.RenameNoReplace(s.path, bak); err != nil {
			return truncated, setAside, err
		}
		durable.Failpoint(fpAfterSegmentSetAside)
		setAside = append(setAside, bak)
	}
	return truncated, setAside, nil
}

type checkpointFile struct {
	seq  uint64
	path string
}

func checkpointFiles(root string) ([]checkpointFile, error) {
	dir := store.CheckpointsPath(root)
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []checkpointFile
	for _, e := range entries {
		seq, ok, numeric := wire.ParseCheckpointFileName(e.Name())
		if ok && numeric {
			out = append(out, checkpointFile{seq, filepath.Join(dir, e.Name())})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].seq < out[j].seq })
	return out, nil
}

// setAsideCheckpoints renames the checkpoints newer than seq to .bak.
func setAsideCheckpoints(root string, seq uint64, ops durable.Ops) ([]string, error) {
	cps, err := checkpointFiles(root)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, c := range cps {
		if c.seq <= seq {
			continue
		}
		bak, err := setAsideName(c.path)
		if err != nil {
			return out, err
		}
		durable.Failpoint(fpBeforeCheckpointSetAside)
		if err := ops.RenameNoReplace(c.path, bak); err != nil {
			return out, err
		}
		durable.Failpoint(fpAfterCheckpointSetAside)
		out = append(out, bak)
	}
	return out, nil
}

// verifyRetained reads the cut store back whole (every index rule pi's
// resume applies, every frame) and compares it with the checkpoint.
func verifyRetained(st *store.Store, cp wire.Checkpoint) (wire.Verification, error) {
	it := st.Entries()
	defer it.Close()
	var n uint64
	chain := wire.ChainGenesis
	for it.Next() {
		n++
		chain = wire.ChainStep(chain, it.Frame().PayloadSHA256)
	}
	v := wire.Verification{
		EntryCountMatch: n == cp.HeadEntrySeq,
		HashChainMatch:  chain == cp.ChainHash,
		IndexConsistent: it.Err() == nil,
	}
	if !v.EntryCountMatch || !v.HashChainMatch || !v.IndexConsistent {
		return v, &verifyError{seq: cp.CheckpointSeq, v: v, err: it.Err()}
	}
	return v, nil
}

type verifyError struct {
	seq uint64
	v   wire.Verification
	err error
}

func (e *verifyError) Error() string {
	s := fmt.Sprintf("rollback verification failed for checkpoint %d (entry count %t, hash chain %t, index %t)",
		e.seq, e.v.EntryCountMatch, e.v.HashChainMatch, e.v.IndexConsistent)
	if e.err != nil {
		s += ": " + e.err.Error()
	}
	return s
}

func (e *verifyError) Unwrap() error { return e.err }

// findEvent returns the store ledger's rollback event of this migration,
// correlation and outcome, if recorded.
func findEvent(root, mid, cid string, outcome wire.Outcome) (*wire.MigrationEvent, error) {
	evs, err := ledger.ReadStoreEvents(root)
	if err != nil {
		return nil, err
	}
	for i := range evs {
		ev := &evs[i]
		if ev.Phase == wire.PhaseRollback && ev.MigrationID == mid && ev.CorrelationID == cid && ev.Outcome == outcome {
			return ev, nil
		}
	}
	return nil, nil
}

// recordFailure appends rollback/fatal_error (once per migration and
// correlation) and returns cause, with the recording's own failure if any.
func recordFailure(root string, seq uint64, mid, cid string, opt Options, cause error) error {
	recorded, err := findEvent(root, mid, cid, wire.OutcomeFatalError)
	if err == nil && recorded == nil {
		err = ledger.AppendStoreEventWith(opt.Ops, root, wire.MigrationEvent{
			MigrationID: mid, Phase: wire.PhaseRollback, At: opt.now(),
			SourcePath: store.CheckpointPath(absPath(root), seq), TargetPath: absPath(root),
			SourceFormat: wire.FormatNativeV2, TargetFormat: wire.FormatNativeV2,
			Outcome: wire.OutcomeFatalError, ErrorClass: failureClass(cause), CorrelationID: cid,
		})
	}
	if err != nil {
		return fmt.Errorf("%w; additionally the fatal rollback event could not be recorded: %v", cause, err)
	}
	return cause
}

// failureClass classifies a failed rollback for its fatal_error event, by
// error type rather than by message (the reference matches words).
func failureClass(err error) wire.ErrorClass {
	var ve *verifyError
	var ce *store.CorruptionError
	var pe *fs.PathError
	var le *os.LinkError
	var errno syscall.Errno
	switch {
	case errors.As(err, &ve):
		if !ve.v.IndexConsistent {
			return wire.ErrorClassIndexCorruption
		}
		return wire.ErrorClassIntegrityMismatch
	case errors.Is(err, wire.ErrChecksum):
		return wire.ErrorClassIntegrityMismatch
	case errors.As(err, &ce), errors.Is(err, store.ErrIndexStructure), errors.Is(err, store.ErrOutOfBounds):
		return wire.ErrorClassIndexCorruption
	case errors.As(err, &pe), errors.As(err, &le), errors.As(err, &errno):
		return wire.ErrorClassIOFailure
	}
	return wire.ErrorClassAtomicityViolation
}

// lockStore takes the session lock of a sidecar's source, then the store
// mutation lock, each given to the owner of what it guards when pisess
// runs as root (pi opens both O_RDWR as that user). It returns the unlock.
func lockStore(ctx context.Context, root string, opt Options) (func(), error) {
	var locks []*durable.Lock
	unlock := func() {
		for i := len(locks) - 1; i >= 0; i-- {
			locks[i].Unlock()
		}
	}
	if src, ok := sourceOfSidecar(root); ok {
		l, err := opt.Ops.LockFile(ctx, src+".lock", opt.lockTimeout())
		if err != nil {
			return nil, err
		}
		locks = append(locks, l)
		if uid, gid, err := opt.Ops.Owner(src); err == nil {
			_ = opt.Ops.ChownIfRoot(src+".lock", uid, gid)
		}
	}
	l, err := opt.Ops.LockFile(ctx, store.MutationLockPath(root), opt.lockTimeout())
	if err != nil {
		unlock()
		return nil, err
	}
	locks = append(locks, l)
	if uid, gid, err := opt.Ops.Owner(root); err == nil {
		_ = opt.Ops.ChownIfRoot(store.MutationLockPath(root), uid, gid)
	}
	return unlock, nil
}

func removeFile(ops durable.Ops, path string) error {
	if ops.Remove != nil {
		return ops.Remove(path)
	}
	return durable.OS.Remove(path)
}

func absPath(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}

// keepTail copies the bytes a rollback is about to cut from segment s
// (from keep to its end) to segments/<name>.tail.bak (or .tail.bak.N), and
// returns that path. The reference truncates without a copy; pisess never
// drops a byte, and readers ignore *.bak names, so the copy costs nothing
// but disk. It is written through tmp/, sealed, then renamed into
// segments/; an earlier copy of the same bytes (a crash before the
// truncation) is reused rather than copied again.
func keepTail(ops durable.Ops, root string, s segmentFile, keep uint64) (string, error) {
	f, err := ops.OpenNoFollow(s.path, syscall.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return "", err
	}
	defer f.Close()
	n := s.size - int64(keep)
	h := sha256.New()
	if _, err := io.Copy(h, io.NewSectionReader(f, int64(keep), n)); err != nil {
		return "", fmt.Errorf("read the tail of %s: %w", s.path, err)
	}
	want := hex.EncodeToString(h.Sum(nil))
	base := s.path + ".tail"
	var dst string
	for i := 0; i < 10000 && dst == ""; i++ {
		name := base + ".bak"
		if i > 0 {
			name = fmt.Sprintf("%s.bak.%d", base, i)
		}
		k, err := lstatKind(name)
		if err != nil {
			return "", err
		}
		if k == kindMissing {
			dst = name
			break
		}
		if d, err := fileDigest(ops, name, ""); err == nil && d.size == n && d.sha == want {
			return name, nil
		}
	}
	if dst == "" {
		return "", fmt.Errorf("keep the tail of %s: every .tail.bak name is taken", s.path)
	}
	tmpDir := store.TmpPath(root)
	tmp := filepath.Join(tmpDir, filepath.Base(dst)+".tmp")
	if k, err := lstatKind(tmp); err != nil {
		return "", err
	} else if k == kindFile {
		if err := removeFile(ops, tmp); err != nil {
			return "", err
		}
	}
	out, err := ops.CreatePrivate(tmp)
	if err != nil {
		return "", err
	}
	h.Reset()
	_, err = io.Copy(io.MultiWriter(out, h), io.NewSectionReader(f, int64(keep), n))
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil && hex.EncodeToString(h.Sum(nil)) != want {
		err = errors.New("the segment changed while its tail was copied")
	}
	if err != nil {
		return "", fmt.Errorf("keep the tail of %s: %w", s.path, err)
	}
	if err := ops.SyncTree(tmpDir); err != nil {
		return "", err
	}
	if err := ops.RenameNoReplace(tmp, dst); err != nil {
		return "", err
	}
	return dst, nil
}
