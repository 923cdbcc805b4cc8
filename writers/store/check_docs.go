package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"pisess/writers/wire"
)

// The checks of the store's documents: manifest, checkpoints, ledger,
// source state.

// checkManifest reads the manifest and compares it with the store.
func (c *checker) checkManifest() {
	path := ManifestPath(c.s.root)
	if !c.entry(path, false, true) {
		return
	}
	b, err := readSmall(c.s.ops, path, wire.MaxDocumentBytes)
	if err != nil {
		c.addf(ClassBadDocument, path, "%v", err)
		return
	}
	m, err := wire.ParseManifest(b)
	switch {
	case errors.Is(err, wire.ErrChecksum):
		c.addf(ClassManifestMismatch, path, "%v", err)
		return
	case err != nil:
		c.addf(ClassBadDocument, path, "%v", err)
		return
	}
	for _, name := range m.Invariants.False() {
		c.addf(ClassInvariantFalse, path, "invariants.%s is false", name)
	}
	mismatch := func(member string, want, got any) {
		c.addf(ClassManifestMismatch, path, "%s is %v, the store has %v", member, got, want)
	}
	cn := m.Counters
	if cn.MessagesTotal+cn.CompactionsTotal > cn.EntriesTotal || cn.BranchesTotal > cn.EntriesTotal {
		c.addf(ClassManifestMismatch, path, "counters exceed entriesTotal")
	}
	if !c.indexOK {
		return
	}
	facts := c.facts
	if n := uint64(c.nrows); cn.EntriesTotal != n {
		mismatch("counters.entriesTotal", n, cn.EntriesTotal)
	}
	if cn.BytesTotal != facts.bytes {
		mismatch("counters.bytesTotal", facts.bytes, cn.BytesTotal)
	}
	if m.Files.SegmentCount != facts.segments {
		mismatch("files.segmentCount", facts.segments, m.Files.SegmentCount)
	}
	if m.Head != facts.head {
		mismatch("head", fmt.Sprintf("%+v", facts.head), fmt.Sprintf("%+v", m.Head))
	}
	if m.Integrity.LastCRC32C != facts.lastCRC {
		mismatch("integrity.lastCrc32c", facts.lastCRC, m.Integrity.LastCRC32C)
	}
	if !c.framesOK {
		return
	}
	branches := c.graph.Branches()
	if cn.MessagesTotal != c.counters.MessagesTotal {
		mismatch("counters.messagesTotal", c.counters.MessagesTotal, cn.MessagesTotal)
	}
	if cn.CompactionsTotal != c.counters.CompactionsTotal {
		mismatch("counters.compactionsTotal", c.counters.CompactionsTotal, cn.CompactionsTotal)
	}
	if cn.BranchesTotal != branches {
		mismatch("counters.branchesTotal", branches, cn.BranchesTotal)
	}
	if m.Integrity.ChainHash != c.chain {
		c.addf(ClassChainBreak, path, "integrity.chainHash is %s, the chain over the frames is %s", m.Integrity.ChainHash, c.chain)
	}
}

// checkCheckpointFiles reads the checkpoints: names, documents, numbers,
// and that heads never go backwards (checkpointsMonotonic).
func (c *checker) checkCheckpointFiles() {
	dir := CheckpointsPath(c.s.root)
	names, err := readDirNames(c.s.ops, dir)
	if err != nil {
		return
	}
	sort.Strings(names)
	var files []checkpointFile
	for _, n := range names {
		seq, ok, numeric := wire.ParseCheckpointFileName(n)
		if !ok {
			continue
		}
		path := filepath.Join(dir, n)
		if !numeric {
			c.addf(ClassBadDocument, path, "checkpoint file name is not a number")
			continue
		}
		if c.entry(path, false, true) {
			files = append(files, checkpointFile{seq: seq, path: path})
		}
	}
	sort.SliceStable(files, func(i, j int) bool { return files[i].seq < files[j].seq })
	var prev *checkpointDoc
	for i, f := range files {
		if i > 0 && f.seq == files[i-1].seq {
			c.addf(ClassBadDocument, f.path, "checkpoint number %d appears twice", f.seq)
			continue
		}
		cp, err := readCheckpoint(c.s.ops, f.path, f.seq)
		if err != nil {
			c.addf(ClassBadDocument, f.path, "%v", unwrapCorruption(err))
			continue
		}
		doc := checkpointDoc{cp, f.path}
		if prev != nil && (cp.HeadEntrySeq < prev.HeadEntrySeq || cp.CompactedBeforeEntrySeq < prev.CompactedBeforeEntrySeq) {
			c.addf(ClassBadDocument, f.path, "checkpoint %d goes back from checkpoint %d's head", cp.CheckpointSeq, prev.CheckpointSeq)
		}
		c.checkpoints = append(c.checkpoints, doc)
		prev = &c.checkpoints[len(c.checkpoints)-1]
	}
}

// checkCheckpointChains checks each checkpoint's head and chain against
// the frames (INV-004: a checkpoint's head is what the store held then).
func (c *checker) checkCheckpointChains() {
	if !c.framesOK {
		return
	}
	for _, cp := range c.checkpoints {
		id, ok := c.idAt[cp.HeadEntrySeq]
		switch {
		case !ok:
			c.addf(ClassChainBreak, cp.path, "headEntrySeq %d is beyond the store's %d entries", cp.HeadEntrySeq, c.counters.EntriesTotal)
		case id != cp.HeadEntryID:
			c.addf(ClassChainBreak, cp.path, "headEntryId %q, the store has %q at entry %d", cp.HeadEntryID, id, cp.HeadEntrySeq)
		case c.chainAt[cp.HeadEntrySeq] != cp.ChainHash:
			c.addf(ClassChainBreak, cp.path, "chainHash differs from the chain at entry %d", cp.HeadEntrySeq)
		}
	}
}

func (c *checker) checkLedger() {
	path := LedgerPath(c.s.root)
	if !c.entry(path, false, false) {
		return
	}
	_, err := readLedger(c.s.ops, path)
	if err == nil {
		return
	}
	p := Problem{Class: ClassBadDocument, Path: path, Detail: err.Error()}
	var ce *CorruptionError
	if errors.As(err, &ce) {
		p.Line, p.Detail = ce.Line, ce.Err.Error()
	}
	if errors.Is(err, ErrTornTail) {
		p.Class = ClassTornTail
	}
	c.add(p)
}

func (c *checker) checkSourceState() {
	path := SourceStatePath(c.s.root)
	if _, err := os.Lstat(path); err != nil {
		return
	}
	b, err := readSmall(c.s.ops, path, wire.MaxSourceStateBytes)
	if err != nil {
		if !errors.Is(err, wire.ErrTooLarge) {
			return // a symlink or special file: reported by entry
		}
		c.addf(ClassBadDocument, path, "%v", err)
		return
	}
	if _, err := wire.ParseSourceState(b); err != nil {
		c.addf(ClassBadDocument, path, "%v", err)
	}
}

func unwrapCorruption(err error) error {
	var ce *CorruptionError
	if errors.As(err, &ce) {
		return ce.Err
	}
	return err
}
