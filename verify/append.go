package verify

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"syscall"

	"pisess/readers/discover"
	"pisess/readers/payload"
	"pisess/writers/durable"
	"pisess/writers/store"
	"pisess/writers/wire"
)

// AppendedEntry is an entry a source gained after the store it continues:
// as the source's reader produced it.
type AppendedEntry struct {
	ID, ParentID, Type string
	PayloadSHA256      string
}

// AppendCheck is what VerifiedAppend checks a store continued in place
// against.
type AppendCheck struct {
	// BaseManifest, BaseLastRow and BaseIndexBytes describe the store
	// before the append, as its check read it (writers.AppendInPlace:
	// each frame CRC-checked against its row, read for its links, or
	// vouched for; the manifest against the rows).
	BaseManifest   wire.Manifest
	BaseLastRow    wire.IndexRow
	BaseIndexBytes int64
	// Appended are the source's entries after the base's, in order.
	Appended []AppendedEntry
	// HeaderID is the source header's session id.
	HeaderID string
	// Fingerprint is the whole source's, taken as it was read; Unchanged
	// reports whether the file is still those bytes (its size and
	// identity unmoved).
	Fingerprint wire.SourceFingerprint
	Unchanged   func() bool
	// BaseNames, when set, are the store's entries before the append, as
	// a vouch of the caller listed them (relative, slash-separated, "" the
	// root), its directories' metadata unchanged since under the caller's
	// locks (a store whose frames were vouched): the store is not walked,
	// those names and the files an append creates (the index, segments)
	// are looked at one by one.
	BaseNames []string
}

// VerifiedAppend is Verified for an installed store continued in place
// (writers.AppendInPlace): in time proportional to the appended entries
// it checks that the store is the base followed by
// exactly check.Appended — each appended row continues the index, each of
// its frames passes the reference's frame checks (CRC, coordinates,
// payload digest and size, typed payload with the frame's id, parent and
// type) and equals the source's entry, the chain continues the base's —
// that the manifest describes base plus appended (head, counters,
// segments, chain, last CRC, invariants, session id, format), and the
// acceptance rules that do not read frames (symlinks, modes, owner,
// unindexed segments, segment coverage and size). The base's own frames
// are not read again: its check did, or the caller vouched for them. With
// check.BaseNames (names the caller vouches for) the store is not walked
// nor its segments listed: each name is looked at; with
// opt.Accept.AncestorsWalked its ancestors are not. Only a report without
// findings yields a valid Passed.
func VerifiedAppend(ctx context.Context, dir, sessionPath string, check AppendCheck, opt Options) (Passed, Report, error) {
	if check.Unchanged == nil {
		return Passed{}, Report{}, errors.New("verify: VerifiedAppend needs a way to re-check the source")
	}
	accept := AcceptOptions{OwnerUID: -1, OwnerGID: -1}
	if opt.Accept != nil {
		accept = *opt.Accept
	}
	accept.HeaderID, accept.SourceFormat, accept.MaxSegmentBytes = check.HeaderID, opt.SourceFormat, opt.MaxSegmentBytes
	a := &appendScan{out: findings{session: sessionPath}, check: check, chain: check.BaseManifest.Integrity.ChainHash}
	root, err := filepath.Abs(dir)
	if err != nil {
		return Passed{}, Report{}, fmt.Errorf("verify: %w", err)
	}
	fi, err := os.Lstat(root)
	if err != nil {
		return Passed{}, Report{}, fmt.Errorf("verify: %w", err)
	}
	if !accept.AncestorsWalked { // else the caller's walk looked at them
		if link, ok, err := durable.OS.HasSymlinkAncestor(root); err != nil || ok {
			a.out.add(Finding{Code: CodeSymlinkAncestor, Class: ClassCorrupt, Path: link, Detail: fmt.Sprintf("a symlink on the way to the store (%v)", err)})
		}
	}
	st, err := store.Open(root, store.ReadOptions{MaxSegmentBytes: opt.MaxSegmentBytes, OnceManifest: true})
	if err != nil {
		return Passed{}, Report{}, fmt.Errorf("verify: %w", err)
	}
	var names []string
	var keys []discover.FileKey
	if check.BaseNames != nil {
		names = appendNames(check.BaseNames, len(check.Appended), st)
		keys = seeNames(&a.out, root, names, accept)
	} else {
		walkStoreSeeing(&a.out, root, root, fi, accept, func(path string) {
			if rel, err := filepath.Rel(root, path); err == nil {
				if rel == "." {
					rel = ""
				}
				names = append(names, rel)
			}
		})
		sort.Strings(names)
	}
	checkIdentity(&a.out, st, root, sessionPath, accept)
	if err := a.rows(ctx, st, root); err != nil {
		return Passed{}, Report{}, err
	}
	a.segments(root, check.BaseNames == nil)
	a.manifest(st)
	if !check.Unchanged() {
		a.out.add(changed(sessionPath, "the source changed after it was read"))
	}
	rep := Report{Store: dir, Session: sessionPath, Findings: a.out.list,
		Entries: check.BaseManifest.Counters.EntriesTotal + uint64(len(a.seen)), Bytes: check.BaseManifest.Counters.BytesTotal + a.bytes,
		ChainHash: a.chain, SourceChainHash: a.sourceChain(), Invariants: map[string]Invariant{}, Names: names, Keys: keys}
	rep.SourceEntries = check.BaseManifest.Counters.EntriesTotal + uint64(len(check.Appended))
	ok := len(rep.Findings) == 0
	rep.Verification = wire.Verification{EntryCountMatch: ok, HashChainMatch: ok, IndexConsistent: ok}
	for _, code := range InvariantCodes {
		rep.Invariants[code] = Invariant{Holds: ok}
	}
	if !ok {
		return Passed{}, rep, fmt.Errorf("%s: %w (%d findings)", dir, ErrNotVerified, len(rep.Findings))
	}
	return Passed{staging: dir, session: sessionPath, fingerprint: check.Fingerprint, report: rep.Verification, ok: true}, rep, nil
}

// appendNames are the entries of a store continued in place whose entries
// before were base: those and what an append of n entries creates (the
// index with the first entry, a segment file for each segment the
// manifest counts, at most one more per entry), sorted.
func appendNames(base []string, n int, st *store.Store) []string {
	names := append(slices.Clone(base), "index", path.Join("index", store.IndexName))
	if m, err := st.Manifest(); err == nil {
		for seq := uint64(1); seq <= m.Files.SegmentCount && seq <= uint64(len(base)+n); seq++ {
			names = append(names, path.Join("segments", wire.SegmentFileName(seq)))
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// seeNames is walkStoreSeeing for a store whose entries the caller knows
// (AppendCheck.BaseNames): each is looked at and checked as the walk
// checks it, no directory is listed; one that is gone is a finding. It
// returns each name's lstat metadata (nil after a finding).
func seeNames(out *findings, root string, names []string, opt AcceptOptions) []discover.FileKey {
	keys := make([]discover.FileKey, 0, len(names))
	for _, n := range names {
		p := filepath.Join(root, filepath.FromSlash(n))
		fi, err := os.Lstat(p)
		if err != nil {
			out.add(Finding{Code: CodeUnreadable, Class: ClassCorrupt, Path: p, Detail: err.Error(), Repair: RepairRebuild})
			keys = nil
			continue
		}
		checkEntry(out, fi, p, opt)
		checkType(out, root, p, fi)
		if k, ok := discover.FileKeyOf(fi); ok && keys != nil {
			keys = append(keys, k)
		} else {
			keys = nil
		}
	}
	return keys
}

// appendScan is one check of the appended part of a continued store.
type appendScan struct {
	out   findings
	check AppendCheck
	dec   payload.Decoder

	seen  []wire.IndexRow // the appended rows read
	bytes uint64
	chain string
	msgs  uint64
	comps uint64
	// ends maps each segment the appended rows touch to the end of its
	// last row.
	ends map[uint64]uint64
}

func (a *appendScan) bad(code, path, detail string) {
	a.out.add(Finding{Code: code, Class: ClassCorrupt, Path: path, Detail: detail, Repair: RepairRebuild})
}

// sourceChain continues the base chain over the source's payload digests.
func (a *appendScan) sourceChain() string {
	c := a.check.BaseManifest.Integrity.ChainHash
	for _, e := range a.check.Appended {
		c = wire.ChainStep(c, e.PayloadSHA256)
	}
	return c
}

// rows reads the index after the base's rows and each appended frame.
func (a *appendScan) rows(ctx context.Context, st *store.Store, root string) error {
	path := store.IndexPath(root)
	a.ends = map[uint64]uint64{}
	prev := a.check.BaseLastRow
	if prev.EntrySeq > 0 {
		a.ends[prev.SegmentSeq] = prev.End()
	}
	if prev.EntrySeq == 0 && len(a.check.Appended) == 0 {
		return nil // an empty store has no index
	}
	f, err := durable.OS.OpenNoFollow(path, syscall.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		a.bad(CodeIndexMissing, path, err.Error())
		return nil
	}
	defer f.Close()
	r := bufio.NewReader(io.NewSectionReader(f, a.check.BaseIndexBytes, 1<<62))
	for i := 0; ; i++ {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("verify: %w", err)
		}
		line, err := r.ReadSlice('\n')
		if err == io.EOF && len(line) == 0 {
			if i != len(a.check.Appended) {
				a.bad(CodeEntriesSource, path, fmt.Sprintf("the index has %d appended rows, the source %d entries", i, len(a.check.Appended)))
			}
			return nil
		}
		if err != nil {
			a.bad(CodeIndexTorn, path, err.Error())
			return nil
		}
		if i >= len(a.check.Appended) {
			a.bad(CodeEntriesSource, path, fmt.Sprintf("the index has more rows than the source's %d appended entries", len(a.check.Appended)))
			return nil
		}
		row, err := wire.ParseIndexRow(line)
		if err != nil {
			a.bad(CodeIndexInvalid, path, err.Error())
			return nil
		}
		if !a.row(st, row, prev, a.check.Appended[i]) {
			return nil
		}
		prev = row
	}
}

// row checks one appended row, its frame, and their match with the
// source's entry; false stops the scan.
func (a *appendScan) row(st *store.Store, row, prev wire.IndexRow, want AppendedEntry) bool {
	path := store.IndexPath(st.Root())
	newSeg := prev.EntrySeq == 0 || row.SegmentSeq != prev.SegmentSeq
	switch {
	case row.EntrySeq != prev.EntrySeq+1 || row.EntrySeq != a.check.BaseManifest.Counters.EntriesTotal+uint64(len(a.seen))+1:
		a.bad(CodeIndexInvalid, path, fmt.Sprintf("row for entry %d follows entry %d", row.EntrySeq, prev.EntrySeq))
		return false
	case newSeg && (row.SegmentSeq != prev.SegmentSeq+1 || row.FrameSeq != 1 || row.ByteOffset != 0):
		a.bad(CodeIndexInvalid, path, fmt.Sprintf("entry %d starts segment %d at frame %d offset %d", row.EntrySeq, row.SegmentSeq, row.FrameSeq, row.ByteOffset))
		return false
	case !newSeg && (row.FrameSeq != prev.FrameSeq+1 || row.ByteOffset != prev.End()):
		a.bad(CodeIndexInvalid, path, fmt.Sprintf("entry %d does not follow the previous frame", row.EntrySeq))
		return false
	case row.EntryID != want.ID:
		a.bad(CodeEntriesSource, path, fmt.Sprintf("entry %d is %q in the store and %q in the source", row.EntrySeq, row.EntryID, want.ID))
		return false
	}
	fr, err := st.ReadFrame(row)
	if err != nil {
		f := iterFinding(err)
		a.out.add(f)
		return false
	}
	switch {
	case fr.ParentEntryID != want.ParentID || string(fr.EntryType) != want.Type:
		a.bad(CodeEntriesSource, path, fmt.Sprintf("entry %d (%q): parent or type differs from the source's", row.EntrySeq, row.EntryID))
		return false
	case fr.PayloadSHA256 != want.PayloadSHA256:
		a.bad(CodePayloadSource, path, fmt.Sprintf("entry %d (%q): the stored payload differs from the source's", row.EntrySeq, row.EntryID))
		return false
	}
	e, err := a.dec.Decode(fr.Payload)
	if err != nil || !e.HasID || e.ID != fr.EntryID || e.ParentID != fr.ParentEntryID || e.HasParent != (fr.ParentEntryID != "") || e.Type != string(fr.EntryType) {
		a.bad(CodePayloadTyped, path, fmt.Sprintf("entry %d: the payload does not parse as the frame's typed entry", row.EntrySeq))
		return false
	}
	a.seen = append(a.seen, row)
	a.bytes += row.ByteLength
	a.chain = wire.ChainStep(a.chain, fr.PayloadSHA256)
	switch fr.EntryType {
	case wire.EntryMessage:
		a.msgs++
	case wire.EntryCompaction:
		a.comps++
	}
	a.ends[row.SegmentSeq] = row.End()
	return true
}

// segments checks coverage: each segment the appended rows touch (and the
// base's last) ends where its last row ends, and no segment file lies
// beyond the last row's.
func (a *appendScan) segments(root string, listed bool) {
	var last uint64
	for seq, end := range a.ends {
		last = max(last, seq)
		p := store.SegmentPath(root, seq)
		fi, err := os.Lstat(p)
		switch {
		case err != nil:
			a.bad(CodeIndexMissingSegment, p, err.Error())
		case uint64(fi.Size()) != end:
			a.bad(CodeIndexUncovered, p, fmt.Sprintf("segment of %d bytes, its rows end at %d", fi.Size(), end))
		}
	}
	if !listed {
		// The caller vouches for the store's names (AppendCheck.BaseNames):
		// no segment file came but the ones the manifest counts, looked
		// at by seeNames.
		return
	}
	d, err := durable.OS.OpenNoFollow(store.SegmentsPath(root), syscall.O_RDONLY|syscall.O_DIRECTORY, 0)
	if err != nil {
		a.bad(CodeUnreadable, store.SegmentsPath(root), err.Error())
		return
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil || uint64(len(names)) != last {
		a.bad(CodeUnindexedSegment, store.SegmentsPath(root), fmt.Sprintf("%d segment files, the index names %d", len(names), last))
	}
}

// manifest checks the manifest against the base and the appended rows.
func (a *appendScan) manifest(st *store.Store) {
	path := store.ManifestPath(st.Root())
	m, err := st.Manifest()
	if err != nil {
		a.bad(CodeManifestInvalid, path, err.Error())
		return
	}
	base := a.check.BaseManifest.Counters
	last := a.check.BaseLastRow
	if n := len(a.seen); n > 0 {
		last = a.seen[n-1]
	}
	want := wire.Head{SegmentSeq: last.SegmentSeq, EntrySeq: last.EntrySeq, EntryID: last.EntryID}
	crc := last.CRC32C
	if last.EntrySeq == 0 {
		crc = wire.EmptyCRC32C
	}
	c := m.Counters
	switch {
	case m.Head != want:
		a.bad(CodeManifestMismatch, path, fmt.Sprintf("head %+v, the index ends at %+v", m.Head, want))
	case c.EntriesTotal != base.EntriesTotal+uint64(len(a.seen)) || c.BytesTotal != base.BytesTotal+a.bytes ||
		c.MessagesTotal != base.MessagesTotal+a.msgs || c.CompactionsTotal != base.CompactionsTotal+a.comps:
		a.bad(CodeManifestMismatch, path, fmt.Sprintf("counters %+v differ from the base's plus the appended frames'", c))
	case c.BranchesTotal < base.BranchesTotal || c.BranchesTotal > base.BranchesTotal+uint64(len(a.seen)):
		// An appended entry adds a child to one parent: it can make at
		// most one more branch point.
		a.bad(CodeManifestMismatch, path, fmt.Sprintf("branchesTotal %d cannot follow the base's %d", c.BranchesTotal, base.BranchesTotal))
	case m.Files != wire.StoreFiles(last.SegmentSeq):
		a.bad(CodeManifestMismatch, path, fmt.Sprintf("segmentCount %d, the index names %d", m.Files.SegmentCount, last.SegmentSeq))
	case m.Integrity.ChainHash != a.chain:
		a.bad(CodeChainBreak, path, "the manifest's chainHash differs from the chain over the frames")
	case m.Integrity.LastCRC32C != crc:
		a.bad(CodeManifestMismatch, path, "lastCrc32c differs from the last index row's")
	case len(m.Invariants.False()) > 0:
		a.bad(CodeManifestInvariant, path, fmt.Sprintf("invariants false: %v", m.Invariants.False()))
	}
}
