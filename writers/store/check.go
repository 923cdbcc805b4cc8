package store

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"iter"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"pisess/writers/idgraph"
	"pisess/writers/wire"
)

// Class classifies a Problem. Callers branch on it, never on Detail.
type Class string

const (
	// ClassMissingFile: a file or directory the store needs is absent (the
	// manifest, segments/, index/, the index while segments hold data, a
	// segment an index row names).
	ClassMissingFile Class = "missing_file"
	// ClassTornTail: the end of the last segment, the index or the ledger
	// is an incomplete write: a last line without its newline, a frame cut
	// short, a zero-filled tail. The one damage CutTornTail repairs.
	ClassTornTail Class = "torn_tail"
	// ClassCRCMismatch: a frame line does not match its row's CRC-32C, or
	// its payload does not match payloadSha256/payloadBytes.
	ClassCRCMismatch Class = "crc_mismatch"
	// ClassIndexOutOfBounds: an index row's range lies outside its segment.
	ClassIndexOutOfBounds Class = "index_out_of_bounds"
	// ClassIndexLagging: whole frames after the last indexed one (frames
	// written, rows not): RebuildIndex repairs it.
	ClassIndexLagging Class = "index_lagging"
	// ClassChainBreak: the hash chain over the frames differs from the
	// manifest's or a checkpoint's chainHash.
	ClassChainBreak Class = "chain_break"
	// ClassManifestMismatch: the manifest's hash does not match it, or its
	// counters, head, segment count or lastCrc32c differ from the store.
	ClassManifestMismatch Class = "manifest_mismatch"
	// ClassInvariantFalse: a manifest invariant is false (the reference
	// rejects such a manifest).
	ClassInvariantFalse Class = "invariant_false"
	// ClassBadDocument: a document the codec refuses, an index whose rows
	// break the sequence rules, a frame that does not match its row, a
	// segment over the size limit, a parent link that is missing or cyclic,
	// checkpoints that go backwards, unindexed bytes that are not frames.
	ClassBadDocument Class = "bad_document"
	// ClassUnindexedSegment: a *.seg that no index row names (or whose
	// name is not the canonical 16-digit one); *.seg.bak is ignored.
	ClassUnindexedSegment Class = "unindexed_segment"
	// ClassBadMode: a group or other permission bit, or the wrong file type
	// (pi refuses both, FORMAT.md §1).
	ClassBadMode Class = "bad_mode"
	// ClassSymlink: a symlink in the store or on the way to it.
	ClassSymlink Class = "symlink"
)

// Problem is one finding of Check.
type Problem struct {
	Class   Class
	Path    string
	Segment uint64 // segment number, 0 when the problem is not in a segment
	Offset  int64  // byte offset in Segment (meaningful when Segment > 0)
	Line    int64  // 1-based line of the index or ledger, 0 when none
	Detail  string
}

func (p Problem) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s", p.Class, p.Path)
	if p.Segment > 0 {
		fmt.Fprintf(&b, " segment %d offset %d", p.Segment, p.Offset)
	}
	if p.Line > 0 {
		fmt.Fprintf(&b, " line %d", p.Line)
	}
	if p.Detail != "" {
		b.WriteString(": ")
		b.WriteString(p.Detail)
	}
	return b.String()
}

// Check verifies the whole store against FORMAT.md §1–§6 and §11.5–7 and
// returns every problem found, in the order found; none means pi would
// accept the store (payloads' typed-entry parsing and the comparison with
// the source aside: those are verify's). It never writes. A problem that
// makes later checks meaningless suppresses them rather than cascading:
// without a readable index nothing is compared with it, and without every
// frame verified no counter or chain is recomputed.
func (s *Store) Check() []Problem {
	problems, _ := s.CheckSummary()
	return problems
}

// Summary is what Check recomputed from the frames it read back.
type Summary struct {
	// FramesOK says every index row's frame was read and verified (CRC,
	// members against the row); the rest is meaningful only then.
	FramesOK bool
	// Entries and Bytes count the frames and their line bytes.
	Entries, Bytes uint64
	// ChainHash is the hash chain over the frames' payloads.
	ChainHash string
	// EntryDigest digests the frames' (entry id, parent, type) in order
	// (wire.EntryDigest).
	EntryDigest [32]byte
}

// CheckSummary is Check, also returning what it recomputed from the
// frames: a staging store's verification compares it with what its
// writer was given (verify.VerifiedStaged), with no second pass. Frames
// in the writer's exact form are read without parsing their payloads
// (wire.ParseFrameFast): the caller must compare ChainHash, which covers
// every payload byte, with the chain over payloads it knows are sound.
func (s *Store) CheckSummary() ([]Problem, Summary) { return s.checkSummary(rowsKept) }

// CheckOpen is Check as deep as pi's open of a large store goes (the
// reference hydrates lazily above 10,000 entries and reads the active path
// only): every index row parsed and checked against the sequence rules and
// its segment (bounds, contiguity, each segment's bytes exactly covered,
// no segment without rows, the 64 MiB limit), the manifest against the
// index (counters, segment count, head, last CRC), and the last frame of
// every segment read and checked against its row (CRC, document,
// coordinates). Frames in between are not read, so nothing is recomputed
// from them (chain, message counters, parents): Check does that.
func (s *Store) CheckOpen() []Problem {
	c := &checker{s: s, segs: map[uint64]*segInfo{}, fastFrames: true, rowsKept: rowsKept, lastFramesOnly: true}
	c.check()
	return c.problems
}

// checkSummary is CheckSummary keeping at most keep index rows in memory
// (checker.rows).
func (s *Store) checkSummary(keep int) ([]Problem, Summary) {
	c := &checker{s: s, segs: map[uint64]*segInfo{}, fastFrames: true, rowsKept: keep}
	c.check()
	return c.problems, Summary{FramesOK: c.framesOK, Entries: c.counters.EntriesTotal, Bytes: c.bytes,
		ChainHash: c.chain, EntryDigest: c.digest.Sum()}
}

func (c *checker) check() {
	s := c.s
	if !c.checkRoot() {
		return
	}
	c.checkDirs()
	c.listSegments()
	for _, name := range []string{MutationLockName, SourceStateName} {
		c.entry(filepath.Join(s.root, name), false, false)
	}
	c.checkCheckpointFiles()
	c.readIndex()
	c.checkFrames()
	c.checkCoverage()
	c.checkParents()
	c.checkManifest()
	c.checkCheckpointChains()
	c.checkLedger()
	c.checkSourceState()
}

type segInfo struct {
	seq      uint64
	path     string
	size     int64
	usable   bool // a regular file, not a symlink
	indexed  bool
	end      uint64 // end of the last in-bounds row
	troubled bool   // a row in it had a problem: its coverage is not judged
}

type indexedRow struct {
	wire.IndexRow
	line int64
}

// rowFacts are what the manifest states about the rows (checkManifest).
type rowFacts struct {
	bytes, segments uint64
	head            wire.Head
	lastCRC         string
}

// rowsKept: see checker.rows (a test keeps fewer: checkSummary).
const rowsKept = 1 << 16

// The shortest and longest index rows the writer makes (171 and 393 bytes
// with the newline): one-digit numbers and a one-character id; 20-digit
// numbers and a 128-character id. Only estimates of a row count use them.
const (
	minIndexRowBytes = 170
	maxIndexRowBytes = 400
)

type checkpointDoc struct {
	wire.Checkpoint
	path string
}

type checker struct {
	s        *Store
	problems []Problem

	segs    map[uint64]*segInfo
	lastSeg uint64 // the newest segment: the index's last, else the highest *.seg

	indexPresent bool
	indexOK      bool // rows all read, parsed and structurally sound (or no index needed)
	// rows holds the index rows readIndex accepted while there are at most
	// rowsKept of them; a bigger index is parsed again by allRows, as the
	// rows of a million entries would cost more than a second parse.
	rows     []indexedRow
	nrows    int
	rowsKept int
	facts    rowFacts
	// graph holds the rows' entry ids (node n is row n) and, once frames
	// are verified, their parents.
	graph idgraph.Graph

	// fastFrames reads frames in the writer's exact form without parsing
	// their payloads (CheckSummary).
	fastFrames bool
	// lastFramesOnly reads only the last frame of each segment
	// (CheckOpen); framesOK is then false.
	lastFramesOnly bool
	framesOK       bool // every row's frame read and verified
	chain          string
	bytes          uint64
	digest         wire.EntryDigest
	counters       wire.Counters
	idAt           map[uint64]string // entry id at each checkpoint head
	chainAt        map[uint64]string // chain after each checkpoint head

	checkpoints []checkpointDoc
}

func (c *checker) add(p Problem) { c.problems = append(c.problems, p) }

func (c *checker) addf(class Class, path string, format string, args ...any) {
	c.add(Problem{Class: class, Path: path, Detail: fmt.Sprintf(format, args...)})
}

// checkRoot checks the store directory itself and the path to it.
func (c *checker) checkRoot() bool {
	root := c.s.root
	if p, ok, err := c.s.ops.HasSymlinkAncestor(root); err == nil && ok {
		c.addf(ClassSymlink, p, "a symlinked directory on the way to the store: pi opens stores with no symlink in any path component")
		return false
	}
	return c.entry(root, true, true)
}

// entry checks that path is a real directory (dir) or regular file with no
// group or other permission bit. It reports a missing path only when
// required, and returns whether the path exists and can be read.
func (c *checker) entry(path string, dir, required bool) bool {
	st, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if required {
			c.addf(ClassMissingFile, path, "missing")
		}
		return false
	case err != nil:
		c.addf(ClassBadMode, path, "cannot stat: %v", err)
		return false
	case st.Mode()&fs.ModeSymlink != 0:
		c.addf(ClassSymlink, path, "is a symlink: pi refuses it")
		return false
	case dir && !st.IsDir():
		c.addf(ClassBadMode, path, "is not a directory (%v)", st.Mode().Type())
		return false
	case !dir && !st.Mode().IsRegular():
		c.addf(ClassBadMode, path, "is not a regular file (%v)", st.Mode().Type())
		return false
	}
	if perm := st.Mode().Perm(); perm&0o077 != 0 {
		want := os.FileMode(0o600)
		if dir {
			want = 0o700
		}
		c.addf(ClassBadMode, path, "mode %04o has group or other bits (pi requires %04o)", perm, want)
	}
	return true
}

func (c *checker) checkDirs() {
	root := c.s.root
	for _, d := range []string{SegmentsDir, IndexDir} {
		c.entry(filepath.Join(root, d), true, true)
	}
	for _, d := range []string{CheckpointsDir, MigrationsDir, TmpDir} {
		c.entry(filepath.Join(root, d), true, false)
	}
}

// listSegments records every *.seg: canonical names become segments,
// others are reported as unindexed (pi's resume refuses them).
func (c *checker) listSegments() {
	dir := SegmentsPath(c.s.root)
	names, err := readDirNames(c.s.ops, dir)
	if err != nil {
		return // reported by checkDirs
	}
	sort.Strings(names)
	for _, n := range names {
		seq, ok, numeric := wire.ParseSegmentFileName(n)
		if !ok {
			continue
		}
		path := filepath.Join(dir, n)
		switch {
		case !numeric:
			c.addf(ClassUnindexedSegment, path, "segment file name is not a number")
			continue
		case n != wire.SegmentFileName(seq):
			c.addf(ClassUnindexedSegment, path, "segment file name is not the canonical %s", wire.SegmentFileName(seq))
			continue
		}
		info := &segInfo{seq: seq, path: path}
		c.segs[seq] = info
		c.lastSeg = max(c.lastSeg, seq)
		if info.usable = c.entry(path, false, true); info.usable {
			if st, err := os.Lstat(path); err == nil {
				info.size = st.Size()
			}
		}
	}
}

// readIndex reads the index rows and checks their mutual structure. It
// stops at the first row it cannot trust: what follows would only cascade.
func (c *checker) readIndex() {
	path := IndexPath(c.s.root)
	c.facts.lastCRC = wire.EmptyCRC32C
	needed := false
	for _, sg := range c.segs {
		needed = needed || sg.size > 0 || !sg.usable
	}
	if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
		if needed {
			c.addf(ClassMissingFile, path, "missing while segments hold frames")
		} else {
			c.indexOK = true
		}
		return
	}
	if !c.entry(path, false, true) {
		return
	}
	c.indexPresent = true
	f, size, err := openRegular(c.s.ops, path)
	if err != nil {
		c.addf(ClassBadDocument, path, "cannot open: %v", err)
		return
	}
	defer f.Close()
	// Room for every row at once, or none (c.rows nil, as allRows reads it)
	// when there are surely more than rowsKept: grown by appends, and
	// dropped at rowsKept, they cost about twice their size in
	// allocations, all of it wasted on a large store.
	if size/maxIndexRowBytes < int64(c.rowsKept) {
		c.rows = make([]indexedRow, 0, min(size/minIndexRowBytes+1, int64(c.rowsKept)))
	}
	lr := newLineReader(f)
	var prev wire.IndexRow
	for {
		line, err := lr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			class := ClassBadDocument
			if errors.Is(err, ErrTornTail) {
				class = ClassTornTail
			}
			c.add(Problem{Class: class, Path: path, Line: lr.line, Detail: err.Error()})
			return
		}
		row, err := wire.ParseIndexRow(line)
		if err != nil {
			c.add(Problem{Class: ClassBadDocument, Path: path, Line: lr.line, Detail: err.Error()})
			return
		}
		bad := func(format string, args ...any) {
			c.add(Problem{Class: ClassBadDocument, Path: path, Line: lr.line, Detail: fmt.Sprintf(format, args...)})
		}
		if row.EntrySeq != prev.EntrySeq+1 {
			bad("entrySeq %d follows %d: entry sequence numbers must be contiguous from 1", row.EntrySeq, prev.EntrySeq)
			return
		}
		// The rules in their order: sequence, duplicate id, segment order.
		if _, err := c.graph.Add(row.EntryID); errors.Is(err, idgraph.ErrDuplicate) {
			bad("entry id %q appears twice", row.EntryID)
			return
		} else if err != nil {
			bad("%v", err)
			return
		}
		if row.SegmentSeq < prev.SegmentSeq {
			bad("segmentSeq %d follows %d: segments must not go backwards", row.SegmentSeq, prev.SegmentSeq)
			return
		}
		if c.rows != nil && c.nrows < c.rowsKept {
			c.rows = append(c.rows, indexedRow{row, lr.line})
		} else {
			c.rows = nil
		}
		c.nrows++
		c.facts.bytes += row.ByteLength
		if c.nrows == 1 || row.SegmentSeq != prev.SegmentSeq {
			c.facts.segments++
		}
		c.facts.head = wire.Head{SegmentSeq: row.SegmentSeq, EntrySeq: row.EntrySeq, EntryID: row.EntryID}
		c.facts.lastCRC = row.CRC32C
		prev = row
	}
	c.indexOK = true
}

// allRows yields the rows readIndex accepted, in order: from memory, or
// parsed again from the index. An index that no longer reads as it did is
// a problem, and ends the rows.
func (c *checker) allRows() iter.Seq2[int, indexedRow] {
	return func(yield func(int, indexedRow) bool) {
		if c.rows != nil || c.nrows == 0 {
			for i, r := range c.rows {
				if !yield(i, r) {
					return
				}
			}
			return
		}
		path := IndexPath(c.s.root)
		changed := func(detail string) {
			c.add(Problem{Class: ClassBadDocument, Path: path, Detail: "changed while being checked: " + detail})
			c.framesOK = false
		}
		f, _, err := openRegular(c.s.ops, path)
		if err != nil {
			changed(err.Error())
			return
		}
		defer f.Close()
		lr := newLineReader(f)
		for i := 0; i < c.nrows; i++ {
			line, err := lr.Next()
			if err != nil {
				changed(fmt.Sprintf("line %d: %v", lr.line, err))
				return
			}
			row, err := wire.ParseIndexRow(line)
			if err != nil || row.EntrySeq != uint64(i)+1 || c.graph.ID(i) != row.EntryID {
				changed(fmt.Sprintf("line %d is not the row read before", lr.line))
				return
			}
			if !yield(i, indexedRow{row, lr.line}) {
				return
			}
		}
	}
}

// checkFrames reads every indexed frame: bounds, contiguity within its
// segment, CRC, frame document, coordinates; and accumulates the chain,
// counters and parent links from the good ones.
func (c *checker) checkFrames() {
	c.framesOK = c.indexOK
	c.chain = wire.ChainGenesis
	c.idAt, c.chainAt = map[uint64]string{}, map[uint64]string{}
	if c.nrows > 0 {
		// The newest segment is the index's last, whatever else lies there.
		c.lastSeg = c.facts.head.SegmentSeq
	}
	wanted := map[uint64]bool{}
	for _, cp := range c.checkpoints {
		wanted[cp.HeadEntrySeq] = true
	}
	var (
		open      *segmentFile
		known     bool // whether the next row's frameSeq/offset can be predicted
		wantFrame uint64
		wantOff   uint64
		missing   = map[uint64]bool{}
		buf       []byte
		rd        *bufio.Reader
		rdSeq     uint64
		rdPos     uint64
	)
	defer func() {
		if open != nil {
			open.f.Close()
		}
	}()
	var prevSeg uint64
	// last is the last sound row of the segment being checked, whose frame
	// lastFramesOnly reads once the segment's rows are done.
	var last *lastRow
	defer func() { c.checkLastFrame(last) }()
	for i, r := range c.allRows() {
		sg := c.segs[r.SegmentSeq]
		newSeg := i == 0 || r.SegmentSeq != prevSeg
		prevSeg = r.SegmentSeq
		if newSeg && last != nil {
			c.checkLastFrame(last)
			last = nil
		}
		if newSeg {
			known, wantFrame, wantOff = true, 1, 0
			if sg != nil && sg.usable && sg.size > c.s.max {
				c.add(Problem{Class: ClassBadDocument, Path: sg.path, Segment: sg.seq,
					Detail: fmt.Sprintf("segment of %d bytes exceeds the %d-byte limit pi reads with", sg.size, c.s.max)})
			}
		}
		if sg == nil {
			if !missing[r.SegmentSeq] {
				missing[r.SegmentSeq] = true
				c.add(Problem{Class: ClassMissingFile, Path: SegmentPath(c.s.root, r.SegmentSeq), Segment: r.SegmentSeq,
					Detail: fmt.Sprintf("named by index line %d", r.line)})
			}
			c.framesOK = false
			continue
		}
		sg.indexed = true
		if !sg.usable {
			c.framesOK = false
			continue
		}
		at := Problem{Path: sg.path, Segment: sg.seq, Offset: int64(min(r.ByteOffset, 1<<62)), Line: r.line}
		problem := func(class Class, format string, args ...any) {
			p := at
			p.Class, p.Detail = class, fmt.Sprintf(format, args...)
			c.add(p)
			c.framesOK = false
			known = false
			sg.troubled = true
		}
		end := r.ByteOffset + r.ByteLength
		switch {
		case r.ByteLength > uint64(c.s.max):
			problem(ClassBadDocument, "index line %d: frame of %d bytes exceeds the %d-byte limit", r.line, r.ByteLength, c.s.max)
			continue
		case end < r.ByteOffset || end > uint64(sg.size):
			if c.tornAt(sg, r, i) {
				problem(ClassTornTail, "the last frame is cut short: index line %d ends at %d, the segment at %d", r.line, end, sg.size)
			} else {
				problem(ClassIndexOutOfBounds, "index line %d: range %d..%d beyond the segment's %d bytes", r.line, r.ByteOffset, end, sg.size)
			}
			continue
		}
		sg.end = max(sg.end, end)
		if known && (r.FrameSeq != wantFrame || r.ByteOffset != wantOff) {
			problem(ClassBadDocument, "index line %d: frame %d at offset %d, expected frame %d at %d (rows must be contiguous in a segment)",
				r.line, r.FrameSeq, r.ByteOffset, wantFrame, wantOff)
			known, wantFrame, wantOff = true, r.FrameSeq+1, end
			continue
		}
		known, wantFrame, wantOff = true, r.FrameSeq+1, end
		if c.lastFramesOnly {
			last = &lastRow{r, sg}
			continue
		}
		if open == nil || open.seq != sg.seq {
			if open != nil {
				open.f.Close()
				open = nil
			}
			f, _, err := openRegular(c.s.ops, sg.path)
			if err != nil {
				problem(ClassBadDocument, "cannot open: %v", err)
				continue
			}
			open = &segmentFile{seq: sg.seq, path: sg.path, f: f, size: sg.size}
		}
		if uint64(cap(buf)) < r.ByteLength {
			buf = make([]byte, r.ByteLength)
		}
		buf = buf[:r.ByteLength]
		// Rows are contiguous in a sound store: read the segment through
		// one buffer, not a pread per frame.
		if rd == nil || rdSeq != sg.seq || rdPos != r.ByteOffset {
			sec := io.NewSectionReader(open.f, int64(r.ByteOffset), sg.size-int64(r.ByteOffset))
			if rd == nil {
				rd = readBufPool.Get()
				defer readBufPool.Put(rd)
			}
			rd.Reset(sec)
			rdSeq, rdPos = sg.seq, r.ByteOffset
		}
		if _, err := io.ReadFull(rd, buf); err != nil {
			rdSeq = 0 // start over at the next row's offset
			problem(ClassBadDocument, "read: %v", err)
			continue
		}
		rdPos += r.ByteLength
		f, err := c.frame(buf, r.IndexRow)
		if err != nil {
			class := ClassBadDocument
			if errors.Is(err, wire.ErrChecksum) {
				class = ClassCRCMismatch
			}
			problem(class, "%v", err)
			continue
		}
		c.bytes += r.ByteLength
		c.account(i, f, wanted)
	}
}

// lastRow is a row whose frame CheckOpen reads: the last of its segment.
type lastRow struct {
	r  indexedRow
	sg *segInfo
}

// checkLastFrame reads and checks the frame of l (nil: none), and leaves
// framesOK false: CheckOpen reads no other frame.
func (c *checker) checkLastFrame(l *lastRow) {
	if !c.lastFramesOnly {
		return
	}
	c.framesOK = false
	if l == nil {
		return
	}
	r, sg := l.r, l.sg
	p := Problem{Path: sg.path, Segment: sg.seq, Offset: int64(min(r.ByteOffset, 1<<62)), Line: r.line}
	line, err := c.readSegment(sg, int64(r.ByteOffset), int64(r.ByteLength))
	if err == nil {
		_, err = c.frame(line, r.IndexRow)
	}
	if err != nil {
		p.Class, p.Detail = ClassBadDocument, err.Error()
		if errors.Is(err, wire.ErrChecksum) {
			p.Class = ClassCRCMismatch
		}
		c.add(p)
		sg.troubled = true
	}
}

// tornAt reports whether row i (out of bounds) is a torn write: the last
// row, in the last segment, starting inside the file, which ends without a
// newline (frame lines hold no raw newline, so a complete one ends in one).
func (c *checker) tornAt(sg *segInfo, r indexedRow, i int) bool {
	if i != c.nrows-1 || sg.seq != c.lastSeg || r.ByteOffset >= uint64(sg.size) {
		return false
	}
	last, err := c.readSegment(sg, sg.size-1, 1)
	return err == nil && last[0] != '\n'
}

func (c *checker) readSegment(sg *segInfo, off, n int64) ([]byte, error) {
	f, _, err := openRegular(c.s.ops, sg.path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, n)
	_, err = f.ReadAt(b, off)
	return b, err
}

// account adds a verified frame to the recomputed facts.
// frame checks one frame line against its row: in full (checkFrame), or,
// for CheckSummary's caller, with wire.ParseFrameFast when the line is in
// the writer's exact form.
func (c *checker) frame(line []byte, row wire.IndexRow) (wire.Frame, error) {
	if !c.fastFrames {
		return checkFrame(line, row)
	}
	if got := wire.CRC32C(line); got != row.CRC32C {
		return wire.Frame{}, fmt.Errorf("crc32c %s, index row %d says %s: %w", got, row.EntrySeq, row.CRC32C, wire.ErrChecksum)
	}
	f, ok, err := wire.ParseFrameFast(line)
	switch {
	case !ok:
		return checkFrame(line, row)
	case err != nil:
		return wire.Frame{}, err
	}
	return f, matchRow(f, row)
}

func (c *checker) account(node int, f wire.Frame, wanted map[uint64]bool) {
	c.chain = wire.ChainStep(c.chain, f.PayloadSHA256)
	c.digest.Add(f.EntryID, f.ParentEntryID, string(f.EntryType))
	c.counters.EntriesTotal++
	switch f.EntryType {
	case wire.EntryMessage:
		c.counters.MessagesTotal++
	case wire.EntryCompaction:
		c.counters.CompactionsTotal++
	}
	// The frame matched its row: node is its entry (readIndex's order).
	if err := c.graph.SetParent(node, f.ParentEntryID); err != nil {
		c.addf(ClassBadDocument, IndexPath(c.s.root), "%v", err)
		c.framesOK = false
	}
	if wanted[f.EntrySeq] {
		c.idAt[f.EntrySeq], c.chainAt[f.EntrySeq] = f.EntryID, c.chain
	}
}

// checkCoverage checks that every byte of every segment is covered by an
// index row and that every segment is indexed; it classifies what lies
// after the last indexed frame.
func (c *checker) checkCoverage() {
	if !c.indexOK {
		return
	}
	seqs := make([]uint64, 0, len(c.segs))
	for seq := range c.segs {
		seqs = append(seqs, seq)
	}
	sort.Slice(seqs, func(i, j int) bool { return seqs[i] < seqs[j] })
	for _, seq := range seqs {
		sg := c.segs[seq]
		if !sg.usable || sg.troubled {
			continue
		}
		if !sg.indexed {
			c.add(Problem{Class: ClassUnindexedSegment, Path: sg.path, Segment: seq,
				Detail: fmt.Sprintf("%d bytes in a segment no index row names", sg.size)})
			continue
		}
		if uint64(sg.size) > sg.end {
			c.classifyTail(sg)
		}
	}
}

// classifyTail reports the bytes after a segment's last indexed frame:
// whole frames continuing the sequence (index lagging), a zero-filled or
// unterminated remainder (torn, in the last segment), anything else.
func (c *checker) classifyTail(sg *segInfo) {
	tail, err := c.readSegment(sg, int64(sg.end), sg.size-int64(sg.end))
	if err != nil {
		c.add(Problem{Class: ClassBadDocument, Path: sg.path, Segment: sg.seq, Offset: int64(sg.end), Detail: fmt.Sprintf("read: %v", err)})
		return
	}
	off := int64(sg.end)
	lagging := 0
	for len(tail) > 0 {
		i := bytes.IndexByte(tail, '\n')
		if i < 0 || isZero(tail[:i+1]) {
			break
		}
		if _, err := wire.ParseFrame(tail[:i+1]); err != nil {
			break
		}
		if lagging == 0 {
			c.add(Problem{Class: ClassIndexLagging, Path: sg.path, Segment: sg.seq, Offset: off,
				Detail: "whole frames after the last indexed one have no index row"})
		}
		lagging++
		off += int64(i + 1)
		tail = tail[i+1:]
	}
	if len(tail) == 0 {
		return
	}
	p := Problem{Path: sg.path, Segment: sg.seq, Offset: off}
	switch {
	case sg.seq == c.lastSeg && isZero(tail):
		p.Class, p.Detail = ClassTornTail, fmt.Sprintf("%d zero bytes after the last frame", len(tail))
	case sg.seq == c.lastSeg && bytes.IndexByte(tail, '\n') < 0:
		p.Class, p.Detail = ClassTornTail, fmt.Sprintf("%d bytes of an unterminated frame after the last one", len(tail))
	default:
		p.Class, p.Detail = ClassBadDocument, fmt.Sprintf("%d bytes no index row covers and that are not frames", len(tail))
	}
	c.add(p)
}

// checkParents checks the parent links of the verified frames: closed and
// acyclic, as the reference's integrity check requires.
func (c *checker) checkParents() {
	if !c.framesOK {
		return
	}
	if id, p, missing := c.graph.MissingParent(); missing {
		c.addf(ClassBadDocument, IndexPath(c.s.root), "entry %q names parent %q, which is not in the store", id, p)
		return
	}
	if c.graph.HasCycle() {
		c.addf(ClassBadDocument, IndexPath(c.s.root), "the parent links form a cycle")
	}
}
