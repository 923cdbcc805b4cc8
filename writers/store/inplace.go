package store

import (
	"context"
	"fmt"
)

// ContinueInPlace opens the store at dir to append to it where it lies:
// the Writer goes on after dir's last frame exactly as Resume's goes on
// after a copy (so the same appends give the same bytes), but writes into
// dir's own last segment and index, and WriteManifest replaces dir's
// manifest (created now, as a rebuild's would be). It is the incremental
// refresh without a copy (issue 14).
//
// The store is checked as Resume checks a vouched base (opt.BaseVouched is
// implied): the caller vouches for the manifest and index (it compares
// Base's digests with what it recorded before the first Append), each
// frame is CRC-checked against its row, every segment is exactly covered by
// its rows, no checkpoint, rollback intent or other segment file is there.
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
	w.baseVouched, w.inPlace = true, true
	b, err := w.copyFrom(ctx, dir)
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
	w.seg, w.segBuf = seg, segBufPool.Get()
	w.segBuf.Reset(seg)
	if size != w.segBytes {
		return notResumable("segment %d has %d bytes, its rows cover %d", w.segSeq, size, w.segBytes)
	}
	idx, size, err := w.ops.OpenAppendPrivate(IndexPath(w.root))
	if err != nil {
		return fmt.Errorf("index: %w: %w", err, ErrNotResumable)
	}
	w.idx, w.idxBuf = idx, idxBufPool.Get()
	w.idxBuf.Reset(idx)
	if size != indexBytes {
		return notResumable("the index has %d bytes, %d were read", size, indexBytes)
	}
	return nil
}
