package store

import (
	"bufio"
	"crypto/sha256"
	"encoding"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io/fs"
	"os"
	"syscall"
	"time"

	"pisess/writers/bufpool"
	"pisess/writers/durable"
	"pisess/writers/idgraph"
	"pisess/writers/wire"
)

var errClosed = errors.New("store writer is closed")

// Options configure Create.
type Options struct {
	// MaxSegmentBytes is the rollover size (§2): 0 means 64 MiB, more than
	// 64 MiB is refused because pi reads stores with that fixed limit.
	MaxSegmentBytes int64
	// Clock stamps frames, manifests, checkpoints and events; nil means
	// time.Now. Tests fix it.
	Clock func() time.Time
	// Ops performs every file operation; the zero value is durable.OS.
	Ops durable.Ops
	// Branches, when set, vouches for the links of the entries to come:
	// the caller has checked that their ids are unique, every parent is
	// present and the links are acyclic (readers.Linked), and Branches
	// gives the branch count when the manifest is written. The writer then
	// keeps no per-entry state and does not check those itself: whoever
	// installs the store must check it read back (store.Check does, from
	// the frames alone).
	Branches func() uint64
	// BaseLinks, for ContinueInPlace only: every base frame is read and
	// parsed for its entry's links (an appended entry continues a base
	// entry before the last, whose branch count only the frames hold),
	// instead of being CRC-checked against its row on the caller's word
	// for the manifest. FramesVouched is then ignored.
	BaseLinks bool
	// FramesVouched, for ContinueInPlace only: the caller also vouches for
	// the base's frames, checked when it last wrote the store and
	// unchanged since (commands/engine's fresh cache: the metadata of every
	// file as they were then, under the store's locks). They are then not
	// read: the rows are, the segments' sizes looked at.
	FramesVouched bool
	// Names, with FramesVouched, are the store's entries as that vouch
	// listed them (relative, slash-separated; its directories' metadata
	// unchanged since, so no entry came or went): the directories are not
	// listed again.
	Names []string
	// IndexSHA256State, with FramesVouched, is the index digest's state
	// (its MarshalBinary) after the base's index, as the caller recorded
	// it when it wrote the store: the rows are then read for their ids but
	// not hashed again (issue 14: hashing them was most of a vouched
	// refresh's reading), and must be exactly as long as the state says.
	IndexSHA256State []byte
}

// bufferSize is the buffered writer size for segments and the index: large
// enough that a 200 MB migration makes few write calls.
const bufferSize = 1 << 20

// The write buffers of segments and indexes are reused from store to store:
// a run over thousands of sessions would otherwise allocate, zero and
// return to the system a megabyte and more per session.
var (
	segBufPool = bufpool.NewWriters(bufferSize)
	idxBufPool = bufpool.NewWriters(bufferSize / 4)
	// A store continued in place is mostly appended a few entries: a
	// megabyte buffer of which it writes a kilobyte is still memory the
	// heap grows into, a fresh page zeroed for each page touched near it
	// (issue 14: a steady refresh ~0.05 s less CPU and 3 MB less RSS).
	appendSegBufPool = bufpool.NewWriters(appendBufferSize)
	appendIdxBufPool = bufpool.NewWriters(appendBufferSize / 4)
)

// appendBufferSize is the buffered writer size for the segment of a store
// continued in place (openForAppend).
const appendBufferSize = 64 << 10

// Writer builds a new store (a staging store) frame by frame. It is not safe
// for concurrent use. Frames and index rows go through buffered writers and
// are not fsynced one by one: see Seal. After a failed write the Writer
// refuses further work; the partial store must be discarded.
type Writer struct {
	root  string
	ops   durable.Ops
	clock func() time.Time
	max   int64

	seg      *durable.File
	segBuf   *bufio.Writer
	segSeq   uint64 // current segment, from 1
	frameSeq uint64 // frames in the current segment
	segBytes int64

	idx    *durable.File
	idxBuf *bufio.Writer
	// idxSum hashes every index line written or copied, manifestSHA is
	// the digest of the manifest written: what a refresh record keeps,
	// known without reading the files back.
	idxSum      hash.Hash
	manifestSHA string

	chain    string
	lastCRC  string
	head     wire.Head
	counters wire.Counters

	// graph holds every entry id and its parent: the small per-entry cost
	// DESIGN.md allows (about 25 bytes, nothing for the collector to scan),
	// needed for duplicate ids, branch counting, the parentLinksClosed
	// invariant and the cycle check.
	graph idgraph.Graph
	// vouched replaces graph when Options.Branches is set.
	vouched func() uint64
	// baseVouched: continued in place without Options.BaseLinks, graph's
	// first baseCount nodes are the base's, without their links, and
	// baseBranches its branches.
	baseVouched  bool
	baseCount    int
	baseBranches uint64
	// inPlace: the Writer continues the store at root itself
	// (ContinueInPlace), not a copy.
	inPlace bool
	// framesVouched: in place, the base's frames are not read (FramesVouched).
	framesVouched bool
	// names: the base's entries as its vouch listed them (Options.Names).
	names []string
	// idxState: the base index's digest state (Options.IndexSHA256State).
	idxState []byte

	checkpointSeq  uint64
	checkpointHead uint64

	line []byte
	row  []byte
	err  error
}

// Create makes a new store at dir and returns a Writer for it. dir must not
// exist or be an empty directory (its parent must exist), and may not be
// (or lie under) a symlink.
// It creates dir, segments/, index/, checkpoints/, migrations/ and tmp/
// with mode 0700 and an empty store.mutation.lock with mode 0600, whatever
// the umask. The index and the first segment appear with the first frame
// (an empty store has neither, as the reference's).
func Create(dir string, opt Options) (*Writer, error) {
	w, err := blankWriter(dir, opt)
	if err != nil {
		return nil, fmt.Errorf("create store %s: %w", dir, err)
	}
	if err := w.makeLayout(); err != nil {
		return nil, fmt.Errorf("create store %s: %w", dir, err)
	}
	return w, nil
}

// blankWriter is a Writer for dir at the start of an empty store.
func blankWriter(dir string, opt Options) (*Writer, error) {
	max := opt.MaxSegmentBytes
	switch {
	case max == 0:
		max = wire.MaxSegmentBytes
	case max < 0:
		return nil, fmt.Errorf("MaxSegmentBytes %d is negative", max)
	case max > wire.MaxSegmentBytes:
		return nil, fmt.Errorf("MaxSegmentBytes %d exceeds the 64 MiB pi reads with", max)
	}
	clock := opt.Clock
	if clock == nil {
		clock = time.Now
	}
	return &Writer{
		root: dir, ops: opt.Ops, clock: clock, max: max,
		segSeq: 1, chain: wire.ChainGenesis, lastCRC: wire.EmptyCRC32C, vouched: opt.Branches,
		idxSum: sha256.New(),
	}, nil
}

func (w *Writer) makeLayout() error {
	if p, ok, err := w.ops.HasSymlinkAncestor(w.root); err != nil {
		return err
	} else if ok {
		return fmt.Errorf("%s is a symlink: pi opens stores with no symlink in any path component", p)
	}
	switch st, err := os.Lstat(w.root); {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return err
	case st.Mode()&fs.ModeSymlink != 0:
		return fmt.Errorf("%s is a symlink", w.root)
	case !st.IsDir():
		return fmt.Errorf("%s exists and is not a directory", w.root)
	default:
		names, err := readDirNames(w.ops, w.root)
		if err != nil {
			return err
		}
		if len(names) > 0 {
			return fmt.Errorf("%s is not empty", w.root)
		}
	}
	if err := w.ops.MkdirPrivate(w.root); err != nil {
		return err
	}
	if err := w.ops.MkdirPrivateIn(w.root, StoreDirs...); err != nil {
		return err
	}
	f, err := w.ops.CreatePrivate(MutationLockPath(w.root))
	if err != nil {
		return err
	}
	return f.Close()
}

// readDirNames lists a directory opened without following symlinks.
func readDirNames(ops durable.Ops, dir string) ([]string, error) {
	d, err := ops.OpenNoFollow(dir, syscall.O_RDONLY|syscall.O_DIRECTORY, 0)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return d.Readdirnames(-1)
}

// IndexSHA256 is the hex SHA-256 of the index as written (or copied) so
// far: the empty digest when there is no index.
func (w *Writer) IndexSHA256() string { return hex.EncodeToString(w.idxSum.Sum(nil)) }

// IndexSHA256State is the state of IndexSHA256's digest (MarshalBinary),
// from which a later ContinueInPlace goes on (Options.IndexSHA256State).
func (w *Writer) IndexSHA256State() []byte {
	st, err := w.idxSum.(encoding.BinaryMarshaler).MarshalBinary()
	if err != nil {
		return nil // crypto/sha256's never fails
	}
	return st
}

// ManifestSHA256 is the hex SHA-256 of the manifest WriteManifest wrote
// last ("" before).
func (w *Writer) ManifestSHA256() string { return w.manifestSHA }

// Root returns the store directory.
func (w *Writer) Root() string { return w.root }

// Head returns the last entry written (zero for an empty store).
func (w *Writer) Head() wire.Head { return w.head }

// ChainHash returns the hash chain after the last frame.
func (w *Writer) ChainHash() string { return w.chain }

// Counters returns the counters the manifest will carry.
func (w *Writer) Counters() wire.Counters {
	c := w.counters
	c.BranchesTotal = w.branches()
	return c
}

func (w *Writer) branches() uint64 {
	if w.vouched != nil {
		return w.vouched()
	}
	return w.baseBranches + w.graph.Branches()
}

// Append writes one entry: its frame to the current segment (rolling over
// to a new one as FORMAT.md §2 says) and its index row. payload must be the
// canonical payload bytes (readers/payload's output, one JSON object); the
// writer hashes it but does not re-parse it: verification reads every frame
// back before a staging store is installed. Invalid arguments (an id off
// the contract, a duplicate id, an unknown type, a frame over the limit)
// are refused without touching the store.
func (w *Writer) Append(entryID, parentID, entryType string, payload []byte) (wire.IndexRow, error) {
	if w.err != nil {
		return wire.IndexRow{}, w.err
	}
	if err := w.checkEntry(entryID, parentID, entryType, payload); err != nil {
		return wire.IndexRow{}, fmt.Errorf("append entry %q: %w", entryID, err)
	}
	f := wire.Frame{
		SegmentSeq: w.segSeq, FrameSeq: w.frameSeq + 1, EntrySeq: w.head.EntrySeq + 1,
		EntryID: entryID, ParentEntryID: parentID, EntryType: wire.EntryType(entryType),
		Timestamp: wire.FormatTimestamp(w.clock()),
	}
	f.SetPayload(payload)
	w.line = wire.AppendFrame(w.line[:0], f)
	if err := w.checkLength(len(w.line)); err != nil {
		return wire.IndexRow{}, fmt.Errorf("append entry %q: %w", entryID, err)
	}
	// Compare with this first encoding (§2): the rolled-over one differs in
	// length whenever a number gains or loses a digit.
	if w.segBytes > 0 && w.segBytes+int64(len(w.line)) > w.max {
		f.SegmentSeq, f.FrameSeq = w.segSeq+1, 1
		f.Timestamp = wire.FormatTimestamp(w.clock())
		w.line = wire.AppendFrame(w.line[:0], f)
		if err := w.checkLength(len(w.line)); err != nil {
			return wire.IndexRow{}, fmt.Errorf("append entry %q: %w", entryID, err)
		}
	}
	row, err := w.write(f, w.line)
	if err != nil {
		w.err = fmt.Errorf("append entry %q: %w (the store is incomplete and must be discarded)", entryID, err)
		return wire.IndexRow{}, w.err
	}
	return row, nil
}

// Appendable reports what Append would refuse of this entry before it
// writes anything (the checks of its arguments, a duplicate of a written
// id, ErrBaseLinksNeeded), without writing: a store continued in place is
// only written once every appended entry is known to be accepted.
func (w *Writer) Appendable(entryID, parentID, entryType string, payload []byte) error {
	if err := w.checkEntry(entryID, parentID, entryType, payload); err != nil {
		return fmt.Errorf("append entry %q: %w", entryID, err)
	}
	return nil
}

func (w *Writer) checkEntry(entryID, parentID, entryType string, payload []byte) error {
	switch {
	case !wire.ValidEntryID(entryID):
		return errors.New("entry id does not match the V2 entry-id contract ^[A-Za-z0-9_-]{1,128}$")
	case parentID != "" && !wire.ValidEntryID(parentID):
		return errors.New("parent id does not match the V2 entry-id contract")
	case !wire.EntryType(entryType).Valid():
		return fmt.Errorf("entry type %q is not one of the reference's eight", entryType)
	case len(payload) < 2 || payload[0] != '{' || payload[len(payload)-1] != '}':
		return errors.New("payload is not a JSON object")
	case int64(len(payload)) > w.max:
		// Its frame is longer still: refused before anything is written
		// (Appendable), not by Append after the caller prepared the store.
		return &FrameTooLargeError{Bytes: len(payload), Limit: w.max, Kind: "segment", AtLeast: true}
	}
	if w.vouched == nil && w.graph.Has(entryID) {
		return idgraph.ErrDuplicate
	}
	if w.baseVouched && parentID != "" {
		// A base entry before the last may have children already: whether
		// this one makes a branch is in the base's frames, not read.
		if p := w.graph.Lookup(parentID); p >= 0 && p < w.baseCount-1 {
			return fmt.Errorf("parent %q is a base entry before the last: %w", parentID, ErrBaseLinksNeeded)
		}
	}
	return nil
}

func (w *Writer) checkLength(n int) error {
	if n > wire.MaxFrameBytes {
		return &FrameTooLargeError{Bytes: n, Limit: wire.MaxFrameBytes, Kind: "frame"}
	}
	if int64(n) > w.max {
		return &FrameTooLargeError{Bytes: n, Limit: w.max, Kind: "segment"}
	}
	return nil
}

// write puts an encoded frame line into its segment and its row into the
// index, and advances the writer's state.
func (w *Writer) write(f wire.Frame, line []byte) (wire.IndexRow, error) {
	if f.FrameSeq == 1 {
		if err := w.openSegment(f.SegmentSeq); err != nil {
			return wire.IndexRow{}, err
		}
	}
	row := wire.IndexRow{
		EntrySeq: f.EntrySeq, EntryID: f.EntryID, SegmentSeq: f.SegmentSeq, FrameSeq: f.FrameSeq,
		ByteOffset: uint64(w.segBytes), ByteLength: uint64(len(line)),
		CRC32C: wire.CRC32C(line), State: wire.RowActive,
	}
	if _, err := w.segBuf.Write(line); err != nil {
		return wire.IndexRow{}, err
	}
	if w.idx == nil {
		idx, err := w.ops.CreatePrivate(IndexPath(w.root))
		if err != nil {
			return wire.IndexRow{}, err
		}
		w.idx, w.idxBuf = idx, idxBufPool.Get()
		w.idxBuf.Reset(idx)
	}
	w.row = wire.AppendIndexRow(w.row[:0], row)
	w.idxSum.Write(w.row)
	if _, err := w.idxBuf.Write(w.row); err != nil {
		return wire.IndexRow{}, err
	}

	w.advance(wire.FrameHead{SegmentSeq: f.SegmentSeq, FrameSeq: f.FrameSeq, EntrySeq: f.EntrySeq,
		EntryID: f.EntryID, ParentEntryID: f.ParentEntryID, EntryType: f.EntryType, PayloadSHA256: f.PayloadSHA256}, row, int64(len(line)))
	return row, w.link(f.EntryID, f.ParentEntryID)
}

func (w *Writer) openSegment(seq uint64) error {
	if err := w.closeSegment(); err != nil {
		return err
	}
	seg, err := w.ops.CreatePrivate(SegmentPath(w.root, seq))
	if err != nil {
		return err
	}
	w.seg, w.segBytes = seg, 0
	if w.segBuf == nil {
		w.segBuf = segBufPool.Get()
	}
	w.segBuf.Reset(seg)
	return nil
}

func (w *Writer) closeSegment() error {
	if w.seg == nil {
		return nil
	}
	err := w.segBuf.Flush()
	if cerr := w.seg.Close(); err == nil {
		err = cerr
	}
	w.seg = nil
	return err
}

// flush hands buffered frames and rows to the files (no fsync).
func (w *Writer) flush() error {
	if w.err != nil {
		return w.err
	}
	if w.seg != nil {
		if err := w.segBuf.Flush(); err != nil {
			w.err = err
			return err
		}
	}
	if w.idx != nil {
		if err := w.idxBuf.Flush(); err != nil {
			w.err = err
			return err
		}
	}
	return nil
}

// Seal flushes the buffers and fsyncs every file and directory of the
// store, each directory after its contents (durable.SyncTree), or, for a
// writer whose Ops defer syncs, seals it with one durable.SealTree. A staging
// store is invisible until cutover renames it into place, so this one
// durable seal, before verification and the rename, stands in for the
// reference's fsync after every frame: a crash before it loses only a
// staging store that a re-run rebuilds from the source.
func (w *Writer) Seal() error {
	if err := w.flush(); err != nil {
		return fmt.Errorf("seal %s: %w", w.root, err)
	}
	durable.Failpoint(fpBeforeSeal)
	seal := w.ops.SyncTree
	if w.ops.DeferSync {
		seal = w.ops.SealTree
	}
	if err := seal(w.root); err != nil {
		w.err = err
		return fmt.Errorf("seal %s: %w", w.root, err)
	}
	durable.Failpoint(fpAfterSeal)
	return nil
}

// Close flushes and closes the open files. It does not fsync: call Seal
// first for a store that must survive a crash.
func (w *Writer) Close() error {
	if w.err == errClosed {
		return nil
	}
	err := w.flush()
	if cerr := w.closeSegment(); err == nil {
		err = cerr
	}
	if w.idx != nil {
		if cerr := w.idx.Close(); err == nil {
			err = cerr
		}
		w.idx = nil
	}
	// The buffers were flushed (or the store is being discarded): hand
	// them to the next store (each pool takes back only buffers of its
	// size).
	segBufPool.Put(w.segBuf)
	idxBufPool.Put(w.idxBuf)
	appendSegBufPool.Put(w.segBuf)
	appendIdxBufPool.Put(w.idxBuf)
	w.segBuf, w.idxBuf = nil, nil
	if w.err == nil {
		w.err = errClosed
	}
	if err != nil {
		return fmt.Errorf("close store %s: %w", w.root, err)
	}
	return nil
}
