package verify

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"pisess/readers"
	"pisess/writers/durable"
	"pisess/writers/store"
	"pisess/writers/wire"
)

// AcceptOptions say what the sidecar must match.
type AcceptOptions struct {
	// HeaderID is the session header's id; the manifest's sessionId must
	// equal it exactly ("" skips the check).
	HeaderID string
	// SourceFormat is the sourceFormat the manifest must name: jsonl_v3
	// for a JSONL session, sqlite_v1 for SQLite; "" takes it from the
	// session file's extension.
	SourceFormat readers.SourceFormat
	// OwnerUID and OwnerGID are who must own every directory and file of
	// the store (the session file's owner); -1 skips the check. Note that
	// 0 means root: set -1 explicitly to skip.
	OwnerUID, OwnerGID int
	// MaxSegmentBytes is the segment limit (0: 64 MiB, what pi reads with).
	MaxSegmentBytes int64
	// AncestorsWalked says that the caller's walk of this run came to the
	// store through real directories only (readers/discover: the tree's
	// ancestors looked at, no symlinked directory entered): VerifiedAppend
	// does not look at them again.
	AncestorsWalked bool
}

// RollbackIntentPath returns <store>/tmp/rollback.intent.json.
func RollbackIntentPath(storeDir string) string {
	return filepath.Join(store.TmpPath(storeDir), "rollback.intent.json")
}

// Acceptance checks every rule of FORMAT.md §11 (and §1's) that pisess can
// check before pi would use the sidecar at storeDir for sessionPath, and
// returns what breaks them (none: pi would accept it, freshness aside):
//
//   - no symlink in any component of the store's path, none inside it, no
//     special file; the root, segments/ and index/ are real directories
//     (checkpoints/, migrations/ and tmp/ too, when present), the
//     manifest, the index and every *.seg regular files;
//   - no group or other permission bit anywhere (directories 0700, files
//     0600, the owner's bits present), everything owned by the session's
//     owner;
//   - the index: LF-terminated lines, known members, state "active", ids
//     matching the pattern, entrySeq contiguous from 1, per segment
//     frameSeq from 1 and byte offsets from 0, segments and frames within
//     64 MiB, every segment byte covered, no unindexed or misnamed *.seg
//     (*.seg.bak ignored); every frame passes its checks;
//   - the manifest: present and valid, its resume facts equal to the
//     index, every invariant true, sessionId equal to the header's id
//     exactly, sourceFormat as expected;
//   - no pending tmp/rollback.intent.json.
func Acceptance(storeDir, sessionPath string, opt AcceptOptions) []Finding {
	out := findings{session: sessionPath}
	storeChecks(&out, storeDir, sessionPath, opt)
	return out.list
}

// storeChecks adds the findings of Acceptance to out and returns the opened
// store (nil when it cannot be opened: the findings say why).
func storeChecks(out *findings, storeDir, sessionPath string, opt AcceptOptions) *store.Store {
	return storeChecksSummary(out, storeDir, sessionPath, opt, nil)
}

// storeChecksSummary is storeChecks that also fills sum, when not nil, with
// what store.CheckSummary recomputed from the frames.
func storeChecksSummary(out *findings, storeDir, sessionPath string, opt AcceptOptions, sum *store.Summary) *store.Store {
	root, err := filepath.Abs(storeDir)
	if err != nil {
		out.add(Finding{Code: CodeUnreadable, Class: ClassCorrupt, Path: storeDir, Detail: err.Error()})
		return nil
	}
	if link, ok, err := durable.OS.HasSymlinkAncestor(root); err != nil {
		out.add(Finding{Code: CodeUnreadable, Class: ClassCorrupt, Path: root, Detail: err.Error()})
		return nil
	} else if ok {
		out.add(Finding{Code: CodeSymlinkAncestor, Class: ClassCorrupt, Path: link,
			Detail: "a symlinked directory on the way to the sidecar: pi opens sidecars with no symlink in any path component",
			Repair: RepairSymlinkAncestor(link)})
		return nil
	}
	fi, err := os.Lstat(root)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		out.add(Finding{Code: CodeMissing, Class: ClassCorrupt, Path: root, Detail: "the sidecar does not exist", Repair: RepairRebuild})
		return nil
	case err != nil:
		out.add(Finding{Code: CodeUnreadable, Class: ClassCorrupt, Path: root, Detail: err.Error()})
		return nil
	case fi.Mode()&os.ModeSymlink != 0:
		out.add(Finding{Code: CodeSymlink, Class: ClassCorrupt, Path: root, Detail: "the sidecar is a symlink: pi refuses it", Repair: RepairRebuild})
		return nil
	case !fi.IsDir():
		out.add(Finding{Code: CodeNotDirectory, Class: ClassCorrupt, Path: root,
			Detail: fmt.Sprintf("the sidecar is not a directory (%v)", fi.Mode().Type()), Repair: RepairRebuild})
		return nil
	}
	walkStore(out, root, root, fi, opt)
	if _, err := os.Lstat(RollbackIntentPath(root)); err == nil {
		out.add(Finding{Code: CodeRollbackIntent, Class: ClassCorrupt, Path: RollbackIntentPath(root),
			Detail: "a rollback to a checkpoint was interrupted: the store is between two states", Repair: RepairIntent})
	}
	st, err := store.Open(root, store.ReadOptions{MaxSegmentBytes: opt.MaxSegmentBytes})
	if err != nil {
		out.add(Finding{Code: CodeUnreadable, Class: ClassCorrupt, Path: root, Detail: err.Error()})
		return nil
	}
	max := opt.MaxSegmentBytes
	if max <= 0 {
		max = wire.MaxSegmentBytes
	}
	var problems []store.Problem
	if sum != nil {
		problems, *sum = st.CheckSummary()
	} else {
		problems = st.Check()
	}
	for _, p := range problems {
		if f, ok := fromProblem(root, max, p); ok {
			out.add(f)
		}
	}
	checkIdentity(out, st, root, sessionPath, opt)
	return st
}

// checkIdentity compares the manifest's sessionId and sourceFormat with the
// session's (the manifest's own validity is Check's).
func checkIdentity(out *findings, st *store.Store, root, sessionPath string, opt AcceptOptions) {
	m, err := st.Manifest()
	if err != nil {
		return
	}
	path := store.ManifestPath(root)
	if opt.HeaderID != "" && m.SessionID != opt.HeaderID {
		detail := fmt.Sprintf("sessionId %q, the session header's id is %q", m.SessionID, opt.HeaderID)
		if strings.EqualFold(m.SessionID, opt.HeaderID) {
			detail += " (they differ in case: pi compares them as exact strings)"
		}
		out.add(Finding{Code: CodeSessionID, Class: ClassCorrupt, Path: path, Detail: detail, Repair: RepairRebuild})
	}
	want := expectedFormat(opt.SourceFormat, sessionPath)
	if string(m.SourceFormat) != string(want) {
		out.add(Finding{Code: CodeSourceFormat, Class: ClassCorrupt, Path: path,
			Detail: fmt.Sprintf("sourceFormat %q, expected %q", m.SourceFormat, want), Repair: RepairRebuild})
	}
}

// expectedFormat is the manifest sourceFormat a session of this path must
// have: jsonl_v3 for .jsonl (the only one pi resumes), sqlite_v1 for
// .sqlite (pisess's forward path).
func expectedFormat(given readers.SourceFormat, sessionPath string) readers.SourceFormat {
	if given != "" {
		return given
	}
	if filepath.Ext(sessionPath) == ".sqlite" {
		return readers.FormatSQLitev1
	}
	return readers.FormatJSONLv3
}

// walkStore checks every entry under the store, path included: type,
// mode and owner. It lstats everything and follows no symlink.
func walkStore(out *findings, root, path string, fi os.FileInfo, opt AcceptOptions) {
	walkStoreSeeing(out, root, path, fi, opt, nil)
}

// walkStoreSeeing is walkStore that also calls seen with the path of every
// entry it meets.
func walkStoreSeeing(out *findings, root, path string, fi os.FileInfo, opt AcceptOptions, seen func(path string)) {
	if seen != nil {
		seen(path)
	}
	if dir := checkEntry(out, fi, path, opt); !checkType(out, root, path, fi) || !dir {
		return
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		out.add(Finding{Code: CodeUnreadable, Class: ClassCorrupt, Path: path, Detail: err.Error()})
		return
	}
	for _, e := range entries {
		child := filepath.Join(path, e.Name())
		cfi, err := e.Info()
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			out.add(Finding{Code: CodeUnreadable, Class: ClassCorrupt, Path: child, Detail: err.Error()})
			continue
		}
		walkStoreSeeing(out, root, child, cfi, opt, seen)
	}
}

// checkEntry checks one entry of the store (fi from lstat): no symlink, no
// special file, a private mode with the owner's bits, the session's owner.
// It reports whether the entry is a directory to descend into.
func checkEntry(out *findings, fi os.FileInfo, path string, opt AcceptOptions) bool {
	mode := fi.Mode()
	switch {
	case mode&os.ModeSymlink != 0:
		out.add(Finding{Code: CodeSymlink, Class: ClassCorrupt, Path: path,
			Detail: "a symlink in the store: pi refuses it", Repair: RepairRebuild})
		return false
	case !mode.IsDir() && !mode.IsRegular():
		out.add(Finding{Code: CodeSpecialFile, Class: ClassCorrupt, Path: path,
			Detail: fmt.Sprintf("a special file in the store (%v): pi refuses it", mode.Type()), Repair: RepairRebuild})
		return false
	}
	want := os.FileMode(0o600)
	if mode.IsDir() {
		want = 0o700
	}
	if perm := mode.Perm(); perm&0o077 != 0 || perm&want != want {
		detail := fmt.Sprintf("mode %04o lacks the owner's bits: pi needs %04o to read and write it", perm, want)
		if perm&0o077 != 0 {
			detail = fmt.Sprintf("mode %04o has group or other bits: pi refuses the store (it requires %04o)", perm, want)
		}
		out.add(Finding{Code: CodeMode, Class: ClassCorrupt, Path: path, Detail: detail, Repair: RepairChmod})
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		if (opt.OwnerUID >= 0 && int(st.Uid) != opt.OwnerUID) || (opt.OwnerGID >= 0 && int(st.Gid) != opt.OwnerGID) {
			out.add(Finding{Code: CodeOwner, Class: ClassCorrupt, Path: path,
				Detail: fmt.Sprintf("owned by %d:%d, the session's owner is %d:%d: pi's open would fail with permission denied",
					st.Uid, st.Gid, opt.OwnerUID, opt.OwnerGID), Repair: RepairChown})
		}
	}
	return mode.IsDir()
}

// storeType is what a named entry of a store must be, and what it is
// worth when it is not: the class it gives the store ("" for a problem
// pi's open does not meet) and why.
type storeType struct {
	dir   bool
	class Class
	why   string
}

// expectedType returns the type the store entry at path must have; ok is
// false for an entry the format does not name. pi's preflight requires the
// manifest, the index and every segment to be regular files and segments/
// and index/ directories, and the reference's open for inspection requires
// checkpoints/, migrations/ and tmp/ to be directories (FORMAT.md §1, §11):
// those make the store corrupt. pi's status does not look at the mutation
// lock or the ledger, but every change it makes to the store takes the one
// and appends to the other: those are problems of the class migrated.
func expectedType(root, path string) (storeType, bool) {
	r := rel(root, path)
	switch {
	case r == store.ManifestName, r == store.IndexDir+"/"+store.IndexName, r == store.SourceStateName:
		return storeType{class: ClassCorrupt, why: "pi refuses the store"}, true
	case strings.HasPrefix(r, store.SegmentsDir+"/") && strings.HasSuffix(r, ".seg") && !strings.Contains(r[len(store.SegmentsDir)+1:], "/"):
		return storeType{class: ClassCorrupt, why: "pi refuses the store"}, true
	case r == store.MutationLockName:
		return storeType{why: "every change pi makes to the store takes this lock, and would fail"}, true
	case r == store.MigrationsDir+"/"+store.LedgerName:
		return storeType{why: "the store's migration ledger is lost, and every append to it would fail"}, true
	}
	for _, d := range store.StoreDirs {
		if r == d {
			return storeType{dir: true, class: ClassCorrupt, why: "pi refuses the store"}, true
		}
	}
	return storeType{}, false
}

// checkType checks that a named entry of the store that is a directory or
// a regular file (checkEntry reports the rest) has its type, and that the
// store's ledger is not empty: the migration that built the store wrote its
// events there (issue 32 §3: verify and fsck saw none of these). It
// reports false when the entry has the wrong type (not to be walked into).
func checkType(out *findings, root, path string, fi os.FileInfo) bool {
	want, ok := expectedType(root, path)
	if !ok || !fi.IsDir() && !fi.Mode().IsRegular() {
		return true
	}
	if want.dir != fi.IsDir() {
		is, should := "a directory", "a regular file"
		if want.dir {
			is, should = "a regular file", "a directory"
		}
		out.add(Finding{Code: CodeWrongType, Class: want.class, Path: path,
			Detail: fmt.Sprintf("%s is %s, not %s: %s", rel(root, path), is, should, want.why), Repair: RepairRebuild})
		return false
	}
	if rel(root, path) == store.MigrationsDir+"/"+store.LedgerName && fi.Size() == 0 {
		out.add(Finding{Code: CodeLedgerEmpty, Path: path,
			Detail: "the store's migration ledger is empty: the events of the migration that built the store are gone", Repair: RepairRebuild})
	}
	return true
}

// fromProblem maps a store.Check problem to a finding; ok is false for the
// problems walkStore reports itself (modes, symlinks).
func fromProblem(root string, max int64, p store.Problem) (Finding, bool) {
	f := Finding{Class: ClassCorrupt, Path: p.Path, Segment: p.Segment, Offset: p.Offset, Line: p.Line, Detail: p.Detail}
	kind := pathKind(root, p.Path)
	switch p.Class {
	case store.ClassBadMode, store.ClassSymlink:
		return f, false
	case store.ClassMissingFile:
		switch kind {
		case kindManifest:
			f.Code, f.Repair = CodeManifestMissing, RepairManifest
		case kindIndex:
			f.Code, f.Repair = CodeIndexMissing, RepairRebuildIndex
		case kindSegment:
			f.Code, f.Repair = CodeIndexMissingSegment, RepairRebuild
		case kindSegmentsDir:
			f.Code, f.Class, f.Repair = CodeMissing, ClassPartial, RepairRebuild
		default:
			f.Code, f.Repair = CodeMissing, RepairRebuild
		}
	case store.ClassTornTail:
		switch kind {
		case kindLedger:
			f.Code, f.Class, f.Repair = CodeLedgerTorn, "", RepairLedger
		case kindIndex:
			f.Code, f.Repair = CodeIndexTorn, RepairCutTail
		default:
			f.Code, f.Repair = CodeSegmentTorn, RepairCutTail
		}
	case store.ClassCRCMismatch:
		f.Code, f.Repair = CodeIndexCRC, RepairRebuild
	case store.ClassIndexOutOfBounds:
		f.Code, f.Repair = CodeIndexOutOfBounds, RepairRebuildIndex
	case store.ClassIndexLagging:
		f.Code, f.Repair = CodeIndexLagging, RepairRebuildIndex
	case store.ClassChainBreak:
		if kind == kindCheckpoint {
			f.Code, f.Repair = CodeCheckpoint, RepairRebuild
		} else {
			f.Code, f.Repair = CodeChainBreak, RepairRebuild
		}
	case store.ClassManifestMismatch:
		f.Code, f.Repair = CodeManifestMismatch, RepairManifest
	case store.ClassInvariantFalse:
		f.Code, f.Repair = CodeManifestInvariant, RepairManifest
	case store.ClassUnindexedSegment:
		f.Code, f.Repair = CodeUnindexedSegment, RepairRebuildIndex
	case store.ClassBadDocument:
		switch kind {
		case kindIndex:
			f.Code, f.Repair = CodeIndexInvalid, RepairRebuildIndex
			if p.Line > 0 && indexLineBadState(p.Path, p.Line) {
				f.Code = CodeState
			}
		case kindSegment:
			// A frame's problem names its index line; a problem of the
			// segment as a whole (its size, bytes after the last frame)
			// names none.
			f.Code, f.Repair = CodeSegmentInvalid, RepairRebuild
			if p.Line == 0 {
				f.Code = CodeIndexUncovered
				if fi, err := os.Lstat(p.Path); err == nil && fi.Size() > max {
					f.Code = CodeSegmentSize
				}
			}
		case kindCheckpoint:
			f.Code, f.Repair = CodeCheckpoint, RepairRebuild
		case kindLedger:
			f.Code, f.Class, f.Repair = CodeLedger, "", RepairLedger
		case kindSourceState:
			f.Code, f.Repair = CodeSourceStateInvalid, RepairRefresh
		case kindManifest:
			f.Code, f.Repair = CodeManifestInvalid, RepairManifest
		default:
			f.Code, f.Repair = CodeStoreOther, RepairRebuild
		}
	default:
		f.Code, f.Repair = CodeStoreOther, RepairRebuild
	}
	return f, true
}

type kind int

const (
	kindOther kind = iota
	kindManifest
	kindIndex
	kindSegment
	kindSegmentsDir
	kindCheckpoint
	kindLedger
	kindSourceState
)

func pathKind(root, path string) kind {
	r := rel(root, path)
	switch {
	case r == store.ManifestName:
		return kindManifest
	case r == store.IndexDir+"/"+store.IndexName:
		return kindIndex
	case r == store.SegmentsDir:
		return kindSegmentsDir
	case strings.HasPrefix(r, store.SegmentsDir+"/"):
		return kindSegment
	case strings.HasPrefix(r, store.CheckpointsDir+"/"):
		return kindCheckpoint
	case r == store.MigrationsDir+"/"+store.LedgerName:
		return kindLedger
	case r == store.SourceStateName:
		return kindSourceState
	}
	return kindOther
}

// indexLineBadState reports whether line lineNo of the index is refused
// for its state member (the reference accepts only "active").
func indexLineBadState(path string, lineNo int64) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 64<<10)
	for n := int64(1); ; n++ {
		line, err := r.ReadBytes('\n')
		if n == lineNo {
			_, perr := wire.ParseIndexRow(line)
			var de *wire.DocError
			return errors.As(perr, &de) && de.Member == "state"
		}
		if err == io.EOF || err != nil {
			return false
		}
	}
}
