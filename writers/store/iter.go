package store

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"pisess/writers/bufpool"
	"pisess/writers/idgraph"
	"pisess/writers/wire"
)

// Iterator streams every frame of a store in entry order (Prometheus wlog
// style: Next, Frame, Err). It reads the index one line at a time and each
// segment sequentially, so memory holds one frame plus the set of entry ids
// (for the duplicate check) whatever the store's size. Besides each frame's
// own checks (ReadFrame), it enforces the index rules pi's resume enforces
// (FORMAT.md §11.5): entrySeq contiguous from 1, unique ids, segments in
// order, frameSeq and byteOffset contiguous from 1 and 0 in each segment,
// segments and frames within the size limit, every segment byte covered,
// no unindexed *.seg. The first violation stops the iteration; Err returns
// it as a *CorruptionError, matching ErrTornTail when the newest bytes are
// an incomplete write (a frame cut short, an unterminated or zero-filled
// tail), ErrUncovered for other unindexed bytes, wire.ErrChecksum for a
// CRC or payload digest mismatch, ErrOutOfBounds, ErrIndexStructure or
// ErrIndexMismatch, or a *wire.DocError.
type Iterator struct {
	s   *Store
	idx *os.File
	lr  *lineReader

	seg   *segmentFile
	rd    *bufio.Reader
	pos   int64
	seen  map[uint64]bool
	ids   idgraph.Graph // the ids so far: pointer-free, a million cost ~25 MB
	prev  wire.IndexRow
	buf   []byte
	row   wire.IndexRow
	frame wire.Frame
	err   error
	done  bool
}

// Entries returns an iterator over every frame. Close it when done.
func (s *Store) Entries() *Iterator {
	return &Iterator{s: s, seen: map[uint64]bool{}}
}

// Frame returns the current frame. Its Payload is valid until the next
// call to Next: copy it to keep it.
func (it *Iterator) Frame() wire.Frame { return it.frame }

// Row returns the current frame's index row.
func (it *Iterator) Row() wire.IndexRow { return it.row }

// IDs is the graph of the ids read so far: node n is the n-th frame Next
// yielded. A caller that needs the parent links (verify) sets them on it
// rather than holding a second copy of every id.
func (it *Iterator) IDs() *idgraph.Graph { return &it.ids }

// Err returns the error that stopped the iteration, nil at a clean end.
func (it *Iterator) Err() error { return it.err }

// Close releases the open files.
func (it *Iterator) Close() error {
	it.done = true
	var err error
	if it.seg != nil {
		err = it.seg.f.Close()
		it.seg = nil
	}
	if it.idx != nil {
		if cerr := it.idx.Close(); err == nil {
			err = cerr
		}
		it.idx = nil
	}
	readBufPool.Put(it.rd)
	it.rd = nil
	return err
}

// readBufPool holds the 256 KiB read buffers of frame readers (Iterator,
// Check), reused from store to store.
var readBufPool = bufpool.NewReaders(256 << 10)

func (it *Iterator) fail(err error) bool {
	it.err = err
	it.Close()
	return false
}

// Next advances to the next frame, reporting whether there is one.
func (it *Iterator) Next() bool {
	if it.err != nil || it.done {
		return false
	}
	if it.lr == nil {
		f, _, err := openRegular(it.s.ops, IndexPath(it.s.root))
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return it.finish()
		case err != nil:
			return it.fail(&CorruptionError{Path: IndexPath(it.s.root), Err: err})
		}
		it.idx, it.lr = f, newLineReader(f)
	}
	line, err := it.lr.Next()
	if err == io.EOF {
		return it.finish()
	}
	ipath := IndexPath(it.s.root)
	if err != nil {
		return it.fail(&CorruptionError{Path: ipath, Line: it.lr.line, Err: err})
	}
	row, err := wire.ParseIndexRow(line)
	if err != nil {
		return it.fail(&CorruptionError{Path: ipath, Line: it.lr.line, Err: err})
	}
	if err := it.checkRow(row); err != nil {
		return it.fail(&CorruptionError{Path: ipath, Line: it.lr.line, Err: err})
	}
	if it.seg == nil || it.seg.seq != row.SegmentSeq {
		if err := it.nextSegment(row.SegmentSeq); err != nil {
			return it.fail(err)
		}
	}
	return it.read(row)
}

// checkRow applies the index-wide rules to the next row.
func (it *Iterator) checkRow(row wire.IndexRow) error {
	if row.EntrySeq != it.prev.EntrySeq+1 {
		return fmt.Errorf("entrySeq %d follows %d: %w", row.EntrySeq, it.prev.EntrySeq, ErrIndexStructure)
	}
	if row.SegmentSeq < it.prev.SegmentSeq {
		return fmt.Errorf("segmentSeq %d follows %d: %w", row.SegmentSeq, it.prev.SegmentSeq, ErrIndexStructure)
	}
	wantFrame, wantOffset := uint64(1), uint64(0)
	if row.SegmentSeq == it.prev.SegmentSeq {
		wantFrame, wantOffset = it.prev.FrameSeq+1, it.prev.End()
	}
	if row.FrameSeq != wantFrame {
		return fmt.Errorf("frameSeq %d in segment %d, expected %d: %w", row.FrameSeq, row.SegmentSeq, wantFrame, ErrIndexStructure)
	}
	if row.ByteOffset != wantOffset {
		return fmt.Errorf("byteOffset %d in segment %d, expected %d: %w", row.ByteOffset, row.SegmentSeq, wantOffset, ErrIndexStructure)
	}
	if _, err := it.ids.Add(row.EntryID); errors.Is(err, idgraph.ErrDuplicate) {
		return fmt.Errorf("entry id %q appears twice: %w", row.EntryID, ErrIndexStructure)
	} else if err != nil {
		return fmt.Errorf("entry id %q: %v: %w", row.EntryID, err, ErrIndexStructure)
	}
	return nil
}

// nextSegment closes the current segment, checking that the index covered
// it to its end, and opens segment seq.
func (it *Iterator) nextSegment(seq uint64) error {
	if err := it.closeSegment(); err != nil {
		return err
	}
	seg, err := it.s.openSegment(seq)
	if err != nil {
		return err
	}
	it.seg, it.pos = seg, 0
	it.seen[seq] = true
	if it.rd == nil {
		it.rd = readBufPool.Get()
		it.rd.Reset(seg.f)
	} else {
		it.rd.Reset(seg.f)
	}
	return nil
}

func (it *Iterator) closeSegment() error {
	if it.seg == nil {
		return nil
	}
	seg := it.seg
	it.seg = nil
	defer seg.f.Close()
	if it.pos == seg.size {
		return nil
	}
	tail := make([]byte, seg.size-it.pos)
	if _, err := seg.f.ReadAt(tail, it.pos); err != nil {
		return &CorruptionError{Path: seg.path, Segment: seg.seq, Offset: it.pos, Err: err}
	}
	why := ErrUncovered
	if isZero(tail) || tail[len(tail)-1] != '\n' {
		why = ErrTornTail
	}
	return &CorruptionError{Path: seg.path, Segment: seg.seq, Offset: it.pos,
		Err: fmt.Errorf("%d bytes after the last indexed frame: %w", len(tail), why)}
}

func (it *Iterator) read(row wire.IndexRow) bool {
	seg := it.seg
	cerr := func(err error) bool {
		return it.fail(&CorruptionError{Path: seg.path, Segment: seg.seq, Offset: it.pos, Err: err})
	}
	if row.ByteLength > uint64(it.s.max) {
		return cerr(fmt.Errorf("frame of %d bytes exceeds %d: %w", row.ByteLength, it.s.max, ErrTooLarge))
	}
	if row.End() > uint64(seg.size) {
		if it.cutShort(row) {
			return cerr(fmt.Errorf("frame cut short: range %d..%d, segment ends at %d: %w", row.ByteOffset, row.End(), seg.size, ErrTornTail))
		}
		return cerr(fmt.Errorf("range %d..%d beyond the segment's %d bytes: %w", row.ByteOffset, row.End(), seg.size, ErrOutOfBounds))
	}
	if uint64(cap(it.buf)) < row.ByteLength {
		it.buf = make([]byte, row.ByteLength)
	}
	it.buf = it.buf[:row.ByteLength]
	if _, err := io.ReadFull(it.rd, it.buf); err != nil {
		return cerr(err)
	}
	f, err := checkFrame(it.buf, row)
	if err != nil {
		return cerr(err)
	}
	it.pos += int64(row.ByteLength)
	it.prev, it.row, it.frame = row, row, f
	return true
}

// finish checks the coverage of the last segment and that no *.seg was
// left out of the index.
func (it *Iterator) finish() bool {
	if err := it.closeSegment(); err != nil {
		return it.fail(err)
	}
	dir := SegmentsPath(it.s.root)
	names, err := readDirNames(it.s.ops, dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return it.fail(&CorruptionError{Path: dir, Err: err})
	}
	for _, n := range names {
		seq, ok, numeric := wire.ParseSegmentFileName(n)
		if !ok {
			continue
		}
		if !numeric || n != wire.SegmentFileName(seq) || !it.seen[seq] {
			return it.fail(&CorruptionError{Path: dir + "/" + n, Segment: seq, Err: fmt.Errorf("segment file not in the index: %w", ErrUncovered)})
		}
	}
	it.Close()
	return false
}

// cutShort reports whether row's frame starts inside the segment, which
// ends without a newline: a frame line holds no raw newline, so a complete
// one ends in one, and this is a write that stopped part way.
func (it *Iterator) cutShort(row wire.IndexRow) bool {
	seg := it.seg
	if row.ByteOffset >= uint64(seg.size) {
		return false
	}
	var last [1]byte
	_, err := seg.f.ReadAt(last[:], seg.size-1)
	return err == nil && last[0] != '\n'
}
