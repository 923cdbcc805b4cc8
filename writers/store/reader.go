package store

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sort"
	"syscall"

	"pisess/writers/durable"
	"pisess/writers/wire"
)

// ReadOptions configure Open.
type ReadOptions struct {
	// MaxSegmentBytes is the largest segment and frame accepted: 0 means
	// 64 MiB, the fixed limit pi reads with.
	MaxSegmentBytes int64
	// Ops opens files; the zero value is durable.OS.
	Ops durable.Ops
	// OnceManifest reads the manifest once: every later Manifest call
	// returns what the first read (a check that looks at one state of
	// the store several times, not a handle kept across changes).
	OnceManifest bool
}

// Store reads a store. Every file is opened with no symlink in any path
// component and must be a regular file; modes are Check's business, so a
// store with a non-private mode can still be read and repaired.
type Store struct {
	root string
	max  int64
	ops  durable.Ops
	once bool
	// manifest and manifestErr are the first read's, with once.
	manifest    *wire.Manifest
	manifestErr error
}

// Open opens the store at dir for reading. It fails only when dir is not a
// directory reachable without symlinks; everything inside is checked when
// read (and all of it by Check).
func Open(dir string, opt ReadOptions) (*Store, error) {
	max := opt.MaxSegmentBytes
	if max <= 0 {
		max = wire.MaxSegmentBytes
	}
	d, err := opt.Ops.OpenNoFollow(dir, syscall.O_RDONLY|syscall.O_DIRECTORY, 0)
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	d.Close()
	return &Store{root: dir, max: max, ops: opt.Ops, once: opt.OnceManifest}, nil
}

// Root returns the store directory.
func (s *Store) Root() string { return s.root }

// openRegular opens path read-only without following symlinks and checks
// that it is a regular file (O_NONBLOCK: a FIFO planted there cannot hang
// the open). A missing file yields an error matching fs.ErrNotExist.
func openRegular(ops durable.Ops, path string) (*os.File, int64, error) {
	f, err := ops.OpenNoFollow(path, syscall.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, 0, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, 0, fmt.Errorf("%s: not a regular file", path)
	}
	return f, st.Size(), nil
}

// readSmall reads a whole regular file of at most limit bytes; a larger one
// yields an error matching wire.ErrTooLarge.
func readSmall(ops durable.Ops, path string, limit int64) ([]byte, error) {
	f, size, err := openRegular(ops, path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := durable.ReadLimited(f, size, limit)
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s exceeds %d bytes: %w", path, limit, wire.ErrTooLarge)
	}
	return b, nil
}

// ReadIndex reads every row of index/offsets.jsonl. A store without an index
// file has no rows (the reference reads it so). Errors are
// *CorruptionError with the line: a torn last line (ErrTornTail) or a row
// the codec refuses (*wire.DocError). The rows' mutual consistency is
// checked by Entries and Check, not here.
func (s *Store) ReadIndex() ([]wire.IndexRow, error) {
	var rows []wire.IndexRow
	err := s.scanIndex(func(r wire.IndexRow, _ int64) error {
		rows = append(rows, r)
		return nil
	})
	return rows, err
}

// scanIndex calls fn for each row of the index, in order, with its line.
func (s *Store) scanIndex(fn func(wire.IndexRow, int64) error) error {
	path := IndexPath(s.root)
	f, _, err := openRegular(s.ops, path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	lr := newLineReader(f)
	for {
		line, err := lr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return &CorruptionError{Path: path, Line: lr.line, Err: err}
		}
		r, err := wire.ParseIndexRow(line)
		if err != nil {
			return &CorruptionError{Path: path, Line: lr.line, Err: err}
		}
		if err := fn(r, lr.line); err != nil {
			return err
		}
	}
}

// segmentFile is an open segment being read.
type segmentFile struct {
	seq  uint64
	path string
	f    *os.File
	size int64
}

func (s *Store) openSegment(seq uint64) (*segmentFile, error) {
	path := SegmentPath(s.root, seq)
	f, size, err := openRegular(s.ops, path)
	if err != nil {
		return nil, &CorruptionError{Path: path, Segment: seq, Err: err}
	}
	if size > s.max {
		f.Close()
		return nil, &CorruptionError{Path: path, Segment: seq,
			Err: fmt.Errorf("segment of %d bytes exceeds %d: %w", size, s.max, ErrTooLarge)}
	}
	return &segmentFile{seq: seq, path: path, f: f, size: size}, nil
}

// ReadFrame reads the frame row points to and checks it as the reference
// does: the range within the segment, the CRC-32C of the line, its newline,
// the frame document (wire.ParseFrame, which checks the payload digest and
// size), and the frame's coordinates against the row. Errors are
// *CorruptionError with the segment and offset.
func (s *Store) ReadFrame(row wire.IndexRow) (wire.Frame, error) {
	seg, err := s.openSegment(row.SegmentSeq)
	if err != nil {
		return wire.Frame{}, err
	}
	defer seg.f.Close()
	f, _, err := s.readFrameAt(seg, row, nil)
	return f, err
}

// readFrameAt reads row's frame from seg into buf (reused when large
// enough) and returns the frame, whose Payload aliases the returned buffer.
func (s *Store) readFrameAt(seg *segmentFile, row wire.IndexRow, buf []byte) (wire.Frame, []byte, error) {
	cerr := func(err error) error {
		return &CorruptionError{Path: seg.path, Segment: row.SegmentSeq, Offset: int64(min(row.ByteOffset, 1<<62)), Err: err}
	}
	if row.ByteLength > uint64(s.max) || row.ByteLength > wire.MaxFrameBytes {
		return wire.Frame{}, buf, cerr(fmt.Errorf("frame of %d bytes exceeds %d: %w", row.ByteLength, s.max, ErrTooLarge))
	}
	end := row.ByteOffset + row.ByteLength
	if end < row.ByteOffset || end > uint64(seg.size) {
		return wire.Frame{}, buf, cerr(fmt.Errorf("range %d..%d beyond the segment's %d bytes: %w", row.ByteOffset, end, seg.size, ErrOutOfBounds))
	}
	if uint64(cap(buf)) < row.ByteLength {
		buf = make([]byte, row.ByteLength)
	}
	buf = buf[:row.ByteLength]
	if _, err := seg.f.ReadAt(buf, int64(row.ByteOffset)); err != nil {
		return wire.Frame{}, buf, cerr(err)
	}
	f, err := checkFrame(buf, row)
	if err != nil {
		return wire.Frame{}, buf, cerr(err)
	}
	return f, buf, nil
}

// checkFrame verifies one frame line against its index row.
func checkFrame(line []byte, row wire.IndexRow) (wire.Frame, error) {
	if got := wire.CRC32C(line); got != row.CRC32C {
		return wire.Frame{}, fmt.Errorf("crc32c %s, index row %d says %s: %w", got, row.EntrySeq, row.CRC32C, wire.ErrChecksum)
	}
	f, err := wire.ParseFrame(line)
	if err != nil {
		return wire.Frame{}, err
	}
	return f, matchRow(f, row)
}

// matchRow checks that a frame is the one its index row names.
func matchRow(f wire.Frame, row wire.IndexRow) error {
	if f.EntrySeq != row.EntrySeq || f.EntryID != row.EntryID || f.SegmentSeq != row.SegmentSeq || f.FrameSeq != row.FrameSeq {
		return fmt.Errorf("frame (entry %d %q, segment %d frame %d) vs row (entry %d %q, segment %d frame %d): %w",
			f.EntrySeq, f.EntryID, f.SegmentSeq, f.FrameSeq, row.EntrySeq, row.EntryID, row.SegmentSeq, row.FrameSeq, ErrIndexMismatch)
	}
	return nil
}

// Manifest reads and checks manifest.json (wire.ParseManifest: document
// rules and hash). A store without one yields an error matching
// fs.ErrNotExist.
func (s *Store) Manifest() (wire.Manifest, error) {
	if !s.once {
		return readManifest(s.ops, s.root)
	}
	if s.manifest == nil {
		m, err := readManifest(s.ops, s.root)
		s.manifest, s.manifestErr = &m, err
	}
	return *s.manifest, s.manifestErr
}

func readManifest(ops durable.Ops, root string) (wire.Manifest, error) {
	m, _, err := readManifestBytes(ops, root)
	return m, err
}

// readManifestBytes is readManifest that also returns the file's bytes.
func readManifestBytes(ops durable.Ops, root string) (wire.Manifest, []byte, error) {
	path := ManifestPath(root)
	b, err := readSmall(ops, path, wire.MaxDocumentBytes)
	if err != nil {
		return wire.Manifest{}, nil, err
	}
	m, err := wire.ParseManifest(b)
	if err != nil {
		return wire.Manifest{}, nil, &CorruptionError{Path: path, Err: err}
	}
	return m, b, nil
}

// Tail returns the last n frames (fewer when the store holds fewer), read
// through the index, with their own copies of the payloads.
func (s *Store) Tail(n int) ([]wire.Frame, error) {
	rows, err := s.ReadIndex()
	if err != nil {
		return nil, err
	}
	if n < len(rows) {
		rows = rows[len(rows)-n:]
	}
	return s.readRows(rows)
}

// readRows reads the frames of rows, keeping one segment open at a time.
func (s *Store) readRows(rows []wire.IndexRow) ([]wire.Frame, error) {
	var seg *segmentFile
	defer func() {
		if seg != nil {
			seg.f.Close()
		}
	}()
	out := make([]wire.Frame, 0, len(rows))
	for _, r := range rows {
		if seg == nil || seg.seq != r.SegmentSeq {
			if seg != nil {
				seg.f.Close()
				seg = nil
			}
			var err error
			if seg, err = s.openSegment(r.SegmentSeq); err != nil {
				return nil, err
			}
		}
		f, _, err := s.readFrameAt(seg, r, nil)
		if err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	return out, nil
}

// ActivePath returns the frames from the root to leafID, following parent
// ids through the index, as the reference's read_active_path: an unknown
// leaf yields no frames; a parent missing from the index or a cycle is an
// error, as is a duplicate entry id in the index.
func (s *Store) ActivePath(leafID string) ([]wire.Frame, error) {
	rows, err := s.ReadIndex()
	if err != nil {
		return nil, err
	}
	byID := make(map[string]wire.IndexRow, len(rows))
	for _, r := range rows {
		if _, dup := byID[r.EntryID]; dup {
			return nil, &CorruptionError{Path: IndexPath(s.root), Err: fmt.Errorf("duplicate entry id %q: %w", r.EntryID, ErrIndexStructure)}
		}
		byID[r.EntryID] = r
	}
	var path []wire.Frame
	seen := map[string]bool{}
	for id := leafID; id != ""; {
		if seen[id] {
			return nil, fmt.Errorf("active path: parent cycle at entry %q", id)
		}
		seen[id] = true
		r, ok := byID[id]
		if !ok {
			if len(path) == 0 {
				return nil, nil
			}
			return nil, fmt.Errorf("active path: parent %q of entry %q is not in the index", id, path[len(path)-1].EntryID)
		}
		f, err := s.ReadFrame(r)
		if err != nil {
			return nil, err
		}
		path = append(path, f)
		id = f.ParentEntryID
	}
	for i, j := 0, len(path)-1; i < j; i, j = i+1, j-1 {
		path[i], path[j] = path[j], path[i]
	}
	return path, nil
}

// Ledger reads every event of migrations/ledger.jsonl (none when absent).
func (s *Store) Ledger() ([]wire.MigrationEvent, error) {
	evs, err := readLedger(s.ops, LedgerPath(s.root))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return evs, err
}

func readLedger(ops durable.Ops, path string) ([]wire.MigrationEvent, error) {
	f, _, err := openRegular(ops, path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []wire.MigrationEvent
	lr := newLineReader(f)
	for {
		line, err := lr.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, &CorruptionError{Path: path, Line: lr.line, Err: err}
		}
		ev, err := wire.ParseMigrationEvent(line)
		if err != nil {
			return nil, &CorruptionError{Path: path, Line: lr.line, Err: err}
		}
		out = append(out, ev)
	}
}

// SourceState reads source-state.json; absent yields fs.ErrNotExist.
func (s *Store) SourceState() (wire.SourceState, error) {
	path := SourceStatePath(s.root)
	b, err := readSmall(s.ops, path, wire.MaxSourceStateBytes)
	if err != nil {
		return wire.SourceState{}, err
	}
	st, err := wire.ParseSourceState(b)
	if err != nil {
		return wire.SourceState{}, &CorruptionError{Path: path, Err: err}
	}
	return st, nil
}

// Checkpoints reads every checkpoint in number order, checking each
// document and that its number matches its file name.
func (s *Store) Checkpoints() ([]wire.Checkpoint, error) {
	list, err := listCheckpoints(s.ops, s.root)
	if err != nil {
		return nil, err
	}
	out := make([]wire.Checkpoint, 0, len(list))
	for _, c := range list {
		cp, err := readCheckpoint(s.ops, c.path, c.seq)
		if err != nil {
			return nil, err
		}
		out = append(out, cp)
	}
	return out, nil
}

type checkpointFile struct {
	seq  uint64
	path string
}

// listCheckpoints lists checkpoints/*.json by number; a *.json whose stem
// is not a number is an error, as in the reference. A missing directory
// holds none.
func listCheckpoints(ops durable.Ops, root string) ([]checkpointFile, error) {
	dir := CheckpointsPath(root)
	names, err := readDirNames(ops, dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []checkpointFile
	for _, n := range names {
		seq, ok, numeric := wire.ParseCheckpointFileName(n)
		if !ok {
			continue
		}
		if !numeric {
			return nil, &CorruptionError{Path: dir + "/" + n, Err: errors.New("checkpoint file name is not a number")}
		}
		out = append(out, checkpointFile{seq: seq, path: dir + "/" + n})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].seq < out[j].seq })
	return out, nil
}

func readCheckpoint(ops durable.Ops, path string, seq uint64) (wire.Checkpoint, error) {
	b, err := readSmall(ops, path, wire.MaxDocumentBytes)
	if err != nil {
		return wire.Checkpoint{}, err
	}
	c, err := wire.ParseCheckpoint(b)
	if err != nil {
		return wire.Checkpoint{}, &CorruptionError{Path: path, Err: err}
	}
	if c.CheckpointSeq != seq {
		return wire.Checkpoint{}, &CorruptionError{Path: path, Err: fmt.Errorf("checkpointSeq %d does not match the file name", c.CheckpointSeq)}
	}
	return c, nil
}
