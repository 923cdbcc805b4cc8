package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"pisess/writers/durable"
	"pisess/writers/wire"
)

// The repair primitives below change an existing store. When the store is
// installed (a sidecar pi may open), the caller holds the store mutation
// lock (LockMutation) around the whole repair, as the reference does around
// each of its own, so that pi's repairs and pisess's never interleave.
// They use durable.OS.

// LockMutation takes the store's exclusive store.mutation.lock.
func LockMutation(ctx context.Context, root string, timeout time.Duration) (*durable.Lock, error) {
	return durable.OS.LockFile(ctx, MutationLockPath(root), timeout)
}

// CutTornTail truncates the file at path (a segment, the index or the
// ledger) just after its last newline and returns the bytes it cut: a torn
// last line, a zero-filled tail. A file that ends with a newline is left
// alone (cut is empty). The caller keeps the returned bytes (quarantine)
// before anything else: they are the only copy. Only a torn *tail* is cut;
// a complete line that is corrupt is not this function's to remove.
func CutTornTail(path string) (cut []byte, err error) {
	f, size, err := openRegular(durable.OS, path)
	if err != nil {
		return nil, fmt.Errorf("cut torn tail: %w", err)
	}
	keep, err := lastNewlineEnd(f, size)
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("cut torn tail of %s: %w", path, err)
	}
	if keep == size {
		return nil, nil
	}
	cut = make([]byte, size-keep)
	g, _, err := openRegular(durable.OS, path)
	if err != nil {
		return nil, fmt.Errorf("cut torn tail: %w", err)
	}
	_, err = g.ReadAt(cut, keep)
	g.Close()
	if err != nil {
		return nil, fmt.Errorf("cut torn tail of %s: %w", path, err)
	}
	durable.Failpoint(fpBeforeTailCut)
	if err := durable.OS.Truncate(path, keep); err != nil {
		return nil, err
	}
	durable.Failpoint(fpAfterTailCut)
	return cut, nil
}

// lastNewlineEnd returns the offset just after the last '\n' of a file of
// the given size (0 when it has none), reading backwards in blocks.
func lastNewlineEnd(r io.ReaderAt, size int64) (int64, error) {
	const block = 64 << 10
	buf := make([]byte, block)
	for end := size; end > 0; {
		start := max(end-block, 0)
		b := buf[:end-start]
		if _, err := r.ReadAt(b, start); err != nil {
			return 0, err
		}
		if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
			return start + int64(i) + 1, nil
		}
		end = start
	}
	return 0, nil
}

// RebuildIndex rewrites index/offsets.jsonl from the frames of the
// segments (canonical *.seg names, in number order) and returns the number
// of rows. Every line must be a whole frame continuing the sequence
// (segmentSeq the file's, frameSeq from 1, entrySeq from 1 across the
// store); anything else is returned as a *CorruptionError and the index is
// left as it was: cut a torn tail first (CutTornTail), and rebuild a store
// with corrupt frames from its source instead. Empty segments (what cutting
// a torn frame that was alone in its segment leaves) are set aside as
// *.seg.bak, since no row can name them. The new index is published
// atomically through tmp/ (as tmp/offsets.jsonl.tmp; the reference names
// its temp offsets.rebuild.tmp). A store with no frames gets an empty index
// only if it had one.
func RebuildIndex(dir string) (int, error) {
	s, err := Open(dir, ReadOptions{})
	if err != nil {
		return 0, err
	}
	var out []byte
	n := 0
	err = s.scanSegments(func(f wire.Frame, r wire.IndexRow) error {
		out = wire.AppendIndexRow(out, r)
		n++
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("rebuild index: %w", err)
	}
	if err := setAsideEmptySegments(dir); err != nil {
		return 0, fmt.Errorf("rebuild index: %w", err)
	}
	if n == 0 {
		if _, err := os.Lstat(IndexPath(dir)); errors.Is(err, fs.ErrNotExist) {
			return 0, nil
		}
	}
	durable.Failpoint(fpBeforeIndexRebuild)
	if err := durable.OS.WriteFileAtomic(IndexDirPath(dir), TmpPath(dir), IndexName, out, 0o600); err != nil {
		return 0, fmt.Errorf("rebuild index: %w", err)
	}
	durable.Failpoint(fpAfterIndexRebuild)
	return n, nil
}

// scanSegments reads every frame of every segment in order, deriving its
// index row, and calls fn; it stops at the first line that is not a whole
// frame continuing the sequence.
func (s *Store) scanSegments(fn func(wire.Frame, wire.IndexRow) error) error {
	dir := SegmentsPath(s.root)
	names, err := readDirNames(s.ops, dir)
	if err != nil {
		return err
	}
	var seqs []uint64
	for _, n := range names {
		seq, ok, numeric := wire.ParseSegmentFileName(n)
		if !ok {
			continue
		}
		if !numeric || n != wire.SegmentFileName(seq) {
			return &CorruptionError{Path: dir + "/" + n, Err: errors.New("segment file name is not canonical")}
		}
		seqs = append(seqs, seq)
	}
	sort.Slice(seqs, func(i, j int) bool { return seqs[i] < seqs[j] })
	var entry uint64
	for _, seq := range seqs {
		seg, err := s.openSegment(seq)
		if err != nil {
			return err
		}
		lr := newLineReader(seg.f)
		var frame uint64
		for {
			line, err := lr.readLine()
			if err == io.EOF {
				break
			}
			cerr := func(err error) error {
				seg.f.Close()
				return &CorruptionError{Path: seg.path, Segment: seq, Offset: lr.off, Err: err}
			}
			if err != nil {
				return cerr(err)
			}
			f, err := wire.ParseFrame(line)
			if err != nil {
				return cerr(err)
			}
			if f.SegmentSeq != seq || f.FrameSeq != frame+1 || f.EntrySeq != entry+1 {
				return cerr(fmt.Errorf("frame (segment %d frame %d entry %d) does not continue the sequence (segment %d frame %d entry %d): %w",
					f.SegmentSeq, f.FrameSeq, f.EntrySeq, seq, frame+1, entry+1, ErrIndexMismatch))
			}
			frame, entry = f.FrameSeq, f.EntrySeq
			row := wire.IndexRow{EntrySeq: f.EntrySeq, EntryID: f.EntryID, SegmentSeq: seq, FrameSeq: f.FrameSeq,
				ByteOffset: uint64(lr.off), ByteLength: uint64(len(line)), CRC32C: wire.CRC32C(line), State: wire.RowActive}
			if err := fn(f, row); err != nil {
				seg.f.Close()
				return err
			}
		}
		seg.f.Close()
	}
	return nil
}

// RecomputeManifest rewrites manifest.json from the store's frames: head,
// counters, segment count, chain and last CRC recomputed, createdAt kept
// from the existing manifest when it still holds a valid one, updatedAt
// now. It refuses when the store has any problem other than the manifest's
// own (Check), because the invariants it would have to write would not all
// be true.
func RecomputeManifest(dir, sessionID string, format wire.SourceFormat) (wire.Manifest, error) {
	m, err := recomputeManifest(dir, sessionID, format, time.Now)
	if err != nil {
		return wire.Manifest{}, fmt.Errorf("recompute manifest of %s: %w", dir, err)
	}
	return m, nil
}

func recomputeManifest(dir, sessionID string, format wire.SourceFormat, clock func() time.Time) (wire.Manifest, error) {
	if !wire.ValidUUID(sessionID) {
		return wire.Manifest{}, fmt.Errorf("session id %q is not a UUID", sessionID)
	}
	if !format.Valid() {
		return wire.Manifest{}, fmt.Errorf("source format %q is not jsonl_v3, sqlite_v1 or native_v2", format)
	}
	s, err := Open(dir, ReadOptions{})
	if err != nil {
		return wire.Manifest{}, err
	}
	var others []string
	for _, p := range s.Check() {
		if p.Path != ManifestPath(dir) {
			others = append(others, p.String())
		}
	}
	if len(others) > 0 {
		return wire.Manifest{}, fmt.Errorf("the store has problems a manifest cannot paper over: %s", strings.Join(others, "; "))
	}
	m := wire.Manifest{SessionID: sessionID, SourceFormat: format, Invariants: wire.AllInvariants()}
	m.Integrity.ChainHash, m.Integrity.LastCRC32C = wire.ChainGenesis, wire.EmptyCRC32C
	children := map[string]uint32{}
	it := s.Entries()
	defer it.Close()
	for it.Next() {
		f, r := it.Frame(), it.Row()
		m.Head = wire.Head{SegmentSeq: r.SegmentSeq, EntrySeq: r.EntrySeq, EntryID: r.EntryID}
		m.Counters.EntriesTotal++
		m.Counters.BytesTotal += r.ByteLength
		switch f.EntryType {
		case wire.EntryMessage:
			m.Counters.MessagesTotal++
		case wire.EntryCompaction:
			m.Counters.CompactionsTotal++
		}
		if f.ParentEntryID != "" {
			children[f.ParentEntryID]++
		}
		m.Integrity.ChainHash = wire.ChainStep(m.Integrity.ChainHash, f.PayloadSHA256)
		m.Integrity.LastCRC32C = r.CRC32C
	}
	if err := it.Err(); err != nil {
		return wire.Manifest{}, err
	}
	for _, n := range children {
		if n > 1 {
			m.Counters.BranchesTotal++
		}
	}
	var segments uint64
	if m.Head.EntrySeq > 0 {
		rows, err := s.ReadIndex()
		if err != nil {
			return wire.Manifest{}, err
		}
		for i, r := range rows {
			if i == 0 || r.SegmentSeq != rows[i-1].SegmentSeq {
				segments++
			}
		}
	}
	m.Files = wire.StoreFiles(segments)
	now := wire.FormatTimestamp(clock())
	m.CreatedAt, m.UpdatedAt = salvageCreatedAt(dir, now), now
	m.Integrity.ManifestHash = wire.ManifestHash(m)
	data := wire.AppendManifest(nil, m)
	durable.Failpoint(fpBeforeManifestWrite)
	if err := durable.OS.WriteFileAtomic(dir, TmpPath(dir), ManifestName, data, 0o600); err != nil {
		return wire.Manifest{}, err
	}
	durable.Failpoint(fpAfterManifestWrite)
	return m, nil
}

// salvageCreatedAt returns the createdAt of the existing manifest when the
// file still parses as JSON and holds a valid one (its hash or counters may
// be what is being repaired), else def.
func salvageCreatedAt(dir, def string) string {
	b, err := readSmall(durable.OS, ManifestPath(dir), wire.MaxDocumentBytes)
	if err != nil {
		return def
	}
	v, err := wire.ParseJSON(b, nil)
	if err != nil {
		return def
	}
	if c, ok := v.Get("createdAt"); ok && c.Kind == wire.KindString && wire.ValidRFC3339(c.Str) {
		return c.Str
	}
	return def
}

// setAsideEmptySegments renames every empty canonical segment to
// "<name>.bak" (or ".bak.N"): no index row can name an empty segment, and
// pi's resume refuses a *.seg that no row names. Cutting a torn frame that
// was alone in the last segment leaves one. Nothing is deleted.
func setAsideEmptySegments(dir string) error {
	segs := SegmentsPath(dir)
	names, err := readDirNames(durable.OS, segs)
	if err != nil {
		return err
	}
	for _, n := range names {
		seq, ok, numeric := wire.ParseSegmentFileName(n)
		if !ok || !numeric || n != wire.SegmentFileName(seq) {
			continue
		}
		path := filepath.Join(segs, n)
		if st, err := os.Lstat(path); err != nil || !st.Mode().IsRegular() || st.Size() != 0 {
			continue
		}
		if _, err := SetAside(path); err != nil {
			return err
		}
	}
	return nil
}

// SetAside renames path to "<path>.bak", or "<path>.bak.N" with the first
// free N, never replacing anything, and returns the new path: how a repair
// or rollback keeps a segment or checkpoint it takes out of the store.
func SetAside(path string) (string, error) {
	for n := 0; n < 10000; n++ {
		target := path + BackupSuffix
		if n > 0 {
			target += "." + strconv.Itoa(n)
		}
		err := durable.OS.RenameNoReplace(path, target)
		if err == nil {
			return target, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return "", err
		}
	}
	return "", fmt.Errorf("set aside %s: no free backup name", path)
}
