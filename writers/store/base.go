package store

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"pisess/writers/bufpool"
	"pisess/writers/idgraph"
	"pisess/writers/wire"
)

// ErrNotResumable is matched by ContinueInPlace's error when the store is
// not one it can continue byte for byte: not in this codec's exact form,
// inconsistent with its manifest, damaged, or holding files a migration
// never writes. Its caller rebuilds from the source instead.
var ErrNotResumable = errors.New("store cannot be continued")

// Base describes the store ContinueInPlace continues, as its check read
// it: every frame's CRC-32C checked against its index row (or vouched
// for, Options.FramesVouched), the manifest compared with the rows and,
// where the frames were read for their links (Options.BaseLinks), with
// the chain and counts they give.
type Base struct {
	Manifest wire.Manifest
	// LastRow is the last index row (zero for an empty store).
	LastRow wire.IndexRow
	// IndexBytes is the length of index/offsets.jsonl and IndexSHA256 the
	// hex SHA-256 of its bytes (the empty digest when there is none).
	IndexBytes  int64
	IndexSHA256 string
	// ManifestSHA256 is the hex SHA-256 of manifest.json's bytes: what
	// the caller compares with its record before it relies on the
	// manifest (it vouches for the manifest and the index).
	ManifestSHA256 string
}

// hexSHA256 returns the hex SHA-256 of a file's bytes b (Base.IndexSHA256
// and Writer.ManifestSHA256 are such digests).
func hexSHA256(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// Has reports whether an entry with id was written (or is in the base it
// continues) so far; a Writer whose links are vouched for
// (Options.Branches) keeps no ids, but ContinueInPlace never makes one.
func (w *Writer) Has(id string) bool {
	return w.graph.Has(id)
}

// frameDamaged is the error of a base frame that does not match its row:
// not resumable, and damage (wire.ErrChecksum), which the caller's full
// rebuild must not take for a store merely in another form.
func frameDamaged(row wire.IndexRow) error {
	return fmt.Errorf("segment %d offset %d: the frame does not match its row's CRC-32C: %w: %w",
		row.SegmentSeq, row.ByteOffset, wire.ErrChecksum, ErrNotResumable)
}

func notResumable(format string, args ...any) error {
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), ErrNotResumable)
}

// readBase checks the store at base (w's own root: it is continued where
// it lies) and leaves w positioned after its last frame, as if w had
// written every frame itself.
func (w *Writer) readBase(ctx context.Context, base string) (Base, error) {
	m, mb, err := readManifestBytes(w.ops, base)
	if err != nil {
		return Base{}, notResumable("manifest: %v", err)
	}
	if err := w.checkBaseFiles(base, m.Files.SegmentCount); err != nil {
		return Base{}, err
	}
	c := &baseRead{w: w, base: base, sum: w.idxSum, entries: m.Counters.EntriesTotal, bytes: m.Counters.BytesTotal} // the base's rows start the index's digest
	defer c.release()
	if err := c.run(ctx); err != nil {
		return Base{}, err
	}
	msum := sha256.Sum256(mb)
	b := Base{Manifest: m, LastRow: c.last, IndexBytes: c.indexBytes, IndexSHA256: hex.EncodeToString(c.sum.Sum(nil)),
		ManifestSHA256: hex.EncodeToString(msum[:])}
	if w.baseVouched && w.head.EntrySeq > 0 {
		// What only the frames hold is taken from the manifest the
		// caller vouches for (unless Options.BaseLinks).
		w.chain = m.Integrity.ChainHash
		w.counters.MessagesTotal, w.counters.CompactionsTotal = m.Counters.MessagesTotal, m.Counters.CompactionsTotal
		w.baseBranches, w.baseCount = m.Counters.BranchesTotal, w.graph.Len()
	}
	if err := w.matchManifest(m); err != nil {
		return Base{}, err
	}
	return b, nil
}

// checkBaseFiles refuses a base that holds what a migration never writes:
// a checkpoint, a rollback intent, or segment files other than 1..count.
func (w *Writer) checkBaseFiles(base string, count uint64) error {
	list := func(dir string) ([]string, error) {
		if w.names != nil {
			return namesIn(w.names, filepath.Base(dir))
		}
		return readDirNames(w.ops, dir)
	}
	if names, err := list(CheckpointsPath(base)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return notResumable("checkpoints: %v", err)
	} else if len(names) > 0 {
		return notResumable("base has checkpoints")
	}
	if names, err := list(TmpPath(base)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return notResumable("tmp: %v", err)
	} else if slices.Contains(names, "rollback.intent.json") {
		return notResumable("base has a pending rollback intent")
	}
	names, err := list(SegmentsPath(base))
	if err != nil {
		return notResumable("segments: %v", err)
	}
	if uint64(len(names)) != count {
		return notResumable("base has %d segment files, its manifest names %d", len(names), count)
	}
	for seq := uint64(1); seq <= count; seq++ {
		if !slices.Contains(names, wire.SegmentFileName(seq)) {
			return notResumable("segment %d is missing", seq)
		}
	}
	return nil
}

// namesIn returns the entries directly in the store's directory dir (one
// component) among names, a vouched listing of the store (Options.Names);
// a directory the listing does not hold does not exist.
func namesIn(names []string, dir string) ([]string, error) {
	if !slices.Contains(names, dir) {
		return nil, fs.ErrNotExist
	}
	var in []string
	for _, n := range names {
		if rest, ok := strings.CutPrefix(n, dir+"/"); ok && !strings.Contains(rest, "/") {
			in = append(in, rest)
		}
	}
	return in, nil
}

// matchManifest compares base's manifest with the state its frames gave.
func (w *Writer) matchManifest(m wire.Manifest) error {
	var segments uint64
	if w.head.EntrySeq > 0 {
		segments = w.segSeq
	}
	switch {
	case m.Head != w.head:
		return notResumable("manifest head %+v, frames end at %+v", m.Head, w.head)
	case m.Counters != w.Counters():
		return notResumable("manifest counters %+v, frames give %+v", m.Counters, w.Counters())
	case m.Integrity.ChainHash != w.chain:
		return notResumable("manifest chainHash differs from the chain over the frames")
	case m.Integrity.LastCRC32C != w.lastCRC:
		return notResumable("manifest lastCrc32c differs from the last index row")
	case m.Files != wire.StoreFiles(segments):
		return notResumable("manifest files %+v, the index names %d segments", m.Files, segments)
	case len(m.Invariants.False()) > 0:
		return notResumable("manifest invariants false: %v", m.Invariants.False())
	}
	return nil
}

// baseRead is one read of a base store's index and segments.
type baseRead struct {
	w    *Writer
	base string
	sum  hash.Hash

	src     *os.File
	srcBuf  *bufio.Reader // a read of every frame's (Options.BaseLinks)
	srcSize int64
	srcSeq  uint64
	// The CRC checker's (vouchedFrame): the chunk of the segment read,
	// the offset of the next frame in it, the bytes read so far.
	chunkBuf, chunk []byte
	at              int
	srcRead         int64

	last       wire.IndexRow
	indexBytes int64
	// entries is the manifest's entry count: a hint to size the id graph;
	// bytes its frame bytes (runVouched).
	entries, bytes uint64
	// check CRC-checks the frames on a goroutine of its own while the
	// rows are read (nothing is written, so nothing waits on it), unless
	// they are vouched for or read for their links.
	check *crcChecker
}

// minIndexRow is less than any index row line's length: an index of n
// bytes holds fewer than n/minIndexRow rows, whatever its manifest says.
const minIndexRow = 100

func (c *baseRead) run(ctx context.Context) error {
	w := c.w
	f, size, err := openRegular(w.ops, IndexPath(c.base))
	if errors.Is(err, fs.ErrNotExist) {
		return nil // an empty store: nothing to read
	}
	if err != nil {
		return notResumable("index: %v", err)
	}
	defer f.Close()
	if n := min(c.entries, uint64(size)/minIndexRow); n > 0 {
		w.graph.Grow(int(n), 8*int(n)) // pi's ids are 8 characters
	}
	r := baseIndexReaders.Get()
	defer baseIndexReaders.Put(r)
	r.Reset(f)
	switch {
	case w.framesVouched:
		return c.runVouched(ctx, r)
	case w.baseVouched:
		c.check = startChecker(w)
		defer c.check.stop()
	}
	var frame []byte
	for n := uint64(1); ; n++ {
		line, done, err := indexLine(ctx, r, n)
		if done {
			break
		}
		if err != nil {
			return err
		}
		c.sum.Write(line)
		c.indexBytes += int64(len(line))
		row, ok := wire.ScanCanonicalIndexRow(line)
		if !ok {
			return notResumable("index line %d is not a row in this codec's form", n)
		}
		if frame, err = c.readFrame(row, n, frame); err != nil {
			return err
		}
		c.last = row
	}
	if c.srcSeq == 0 {
		return notResumable("the index has no rows")
	}
	if w.segBytes != c.srcSize {
		return notResumable("segment %d has %d bytes, its rows cover %d", c.srcSeq, c.srcSize, w.segBytes)
	}
	if c.check != nil {
		return c.check.wait()
	}
	return nil
}

// indexLine returns line n of the index r reads (done past its last), the
// run's context looked at every 1,024 lines.
func indexLine(ctx context.Context, r *bufio.Reader, n uint64) (line []byte, done bool, err error) {
	if n%1024 == 0 {
		if err := ctx.Err(); err != nil {
			return nil, false, err
		}
	}
	line, err = r.ReadSlice('\n')
	switch {
	case err == io.EOF && len(line) == 0:
		return nil, true, nil
	case err != nil:
		return nil, false, notResumable("index line %d: %v", n, err)
	}
	return line, false, nil
}

// runVouched is run for a store whose frames and index the caller vouches
// for (Options.FramesVouched: unchanged since it wrote and checked them):
// the rows are read for their ids (the id graph) but not hashed, the
// digest going on from the state recorded with them
// (Options.IndexSHA256State); only the last is parsed, and the writer is
// put where advanceRow would have left it after every row, its frame bytes
// the manifest's (issue 14: the rows were most of a refresh's reading).
func (c *baseRead) runVouched(ctx context.Context, r *bufio.Reader) error {
	w := c.w
	// The digest goes on from the recorded state (IndexSHA256State); the
	// caller compares the digest it gives with its record.
	if err := c.sum.(encoding.BinaryUnmarshaler).UnmarshalBinary(w.idxState); err != nil {
		return notResumable("the recorded index digest state: %v", err)
	}
	var last []byte
	var n uint64
	for {
		line, done, err := indexLine(ctx, r, n+1)
		if done {
			break
		}
		if err != nil {
			return err
		}
		n++
		c.indexBytes += int64(len(line))
		id, ok := wire.IndexRowEntryID(line)
		if !ok {
			return notResumable("index line %d is not a row in this codec's form", n)
		}
		if _, err := w.graph.Add(id); errors.Is(err, idgraph.ErrDuplicate) {
			return notResumable("index row %d: duplicate entry id", n)
		} else if err != nil {
			return err
		}
		last = append(last[:0], line...)
	}
	if n == 0 {
		return notResumable("the index has no rows")
	}
	if size, ok := wire.SHA256StateLength(w.idxState); !ok || size != uint64(c.indexBytes) {
		return notResumable("the index has %d bytes, its recorded digest state is of another length", c.indexBytes)
	}
	row, ok := wire.ScanCanonicalIndexRow(last)
	switch {
	case !ok:
		return notResumable("index line %d is not a row in this codec's form", n)
	case row.EntrySeq != n:
		return notResumable("index row %d: entrySeq %d", n, row.EntrySeq)
	}
	// The last segment's size (lstat: it is not read).
	fi, err := os.Lstat(SegmentPath(c.base, row.SegmentSeq))
	switch {
	case err != nil:
		return notResumable("segment %d: %v", row.SegmentSeq, err)
	case !fi.Mode().IsRegular():
		return notResumable("segment %d is not a regular file", row.SegmentSeq)
	case fi.Size() > w.max:
		return notResumable("segment %d of %d bytes is over the limit", row.SegmentSeq, fi.Size())
	}
	c.srcSize, c.srcSeq = fi.Size(), row.SegmentSeq
	c.last = row
	w.segSeq, w.frameSeq = row.SegmentSeq, row.FrameSeq
	w.segBytes = int64(row.End())
	w.lastCRC = row.CRC32C
	w.head = wire.Head{SegmentSeq: row.SegmentSeq, EntrySeq: row.EntrySeq, EntryID: row.EntryID}
	w.counters.EntriesTotal, w.counters.BytesTotal = n, c.bytes
	if w.segBytes != c.srcSize {
		return notResumable("segment %d has %d bytes, its rows cover %d", c.srcSeq, c.srcSize, w.segBytes)
	}
	return nil
}

// readFrame checks the frame row n names against the row and the writer's
// position, and advances the writer's state as write does.
func (c *baseRead) readFrame(row wire.IndexRow, n uint64, buf []byte) ([]byte, error) {
	w := c.w
	newSeg := w.head.EntrySeq == 0 || row.SegmentSeq != w.segSeq
	switch {
	case row.EntrySeq != n || row.State != wire.RowActive:
		return buf, notResumable("index row %d: entrySeq %d, state %s", n, row.EntrySeq, row.State)
	case newSeg && (row.SegmentSeq != c.srcSeq+1 || row.FrameSeq != 1 || row.ByteOffset != 0):
		return buf, notResumable("index row %d starts segment %d frame %d at %d", n, row.SegmentSeq, row.FrameSeq, row.ByteOffset)
	case !newSeg && (row.FrameSeq != w.frameSeq+1 || row.ByteOffset != uint64(w.segBytes)):
		return buf, notResumable("index row %d: frame %d at %d does not follow the previous frame", n, row.FrameSeq, row.ByteOffset)
	case row.ByteLength > uint64(w.max) || row.ByteLength > wire.MaxFrameBytes:
		return buf, notResumable("index row %d: frame of %d bytes is over the limit", n, row.ByteLength)
	}
	if newSeg {
		if err := c.nextSource(row.SegmentSeq); err != nil {
			return buf, err
		}
		w.segBytes = 0
	}
	if uint64(c.srcSize) < row.End() {
		return buf, notResumable("index row %d: frame ends at %d, segment %d has %d bytes", n, row.End(), row.SegmentSeq, c.srcSize)
	}
	if w.baseVouched {
		// The frame is the one the row was written for (its CRC, checked
		// by c.check): its head is the row's, and the rest the
		// manifest's (readBase).
		c.check.frame(row)
		if _, err := w.graph.Add(row.EntryID); errors.Is(err, idgraph.ErrDuplicate) {
			return buf, notResumable("index row %d: duplicate entry id", n)
		} else if err != nil {
			return buf, err
		}
		w.advanceRow(row, int64(row.ByteLength))
		return buf, nil
	}
	buf = slices.Grow(buf[:0], int(row.ByteLength))[:row.ByteLength]
	if _, err := io.ReadFull(c.srcBuf, buf); err != nil {
		return buf, notResumable("segment %d: %v", row.SegmentSeq, err)
	}
	if wire.CRC32C(buf) != row.CRC32C {
		return buf, frameDamaged(row)
	}
	h, ok := wire.ParseFrameHead(buf)
	if !ok || h.SegmentSeq != row.SegmentSeq || h.FrameSeq != row.FrameSeq || h.EntrySeq != row.EntrySeq || h.EntryID != row.EntryID {
		return buf, notResumable("segment %d offset %d: the frame is not in this codec's form or does not match its row", row.SegmentSeq, row.ByteOffset)
	}
	if err := w.link(h.EntryID, h.ParentEntryID); errors.Is(err, idgraph.ErrDuplicate) {
		return buf, notResumable("index row %d: duplicate entry id", n)
	} else if err != nil {
		return buf, err
	}
	w.advance(h, row, int64(len(buf)))
	return buf, nil
}

// link records a frame's id and parent (nothing when the links are
// vouched for, Options.Branches).
func (w *Writer) link(id, parent string) error {
	if w.vouched != nil {
		return nil
	}
	node, err := w.graph.Add(id)
	if err != nil {
		return err
	}
	return w.graph.SetParent(node, parent)
}

// advance moves the writer's state past a frame it wrote or read; link
// records its links.
func (w *Writer) advance(f wire.FrameHead, row wire.IndexRow, n int64) {
	w.segSeq, w.frameSeq = f.SegmentSeq, f.FrameSeq
	w.segBytes += n
	w.chain = wire.ChainStep(w.chain, f.PayloadSHA256)
	w.lastCRC = row.CRC32C
	w.head = wire.Head{SegmentSeq: f.SegmentSeq, EntrySeq: f.EntrySeq, EntryID: f.EntryID}
	w.counters.EntriesTotal++
	w.counters.BytesTotal += uint64(n)
	switch f.EntryType {
	case wire.EntryMessage:
		w.counters.MessagesTotal++
	case wire.EntryCompaction:
		w.counters.CompactionsTotal++
	}
}

// advanceRow is advance for a base frame known by its row only (its links
// not read, Options.BaseLinks): the chain and the type counts wait for the
// manifest.
func (w *Writer) advanceRow(row wire.IndexRow, n int64) {
	w.segSeq, w.frameSeq = row.SegmentSeq, row.FrameSeq
	w.segBytes += n
	w.lastCRC = row.CRC32C
	w.head = wire.Head{SegmentSeq: row.SegmentSeq, EntrySeq: row.EntrySeq, EntryID: row.EntryID}
	w.counters.EntriesTotal++
	w.counters.BytesTotal += uint64(n)
}

// vouchedFrame checks the next frame of the base segment being read
// against row's CRC-32C only (the crcChecker's). The segment is read in
// large chunks and each frame's CRC computed where it lies in them.
func (c *baseRead) vouchedFrame(row wire.IndexRow) error {
	var crc uint32
	for need := int64(row.ByteLength); need > 0; {
		if c.at == len(c.chunk) {
			if err := c.nextChunk(row.SegmentSeq); err != nil {
				return err
			}
		}
		k := min(need, int64(len(c.chunk)-c.at))
		crc = wire.UpdateCRC32C(crc, c.chunk[c.at:c.at+int(k)])
		c.at += int(k)
		need -= k
	}
	if wire.FormatCRC32C(crc) != row.CRC32C {
		return frameDamaged(row)
	}
	return nil
}

// nextChunk reads the next chunk of the base segment.
func (c *baseRead) nextChunk(seq uint64) error {
	if c.chunkBuf == nil {
		c.chunkBuf = baseChunks.Get()
	}
	want := min(int64(len(c.chunkBuf)), c.srcSize-c.srcRead)
	if want <= 0 {
		return notResumable("segment %d: its rows run past its %d bytes", seq, c.srcSize)
	}
	n, err := io.ReadFull(c.src, c.chunkBuf[:want])
	if err != nil {
		return notResumable("segment %d: %v", seq, err)
	}
	c.chunk, c.at = c.chunkBuf[:n], 0
	c.srcRead += int64(n)
	return nil
}

// nextSource finishes the base segment being read (every byte of it must
// have been covered, whoever reads its frames) and opens segment seq of
// base.
func (c *baseRead) nextSource(seq uint64) error {
	if c.srcSeq != 0 && c.w.segBytes != c.srcSize {
		return notResumable("segment %d has %d bytes, its rows cover %d", c.srcSeq, c.srcSize, c.w.segBytes)
	}
	c.closeSource()
	f, size, err := openRegular(c.w.ops, SegmentPath(c.base, seq))
	if err != nil {
		return notResumable("segment %d: %v", seq, err)
	}
	if size > c.w.max {
		f.Close()
		return notResumable("segment %d of %d bytes is over the limit", seq, size)
	}
	if c.check != nil {
		c.check.segment(f, size, seq) // the checker reads (and closes) it
		c.srcSize, c.srcSeq = size, seq
		return nil
	}
	c.src, c.srcSize, c.srcSeq, c.srcRead = f, size, seq, 0
	if c.srcBuf == nil {
		c.srcBuf = baseSegmentReaders.Get()
	}
	c.srcBuf.Reset(f)
	return nil
}

func (c *baseRead) closeSource() {
	if c.src != nil {
		c.src.Close()
		c.src = nil
	}
}

// release hands the read's buffers back.
func (c *baseRead) release() {
	c.closeSource()
	if c.srcBuf != nil {
		baseSegmentReaders.Put(c.srcBuf)
		c.srcBuf = nil
	}
	if c.chunkBuf != nil {
		baseChunks.Put(c.chunkBuf)
		c.chunkBuf, c.chunk = nil, nil
	}
}

// The read buffers of base reads, reused from refresh to refresh as the
// writer's are (a refresh of a small session otherwise allocated and
// zeroed 1.3 MB of buffers).
var (
	baseSegmentReaders = bufpool.NewReaders(bufferSize)
	baseIndexReaders   = bufpool.NewReaders(64 << 10)
	baseChunks         = bufpool.NewBytes(1 << 20)
)
