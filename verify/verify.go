package verify

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"pisess/readers"
	"pisess/readers/discover"
	"pisess/readers/payload"
	"pisess/writers/idgraph"
	"pisess/writers/store"
	"pisess/writers/wire"
)

// Options tune AgainstSource and Verified.
type Options struct {
	// SourcePath is the session file: findings name it, its extension
	// gives the expected sourceFormat, and Verified fingerprints it.
	SourcePath string
	// SourceFormat is the manifest sourceFormat to expect; "" takes the
	// source header's format.
	SourceFormat readers.SourceFormat
	// Staging says the store is a staging store about to be cut over: its
	// <stem>.v2.staging.<uuid> name is then expected, not a finding.
	Staging bool
	// MaxSegmentBytes is the segment limit (0: 64 MiB).
	MaxSegmentBytes int64
	// Accept, when set, adds the ownership rule: OwnerUID and OwnerGID as
	// in AcceptOptions (HeaderID and SourceFormat are filled in from the
	// source). Verified defaults it to the session file's owner.
	Accept *AcceptOptions
	// Fingerprint is the source's fingerprint taken before the source was
	// read; Verified requires it and checks it again after.
	Fingerprint *wire.SourceFingerprint
}

// Invariant is one of INV-001..INV-007: whether it holds, and when it does
// not, the finding that breaks it.
type Invariant struct {
	Holds   bool
	Finding *Finding
}

// Report is what AgainstSource found.
type Report struct {
	Store   string
	Session string
	// Verification holds the reference's three flags (FORMAT.md §9).
	Verification wire.Verification
	// Invariants maps INV-001..INV-007 to their verdicts.
	Invariants map[string]Invariant
	// Findings lists every problem, store and source.
	Findings []Finding
	// Entries and Bytes count the frames read and their line bytes.
	Entries, Bytes uint64
	// SourceEntries counts the source's entries.
	SourceEntries uint64
	// ChainHash is the chain over the frames, SourceChainHash the one
	// recomputed from the source's payloads.
	ChainHash, SourceChainHash string
	// Name is the session name of the store's last session_info entry.
	Name *string
	// Names are the store's entries as the check walked them, relative to
	// it ("" for the store itself), sorted (VerifiedAppend only).
	Names []string
	// Keys are the lstat metadata of each of Names as the check saw them,
	// when it looked at names it was given (AppendCheck.BaseNames).
	Keys []discover.FileKey
}

// Verified reports whether the three flags are true and every invariant
// holds.
func (r Report) Verified() bool {
	v := r.Verification
	if !v.EntryCountMatch || !v.HashChainMatch || !v.IndexConsistent {
		return false
	}
	for _, code := range InvariantCodes {
		if !r.Invariants[code].Holds {
			return false
		}
	}
	return true
}

// AgainstSource verifies the store at storeDir against src, streaming
// both side by side (memory holds one frame, one entry and the set of
// entry ids for the parent checks), exactly as FORMAT.md §9 defines it:
//
//   - entryCountMatch: the store's entry ids, in order, equal the
//     source's;
//   - hashChainMatch: the chain recomputed from the source's payloads
//     equals the chain over the frames;
//   - indexConsistent: every index row resolves to its frame (CRC, bounds,
//     members), every segment byte is covered, the manifest describes
//     exactly this store and names the source's session id (exact string)
//     and the expected sourceFormat, every payload parses as its typed
//     entry with the frame's id, parent and type, parents are closed and
//     acyclic, checkpoints monotonic, every manifest invariant true — and,
//     as pi's reads require, no symlink, special file or non-private mode.
//
// The invariants INV-001..INV-007 are judged from the same facts. src is
// read to its end and not closed. An error means the check could not be
// made: ctx ended, or the source failed with an error that is not a
// reader's refusal (a refusal is a finding: source.<class>).
func AgainstSource(ctx context.Context, src readers.Source, storeDir string, opt Options) (Report, error) {
	h := src.Header()
	accept := AcceptOptions{OwnerUID: -1, OwnerGID: -1}
	if opt.Accept != nil {
		accept = *opt.Accept
	}
	accept.HeaderID = h.ID
	accept.SourceFormat = opt.SourceFormat
	if accept.SourceFormat == "" {
		accept.SourceFormat = h.Format
	}
	accept.MaxSegmentBytes = opt.MaxSegmentBytes
	sv := &scan{out: findings{session: opt.SourcePath}}
	st := storeChecks(&sv.out, storeDir, opt.SourcePath, accept)
	if err := sv.run(ctx, st, src, opt.SourcePath); err != nil {
		return Report{}, err
	}
	return sv.report(storeDir, opt), nil
}

// scan is one pass over a store's frames, optionally zipped with a source.
type scan struct {
	out findings

	framesDone bool  // every frame read and checked
	iterErr    error // why the frames could not all be read
	typedOK    bool
	links      *idgraph.Graph  // the store iterator's ids (node n: the n-th frame), with their parents
	dec        payload.Decoder // reused: only the entry's fields are read

	entries, bytes uint64
	chain          string
	name           *string

	// staged, when set, replaces the source (VerifiedStaged), and
	// stagedDigest is the store's side of rec.EntryDigest.
	staged       *Staged
	stagedDigest [32]byte

	withSource    bool
	sourceOK      bool // the source was read to its end without a refusal
	sourceEntries uint64
	sourceChain   string
	idsMatch      bool
}

// run reads every frame of st (nil: nothing to read) and, when src is not
// nil, every entry of src alongside.
func (sv *scan) run(ctx context.Context, st *store.Store, src readers.Source, sessionPath string) error {
	sv.chain, sv.sourceChain = wire.ChainGenesis, wire.ChainGenesis
	sv.typedOK, sv.idsMatch, sv.withSource, sv.sourceOK = true, true, src != nil, src != nil
	var it *store.Iterator
	if st != nil {
		it = st.Entries()
		defer it.Close()
		sv.links = it.IDs()
	} else {
		sv.iterErr = errors.New("the store could not be opened")
	}
	storeLive, srcLive := it != nil, src != nil
	for n := 0; storeLive || srcLive; n++ {
		if n%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("verify: %w", err)
			}
		}
		var f wire.Frame
		haveFrame := false
		if storeLive {
			if haveFrame = it.Next(); haveFrame {
				f = it.Frame()
				sv.frame(f, it.Row())
			} else {
				storeLive = false
				sv.iterErr = it.Err()
				sv.framesDone = sv.iterErr == nil || sv.allRowsRead(st)
			}
		}
		var e readers.Entry
		haveEntry := false
		if srcLive {
			var err error
			e, err = src.Next()
			switch {
			case err == nil:
				haveEntry = true
				sv.sourceEntries++
				sv.sourceChain = wire.ChainStep(sv.sourceChain, wire.PayloadSHA256(e.Payload))
			case errors.Is(err, io.EOF):
				srcLive = false
			case errors.Is(err, readers.ErrSourceChanged):
				// Written while it was compared: stale, as freshness
				// judges a source that changes while it is hashed.
				srcLive, sv.sourceOK, sv.idsMatch = false, false, false
				sv.out.add(changed(sessionPath, "the source changed while it was compared with the store"))
			default:
				r := readers.AsRefused(err)
				if r == nil {
					return fmt.Errorf("verify: read source: %w", err)
				}
				srcLive, sv.sourceOK, sv.idsMatch = false, false, false
				sv.out.add(Finding{Code: SourceCode(string(r.Class)), Class: ClassCorrupt, Path: r.Path,
					Line: r.Line, Detail: r.Reason, Repair: RepairSource})
			}
		}
		if sv.withSource && sv.idsMatch {
			sv.compare(haveFrame, f, haveEntry, e, sessionPath)
		}
	}
	sv.checkParents(st)
	if sv.iterErr != nil && !sv.out.has(breaksIndex) {
		// Check saw nothing the iterator tripped on: say what it was.
		sv.out.add(iterFinding(sv.iterErr))
	}
	return nil
}

// allRowsRead reports whether the iterator, though it failed, read a
// frame for every index row: it checks coverage (bytes no row covers, a
// segment no row names) only after a segment's rows, so such damage leaves
// the frames, and the comparison with the source, complete.
func (sv *scan) allRowsRead(st *store.Store) bool {
	if !errors.Is(sv.iterErr, store.ErrUncovered) {
		return false
	}
	rows, err := st.ReadIndex()
	return err == nil && uint64(len(rows)) == sv.entries
}

// frame accounts one verified frame and checks its payload against the
// typed entry model, as the reference's validate_session_integrity does.
func (sv *scan) frame(f wire.Frame, row wire.IndexRow) {
	sv.entries++
	sv.bytes += row.ByteLength
	sv.chain = wire.ChainStep(sv.chain, f.PayloadSHA256)
	// The iterator yields a frame only once its row's id is a node: node
	// entries-1 is this frame's.
	_ = sv.links.SetParent(int(sv.entries-1), f.ParentEntryID) // ErrFull only, past 4 GiB of ids
	e, err := sv.dec.Decode(f.Payload)
	problem := ""
	switch {
	case err != nil:
		problem = "the payload does not parse as a session entry: " + err.Error()
	case !e.HasID || e.ID != f.EntryID:
		problem = fmt.Sprintf("the payload's id %q differs from the frame's entryId %q", e.ID, f.EntryID)
	case e.ParentID != f.ParentEntryID || e.HasParent != (f.ParentEntryID != ""):
		problem = fmt.Sprintf("the payload's parentId %q differs from the frame's parentEntryId %q", e.ParentID, f.ParentEntryID)
	case e.Type != string(f.EntryType):
		problem = fmt.Sprintf("the payload's type %q differs from the frame's entryType %q", e.Type, f.EntryType)
	}
	if problem != "" {
		sv.typedOK = false
		sv.out.add(Finding{Code: CodePayloadTyped, Class: ClassCorrupt, Segment: f.SegmentSeq,
			Offset: int64(row.ByteOffset), Detail: fmt.Sprintf("entry %d: %s", f.EntrySeq, problem), Repair: RepairRebuild})
		return
	}
	if f.EntryType == wire.EntrySessionInfo {
		sv.name = e.Name
	}
}

// compare checks the next frame and source entry against each other; the
// first difference is reported and ends the comparison.
func (sv *scan) compare(haveFrame bool, f wire.Frame, haveEntry bool, e readers.Entry, sessionPath string) {
	switch {
	case !haveFrame && !haveEntry:
		return
	case !haveEntry:
		sv.idsMatch = false
		sv.out.add(Finding{Code: CodeEntriesSource, Class: ClassStale, Path: sessionPath,
			Detail: fmt.Sprintf("the store has entry %d (%q) beyond the source's %d entries", f.EntrySeq, f.EntryID, sv.sourceEntries),
			Repair: RepairRefresh})
	case !haveFrame:
		sv.idsMatch = false
		if sv.iterErr != nil {
			return // the store stopped on damage: that is the finding
		}
		sv.out.add(Finding{Code: CodeEntriesSource, Class: ClassStale, Path: sessionPath, Line: e.Position,
			Detail: fmt.Sprintf("the source has entry %q beyond the store's %d entries", e.ID, sv.entries),
			Repair: RepairRefresh})
	case f.EntryID != e.ID:
		sv.idsMatch = false
		sv.out.add(Finding{Code: CodeEntriesSource, Class: ClassStale, Path: sessionPath, Line: e.Position,
			Detail: fmt.Sprintf("entry %d is %q in the store and %q in the source", f.EntrySeq, f.EntryID, e.ID),
			Repair: RepairRefresh})
	case !bytes.Equal(f.Payload, e.Payload):
		// The ids agree; the chains will not. Say where they part.
		if !sv.out.has(codeIs(CodePayloadSource)) {
			sv.out.add(Finding{Code: CodePayloadSource, Class: ClassStale, Path: sessionPath, Line: e.Position,
				Detail: fmt.Sprintf("entry %d (%q): the stored payload differs from the source's", f.EntrySeq, e.ID),
				Repair: RepairRefresh})
		}
	}
}

// checkParents checks that every parent named by a frame is in the store
// and that the links have no cycle (INV-001).
func (sv *scan) checkParents(st *store.Store) {
	if !sv.framesDone || sv.links == nil {
		return
	}
	path := ""
	if st != nil {
		path = store.IndexPath(st.Root())
	}
	if id, p, missing := sv.links.MissingParent(); missing {
		sv.out.add(Finding{Code: CodeParents, Class: ClassCorrupt, Path: path,
			Detail: fmt.Sprintf("entry %q names parent %q, which is not in the store", id, p), Repair: RepairRebuild})
		return
	}
	if id, ok := sv.links.Cycle(); ok {
		sv.out.add(Finding{Code: CodeParents, Class: ClassCorrupt, Path: path,
			Detail: fmt.Sprintf("the parent links form a cycle through entry %q", id), Repair: RepairRebuild})
	}
}

// iterFinding describes an error that stopped the store's iterator.
func iterFinding(err error) Finding {
	f := Finding{Code: CodeStoreOther, Class: ClassCorrupt, Detail: err.Error(), Repair: RepairRebuild}
	var ce *store.CorruptionError
	if errors.As(err, &ce) {
		f.Path, f.Segment, f.Offset, f.Line, f.Detail = ce.Path, ce.Segment, ce.Offset, ce.Line, ce.Err.Error()
	}
	switch {
	case errors.Is(err, store.ErrTornTail):
		f.Code, f.Repair = CodeSegmentTorn, RepairCutTail
	case errors.Is(err, store.ErrOutOfBounds):
		f.Code, f.Repair = CodeIndexOutOfBounds, RepairRebuildIndex
	case errors.Is(err, wire.ErrChecksum):
		f.Code = CodeIndexCRC
	case errors.Is(err, store.ErrUncovered):
		f.Code, f.Repair = CodeIndexUncovered, RepairRebuildIndex
	case errors.Is(err, store.ErrIndexStructure), errors.Is(err, store.ErrIndexMismatch):
		f.Code, f.Repair = CodeIndexInvalid, RepairRebuildIndex
	case errors.Is(err, store.ErrTooLarge):
		f.Code = CodeSegmentSize
	}
	return f
}

// breaksIndex reports whether a finding makes indexConsistent false: a
// problem of the store itself (what the reference's integrity check, its
// reads and its manifest validation reject), not of the source, the
// comparison, the owner, the ledger or source-state.json.
func breaksIndex(f Finding) bool {
	if f.Class != ClassCorrupt && f.Class != ClassPartial {
		return false
	}
	switch f.Code {
	case CodeOwner, CodeRollbackIntent, CodeSourceStateInvalid, CodeStaging, CodeSourceChanged:
		return false
	}
	return !strings.HasPrefix(f.Code, "source.")
}

// report assembles the flags and invariants.
func (sv *scan) report(storeDir string, opt Options) Report {
	if opt.SourcePath != "" && !opt.Staging && isStagingName(storeDir) {
		sv.out.add(Finding{Code: CodeStaging, Class: ClassCorrupt, Path: storeDir,
			Detail: "a staging store, not an installed sidecar: its cutover never happened", Repair: RepairStaging})
	}
	r := Report{
		Store:           storeDir,
		Session:         opt.SourcePath,
		Findings:        sv.out.list,
		Entries:         sv.entries,
		Bytes:           sv.bytes,
		SourceEntries:   sv.sourceEntries,
		ChainHash:       sv.chain,
		SourceChainHash: sv.sourceChain,
		Name:            sv.name,
	}
	consistent := sv.framesDone && sv.typedOK && !sv.out.has(breaksIndex)
	r.Verification = wire.Verification{
		EntryCountMatch: sv.withSource && sv.sourceOK && sv.framesDone && sv.idsMatch && sv.entries == sv.sourceEntries,
		HashChainMatch:  sv.withSource && sv.sourceOK && sv.framesDone && sv.chain == sv.sourceChain,
		IndexConsistent: consistent,
	}
	if rec := sv.staged; rec != nil {
		r.SourceEntries, r.SourceChainHash = rec.Entries, rec.ChainHash
		r.Verification.EntryCountMatch = sv.framesDone && sv.entries == rec.Entries && sv.stagedDigest == rec.EntryDigest
		r.Verification.HashChainMatch = sv.framesDone && sv.chain == rec.ChainHash
	}
	r.Invariants = sv.invariants()
	return r
}

// invariants judges INV-001..INV-007 from the findings.
func (sv *scan) invariants() map[string]Invariant {
	incomplete := func() *Finding {
		if sv.framesDone {
			return nil
		}
		if f := sv.out.first(breaksIndex); f != nil {
			return f
		}
		f := iterFinding(sv.iterErr)
		return &f
	}
	judge := func(need bool, codes ...string) Invariant {
		if f := sv.out.first(codeIs(codes...)); f != nil {
			return Invariant{Finding: f}
		}
		if need {
			if f := incomplete(); f != nil {
				return Invariant{Finding: f}
			}
		}
		return Invariant{Holds: true}
	}
	return map[string]Invariant{
		INV001: judge(true, CodeParents, CodePayloadTyped),
		INV002: judge(true, CodeIndexInvalid, CodeIndexTorn, CodeState, CodeIndexMissing),
		INV003: judge(false, CodeIndexOutOfBounds, CodeIndexCRC, CodeSegmentTorn, CodeSegmentInvalid,
			CodeSegmentSize, CodeIndexMissingSegment),
		INV004: judge(false, CodeCheckpoint),
		INV005: judge(true, CodeChainBreak, CodeIndexCRC),
		INV006: judge(false, CodeUnindexedSegment, CodeIndexLagging, CodeIndexUncovered, CodeSegmentTorn, CodeIndexMissing),
		INV007: judge(false, CodeManifestMissing, CodeManifestInvalid, CodeManifestMismatch, CodeManifestInvariant,
			CodeRollbackIntent, CodeStaging, CodeMissing),
	}
}

// isStagingName reports whether dir is named <stem>.v2.staging.<id>.
func isStagingName(dir string) bool {
	return strings.Contains(filepath.Base(filepath.Clean(dir)), ".v2.staging.")
}
