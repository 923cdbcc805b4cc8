package verify

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"pisess/readers"
	"pisess/readers/discover"
	"pisess/readers/normalize"
	"pisess/writers/durable"
	"pisess/writers/store"
	"pisess/writers/wire"
)

// StatusReport is a session's status: the reference's class and pisess's
// findings beneath it.
type StatusReport struct {
	Session string
	Sidecar string // the <stem>.v2 path, whether or not it exists
	Class   Class
	// Findings are every problem found; the first that decides Class is
	// among them. Empty for migrated and unmigrated sessions.
	Findings     []Finding
	SourceFormat readers.SourceFormat
	Version      int    // the header's version; 0 when it could not be read
	HeaderID     string // the header's id; "" when it could not be read
	SourceBytes  int64  // the session file's size
	// Entries and Bytes are the sidecar's (the manifest's counters).
	Entries, Bytes uint64
	// Name is the session's name from its last session_info entry, when
	// known (Status reads it from the frames; StatusFast does not).
	Name *string
	// Freshness is the source-state verdict, when it was reached.
	Freshness *FreshnessResult
	// Verification is set when a full verification against the source was
	// made (no fingerprint to decide freshness with).
	Verification *wire.Verification
}

// preflightCodes are the findings the reference's status meets before it
// looks for a partial store: anything in the tree it cannot open.
var preflightCodes = map[string]bool{
	CodeSymlinkAncestor: true, CodeSymlink: true, CodeSpecialFile: true,
	CodeNotDirectory: true, CodeUnreadable: true, CodeOwner: true, CodeWrongType: true,
}

// classify applies the reference's order (FORMAT.md §9): a tree pi cannot
// open is corrupt; then a missing segments/ (or index with source entries)
// is partial; then any failed check is corrupt; then not fresh is stale.
func classify(list []Finding) Class {
	has := func(pred func(Finding) bool) bool {
		for _, f := range list {
			if pred(f) {
				return true
			}
		}
		return false
	}
	switch {
	case has(func(f Finding) bool { return preflightCodes[f.Code] && f.Class == ClassCorrupt }):
		return ClassCorrupt
	case has(func(f Finding) bool { return f.Class == ClassPartial }):
		return ClassPartial
	case has(func(f Finding) bool { return f.Class == ClassCorrupt }):
		return ClassCorrupt
	case has(func(f Finding) bool { return f.Class == ClassStale }):
		return ClassStale
	}
	return ClassMigrated
}

// begin fills what every status knows: the paths, the format by
// extension, the file's size; done reports an unmigrated session (no
// <stem>.v2 at all).
func begin(sessionPath string) (rep StatusReport, done bool, err error) {
	path, err := filepath.Abs(sessionPath)
	if err != nil {
		return rep, true, fmt.Errorf("status: %w", err)
	}
	rep.Session, rep.Sidecar = path, discover.SidecarPath(path)
	rep.SourceFormat = expectedFormat("", path)
	fi, err := os.Lstat(path)
	if err != nil {
		return rep, true, fmt.Errorf("status: %w", err)
	}
	rep.SourceBytes = fi.Size()
	if _, err := os.Lstat(rep.Sidecar); errors.Is(err, fs.ErrNotExist) {
		rep.Class = ClassUnmigrated
		return rep, true, nil
	} else if err != nil {
		return rep, true, fmt.Errorf("status: %w", err)
	}
	return rep, false, nil
}

// header reads the session's header as the reference's status does (it
// must validate, with version 3 for JSONL) and adds a finding when it
// cannot; the id is "" then.
func header(out *findings, rep *StatusReport) string {
	h, err := discover.ReadHeader(rep.Session)
	if err != nil {
		f := Finding{Code: SourceCode(string(readers.ClassIO)), Class: ClassCorrupt, Path: rep.Session,
			Detail: err.Error(), Repair: RepairSource}
		if r := readers.AsRefused(err); r != nil {
			f.Code, f.Line, f.Detail = SourceCode(string(r.Class)), r.Line, r.Reason
		}
		out.add(f)
		return ""
	}
	return noteHeader(out, rep, h)
}

// noteHeader puts the session's header h into rep, with a finding when
// pi does not read the sidecar of its version, and returns its id.
func noteHeader(out *findings, rep *StatusReport, h readers.Header) string {
	rep.Version, rep.HeaderID = h.Version, h.ID
	if h.Format == readers.FormatJSONLv3 && h.Version != 3 {
		out.add(Finding{Code: SourceCode(string(readers.ClassUnsupportedVer)), Class: ClassCorrupt, Path: rep.Session, Line: 1,
			Detail: fmt.Sprintf("header version %d: pi reads sidecars of version-3 sessions only", h.Version), Repair: RepairSource})
	}
	return h.ID
}

// ownerOptions returns the acceptance options of a session: its owner.
func ownerOptions(sessionPath, headerID string) AcceptOptions {
	opt := AcceptOptions{HeaderID: headerID, OwnerUID: -1, OwnerGID: -1}
	if uid, gid, err := durable.OS.Owner(sessionPath); err == nil {
		opt.OwnerUID, opt.OwnerGID = uid, gid
	}
	return opt
}

// Status classifies a session by the reference's rules (FORMAT.md §9),
// with every finding of Acceptance and of the store's full integrity check
// (every frame is read and parsed). It never writes and never locks:
//
//   - unmigrated: nothing named <stem>.v2;
//   - corrupt: a symlink or special file in the store or on the way to it,
//     a file the session's owner could not open;
//   - partial: no segments/, or no index/offsets.jsonl while the source
//     has an entry line;
//   - corrupt: any other failed check: a non-private mode, the source
//     header, the index, frames, payloads, the manifest, the session id or
//     format, an invalid source-state.json;
//   - stale: passes every check but is not fresh (§8); without a
//     fingerprint the sidecar is verified against the whole source, as pi
//     would, and stale when any flag is false;
//   - migrated: the rest.
func Status(sessionPath string) (StatusReport, error) {
	rep, done, err := begin(sessionPath)
	if done {
		return rep, err
	}
	out := findings{session: rep.Session}
	id := header(&out, &rep)
	st := storeChecks(&out, rep.Sidecar, rep.Session, ownerOptions(rep.Session, id))
	partialIndex(&out, rep.Sidecar, rep.Session)
	fr, ok := freshness(&out, rep.Session, rep.Sidecar)
	if ok {
		rep.Freshness = &fr
		freshnessFinding(&out, fr, rep.Sidecar)
	}

	sv := &scan{out: out}
	var src readers.Source
	if ok && fr.NeedsFullVerify && id != "" {
		src, err = discover.OpenSource(rep.Session)
		r := readers.AsRefused(err)
		switch {
		case err == nil:
			defer src.Close()
		case errors.Is(err, readers.ErrSourceChanged):
			sv.out.add(changed(rep.Session, "the source changed while it was read"))
		case r == nil:
			return rep, fmt.Errorf("status: %w", err)
		default:
			sv.out.add(Finding{Code: SourceCode(string(r.Class)), Class: ClassCorrupt, Path: r.Path, Line: r.Line,
				Detail: r.Reason, Repair: RepairSource})
		}
		if err != nil {
			src = nil
		}
	}
	if err := sv.run(context.Background(), st, src, rep.Session); err != nil {
		return rep, err
	}
	r := sv.report(rep.Sidecar, Options{SourcePath: rep.Session})
	if src != nil {
		rep.Verification = &r.Verification
		if !r.Verification.EntryCountMatch || !r.Verification.HashChainMatch {
			sv.out.add(Finding{Code: CodeSourceStale, Class: ClassStale, Path: rep.Session,
				Detail: "no fingerprint, and the sidecar does not verify against the source", Repair: RepairRefresh})
		}
	}
	rep.Findings, rep.Name = sv.out.list, r.Name
	rep.Class = classify(rep.Findings)
	fillCounts(&rep, st)
	return rep, nil
}

// freshness is Freshness for a status: a source that cannot be opened or
// read (a symlink, a special file, no permission) is a finding, as the
// reference's status reports it corrupt, not an error.
func freshness(out *findings, sessionPath, sidecar string) (FreshnessResult, bool) {
	fr, err := Freshness(sessionPath, sidecar)
	if err != nil {
		out.add(Finding{Code: SourceCode(string(readers.ClassIO)), Class: ClassCorrupt, Path: sessionPath,
			Detail: err.Error(), Repair: RepairSource})
		return fr, false
	}
	return fr, true
}

// freshnessFinding turns a freshness verdict into a finding, unless the
// sidecar is fresh or needs a full verification to tell.
func freshnessFinding(out *findings, fr FreshnessResult, sidecar string) {
	path := store.SourceStatePath(sidecar)
	switch {
	case fr.Invalid:
		if !out.has(codeIs(CodeSourceStateInvalid)) {
			out.add(Finding{Code: CodeSourceStateInvalid, Class: ClassCorrupt, Path: path, Detail: fr.Reason, Repair: RepairRefresh})
		}
	case !fr.Fresh && !fr.NeedsFullVerify:
		out.add(Finding{Code: CodeSourceStale, Class: ClassStale, Path: path, Detail: fr.Reason, Repair: RepairRefresh})
	}
}

// partialIndex adds the partial finding for a sidecar with segments/ but
// no index/offsets.jsonl while the source has an entry line.
func partialIndex(out *findings, sidecar, sessionPath string) {
	if _, err := os.Lstat(store.SegmentsPath(sidecar)); err != nil {
		return
	}
	if _, err := os.Lstat(store.IndexPath(sidecar)); !errors.Is(err, fs.ErrNotExist) {
		return
	}
	// An unreadable source has its own finding (the header's).
	if has, err := sourceHasEntries(sessionPath); err == nil && has {
		out.add(Finding{Code: CodeIndexMissing, Class: ClassPartial, Path: store.IndexPath(sidecar),
			Detail: "no index while the source has entries: a sidecar left half-written", Repair: RepairRebuild})
	}
}

// sourceHasEntries reports whether the session has an entry: for JSONL,
// a line after the header that Rust's trim() does not empty (the
// reference's jsonl_has_entry_lines); for SQLite, a first entry.
func sourceHasEntries(path string) (bool, error) {
	if filepath.Ext(path) == discover.ExtSQLite {
		src, err := discover.OpenSource(path)
		if err != nil {
			return false, err
		}
		defer src.Close()
		_, err = src.Next()
		if errors.Is(err, io.EOF) {
			return false, nil
		}
		return err == nil, err
	}
	f, err := openSource(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 64<<10)
	for header := true; ; {
		// A line longer than the buffer comes in chunks; any chunk that is
		// not blank makes its line an entry line.
		chunk, err := r.ReadSlice('\n')
		if !header && !isBlank(chunk) {
			return true, nil
		}
		switch {
		case err == nil:
			header = false
		case errors.Is(err, bufio.ErrBufferFull):
		case errors.Is(err, io.EOF):
			return false, nil
		default:
			return false, err
		}
	}
}

// isBlank reports whether Rust's trim() empties b.
func isBlank(b []byte) bool { return len(normalize.RustTrim(b)) == 0 }

// fillCounts copies the manifest's counters, when it can be read.
func fillCounts(rep *StatusReport, st *store.Store) {
	if st == nil {
		return
	}
	if m, err := st.Manifest(); err == nil {
		rep.Entries, rep.Bytes = m.Counters.EntriesTotal, m.Counters.BytesTotal
	}
}

// StatusFast is Status for `pisess status`: it reads only the manifest,
// the index's size, source-state.json and the source's fingerprint
// (hashing the source only when the fast identity check cannot decide),
// never a frame body, so it stays fast on huge stores. It applies the
// reference's order to what it reads: the sidecar and its directories
// (type, symlink, mode), segments/ and the index's presence, the manifest
// (valid, invariants true, sessionId and sourceFormat), the header, and
// freshness. Damage inside frames or the index is not seen: Status (or
// fsck) finds it. A sidecar with no fingerprint to judge freshness by is
// handed to Status, which verifies it against the source as pi would.
func StatusFast(sessionPath string) (StatusReport, error) {
	rep, done, err := begin(sessionPath)
	if done {
		return rep, err
	}
	out := findings{session: rep.Session}
	id := header(&out, &rep)
	root := rep.Sidecar
	if link, ok, err := durable.OS.HasSymlinkAncestor(root); err == nil && ok {
		out.add(Finding{Code: CodeSymlinkAncestor, Class: ClassCorrupt, Path: link,
			Detail: "a symlinked directory on the way to the sidecar", Repair: RepairSymlinkAncestor(link)})
	}
	if fi, err := os.Lstat(root); err == nil {
		// Metadata only (lstat of every entry): the reference's status
		// walks the whole tree the same way before anything else.
		walkStore(&out, root, root, fi, ownerOptions(rep.Session, ""))
	}
	fastMissing(&out, root)
	partialIndex(&out, root, rep.Session)
	if _, err := os.Lstat(RollbackIntentPath(root)); err == nil {
		out.add(Finding{Code: CodeRollbackIntent, Class: ClassCorrupt, Path: RollbackIntentPath(root),
			Detail: "a rollback to a checkpoint was interrupted", Repair: RepairIntent})
	}
	if classify(out.list) == ClassMigrated {
		if st, err := store.Open(root, store.ReadOptions{OnceManifest: true}); err == nil {
			fastManifest(&out, st, root, rep.Session, id)
			fillCounts(&rep, st)
		}
	}
	if c := classify(out.list); c == ClassMigrated {
		if fr, ok := freshness(&out, rep.Session, root); ok {
			if fr.NeedsFullVerify {
				return Status(sessionPath)
			}
			rep.Freshness = &fr
			freshnessFinding(&out, fr, root)
		}
	}
	rep.Findings = out.list
	rep.Class = classify(rep.Findings)
	return rep, nil
}

// fastMissing reports a missing segments/ (partial), index/ or manifest
// (corrupt), as Status would.
func fastMissing(out *findings, root string) {
	for _, m := range []struct {
		path, code string
		class      Class
		repair     string
	}{
		{store.SegmentsPath(root), CodeMissing, ClassPartial, RepairRebuild},
		{filepath.Join(root, store.IndexDir), CodeMissing, ClassCorrupt, RepairRebuild},
		{store.ManifestPath(root), CodeManifestMissing, ClassCorrupt, RepairManifest},
	} {
		if _, err := os.Lstat(m.path); errors.Is(err, fs.ErrNotExist) {
			out.add(Finding{Code: m.code, Class: m.class, Path: m.path, Detail: "missing", Repair: m.repair})
		}
	}
}

// fastManifest checks the manifest document, its invariants and identity,
// and that the index file exists when the manifest counts entries.
func fastManifest(out *findings, st *store.Store, root, sessionPath, headerID string) {
	m, err := st.Manifest()
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			out.add(Finding{Code: CodeManifestInvalid, Class: ClassCorrupt, Path: store.ManifestPath(root), Detail: err.Error(), Repair: RepairManifest})
		}
		return
	}
	for _, name := range m.Invariants.False() {
		out.add(Finding{Code: CodeManifestInvariant, Class: ClassCorrupt, Path: store.ManifestPath(root),
			Detail: "invariants." + name + " is false", Repair: RepairManifest})
	}
	if fi, err := os.Lstat(store.IndexPath(root)); m.Counters.EntriesTotal > 0 && (err != nil || fi.Size() == 0) {
		out.add(Finding{Code: CodeIndexMissing, Class: ClassCorrupt, Path: store.IndexPath(root),
			Detail: fmt.Sprintf("the manifest counts %d entries and the index is empty or missing", m.Counters.EntriesTotal), Repair: RepairRebuildIndex})
	}
	checkIdentity(out, st, root, sessionPath, AcceptOptions{HeaderID: headerID})
	segmentBytes(out, root, m.Counters.BytesTotal)
}

// segmentBytes adds a corrupt finding when the segments' sizes add up to
// fewer bytes than the frames the manifest counts: a segment cut back into
// earlier frames (issue 32 §3: status said migrated, migrate skipped it).
// Bytes beyond the counted frames are left to Status: an append cut short
// leaves them (pi's, or a refresh in place that failed and marked the
// sidecar dirty, which migrate refreshes). Sizes only, from lstat:
// StatusFast reads no frame. (The finer check, each segment against the
// index's rows, is Status's, through store.Check.)
func segmentBytes(out *findings, root string, want uint64) {
	dir := store.SegmentsPath(root)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return // missing or unreadable: the walk said so
	}
	var got uint64
	for _, e := range entries {
		if !e.Type().IsRegular() || filepath.Ext(e.Name()) != ".seg" {
			continue
		}
		fi, err := e.Info()
		if err != nil {
			return
		}
		got += uint64(fi.Size())
	}
	if got < want {
		out.add(Finding{Code: CodeSegmentBytes, Class: ClassCorrupt, Path: dir,
			Detail: fmt.Sprintf("the segments hold %d bytes, fewer than the %d bytes of frames the manifest counts", got, want), Repair: RepairRebuild})
	}
}

// LazyHydrationThreshold is the number of entries up to which pi's open of
// a store reads every frame (the reference's
// DEFAULT_V2_LAZY_HYDRATION_THRESHOLD); above it pi reads the index and the
// active path only.
const LazyHydrationThreshold = 10_000

// StatusOpen is the status of a sidecar nothing vouches for (issue 34 §2:
// a truncated or extended segment, or a byte flipped in a frame, passed
// StatusFast, and so the cron run and `status`): at least as deep as pi's
// own open of it (FORMAT.md §11). It is StatusFast, then, for a sidecar
// that passes it as migrated (one pi would use):
//
//   - up to LazyHydrationThreshold entries, Status: every frame read,
//     checked and parsed, as pi's open reads them all;
//   - above it, store.CheckOpen: every index row against its segment and
//     the sequence rules, each segment's bytes exactly covered, the
//     manifest against the index, and the last frame of every segment.
//
// A verdict of StatusOpen (or Status) is one the fresh cache may keep. A
// stale sidecar is not read further: pi does not open it, and a refresh
// checks what it continues of it frame by frame (pi's everyday save marks
// it so, and this would read it at every refresh).
func StatusOpen(sessionPath string) (StatusReport, error) {
	rep, err := StatusFast(sessionPath)
	if err != nil || rep.Verification != nil || rep.Class != ClassMigrated {
		return rep, err // decided, or already Status's (a full verification)
	}
	if rep.Entries <= LazyHydrationThreshold {
		return Status(sessionPath)
	}
	out := findings{session: rep.Session, list: rep.Findings}
	st, err := store.Open(rep.Sidecar, store.ReadOptions{})
	if err != nil {
		out.add(Finding{Code: CodeUnreadable, Class: ClassCorrupt, Path: rep.Sidecar, Detail: err.Error()})
	} else {
		for _, p := range st.CheckOpen() {
			if f, ok := fromProblem(rep.Sidecar, wire.MaxSegmentBytes, p); ok {
				out.add(f)
			}
		}
	}
	rep.Findings = out.list
	rep.Class = classify(rep.Findings)
	return rep, nil
}
