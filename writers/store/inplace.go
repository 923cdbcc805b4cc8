package store

import (
	"context"
	"fmt"
	"os"

	"pisess/writers/wire"
)

// ContinueInPlace opens the store at dir to append to it where it lies:
// the Writer goes on after dir's last frame exactly as if it had written
// every frame itself (so the same appends give the same bytes as a store
// written from all the entries at once), writing into dir's own last
// segment and index, and WriteManifest replaces dir's manifest (created
// now, as a rebuild's would be). It is the incremental refresh (issue 14).
//
// The caller vouches for the manifest and the index (it compares Base's
// digests with what it recorded before the first Append). The store is
// checked: every row in this codec's form, every segment exactly covered
// by its rows, no checkpoint, rollback intent or other segment file, the
// manifest's head, counters and CRC equal to what the rows give; and each
// frame, as opt says:
//
//   - by default it is CRC-checked against its row, on a goroutine of its
//     own, not parsed: the chain and the message, compaction and branch
//     counts are the manifest's, and the base entries' links are not
//     known, so an appended entry may only continue the base's last entry,
//     an entry appended after it, or nothing (another parent is
//     ErrBaseLinksNeeded, returned before anything is written);
//   - with opt.FramesVouched it is not read at all (nor are the
//     directories listed, with opt.Names; the rows are read for their ids
//     only, the index digest going on from opt.IndexSHA256State), with the
//     same limit on parents;
//   - with opt.BaseLinks every frame is read and parsed as a verification
//     reads it (CRC, form, head against the row, links), the chain and
//     counts recomputed and compared with the manifest: any parent will do.
//
// Nothing is written before the first Append; on error dir is untouched.
//
// The caller holds the session lock and the store mutation lock, and marks
// the sidecar dirty before the first Append: a crash part way then leaves a
// store pi does not use, and that the next refresh rebuilds (FORMAT.md §8).
func ContinueInPlace(ctx context.Context, dir string, opt Options) (*Writer, Base, error) {
	opt.Branches = nil
	w, err := blankWriter(dir, opt)
	if err != nil {
		return nil, Base{}, fmt.Errorf("continue store %s in place: %w", dir, err)
	}
	w.inPlace, w.baseVouched = true, !opt.BaseLinks
	if w.framesVouched = opt.FramesVouched && !opt.BaseLinks; w.framesVouched {
		w.names, w.idxState = opt.Names, opt.IndexSHA256State
	}
	b, err := w.readBase(ctx, dir)
	if err == nil {
		err = w.openForAppend(b.IndexBytes)
	}
	if err != nil {
		_ = w.Close()
		return nil, Base{}, fmt.Errorf("continue store %s in place: %w", dir, err)
	}
	return w, b, nil
}

// openForAppend opens the last segment and the index of a store continued
// in place after their last bytes, which must still be where the check
// found them.
func (w *Writer) openForAppend(indexBytes int64) error {
	if w.head.EntrySeq == 0 {
		return nil // an empty store: the first Append creates both
	}
	seg, size, err := w.ops.OpenAppendPrivate(SegmentPath(w.root, w.segSeq))
	if err != nil {
		return fmt.Errorf("segment %d: %w: %w", w.segSeq, err, ErrNotResumable)
	}
	w.seg, w.segBuf = seg, appendSegBufPool.Get()
	w.segBuf.Reset(seg)
	if size != w.segBytes {
		return notResumable("segment %d has %d bytes, its rows cover %d", w.segSeq, size, w.segBytes)
	}
	idx, size, err := w.ops.OpenAppendPrivate(IndexPath(w.root))
	if err != nil {
		return fmt.Errorf("index: %w: %w", err, ErrNotResumable)
	}
	w.idx, w.idxBuf = idx, appendIdxBufPool.Get()
	w.idxBuf.Reset(idx)
	if size != indexBytes {
		return notResumable("the index has %d bytes, %d were read", size, indexBytes)
	}
	return nil
}

// crcChecker CRC-checks the frames of a store continued in place on a
// goroutine of its own, while the rows are read and the id graph is built
// on the caller's: the rows come in batches, in order, and each segment is
// read once, in chunks (baseRead.vouchedFrame).
type crcChecker struct {
	batch   []frameCheck
	batches chan []frameCheck
	done    chan error
	stopped bool
}

// frameCheck is a frame to check, or (file set) the start of its segment.
type frameCheck struct {
	row  wire.IndexRow
	file *os.File
	size int64
}

// checkBatch is how many frames go to the checker at once.
const checkBatch = 1024

func startChecker(w *Writer) *crcChecker {
	k := &crcChecker{batches: make(chan []frameCheck, 4), done: make(chan error, 1)}
	go func() {
		r := &baseRead{w: w}
		defer r.release()
		var err error
		for b := range k.batches {
			for _, fc := range b {
				switch {
				case fc.file != nil && err != nil:
					fc.file.Close()
				case fc.file != nil:
					r.closeSource()
					r.src, r.srcSize, r.srcSeq, r.srcRead = fc.file, fc.size, fc.row.SegmentSeq, 0
					r.chunk, r.at = r.chunk[:0], 0
				case err == nil:
					err = r.vouchedFrame(fc.row)
				}
			}
		}
		k.done <- err
	}()
	return k
}

func (k *crcChecker) segment(f *os.File, size int64, seq uint64) {
	k.add(frameCheck{row: wire.IndexRow{SegmentSeq: seq}, file: f, size: size})
}

func (k *crcChecker) frame(row wire.IndexRow) { k.add(frameCheck{row: row}) }

func (k *crcChecker) add(fc frameCheck) {
	if k.batch == nil {
		k.batch = make([]frameCheck, 0, checkBatch)
	}
	k.batch = append(k.batch, fc)
	if len(k.batch) == checkBatch {
		k.batches <- k.batch
		k.batch = nil
	}
}

// wait hands over the last batch and returns the first mismatch found.
func (k *crcChecker) wait() error {
	if k.stopped {
		return nil
	}
	k.stopped = true
	if len(k.batch) > 0 {
		k.batches <- k.batch
	}
	close(k.batches)
	return <-k.done
}

// stop ends the checker (its files closed) if wait has not.
func (k *crcChecker) stop() { _ = k.wait() }
