package verify

import (
	"context"
	"errors"
	"fmt"
	"os"

	"pisess/readers"
	"pisess/writers/durable"
	"pisess/writers/store"
	"pisess/writers/wire"
)

// Staged is what the one read of a source produced while a staging store
// was written from it: the writer's side of the comparison that
// VerifiedStaged makes with the frames read back from disk.
type Staged struct {
	HeaderID     string
	SourceFormat readers.SourceFormat
	// Entries, ChainHash and EntryDigest are writers.StageResult's.
	Entries     uint64
	ChainHash   string
	EntryDigest [32]byte
	// Fingerprint is the source's fingerprint: taken by the read itself
	// (a JSONL source hashes every byte its entries come from, with the
	// same identity before and after) or by Fingerprint before the read.
	Fingerprint wire.SourceFingerprint
	// Info is the source's status when the read began. When set, the
	// source is proved unchanged after the verification by its status
	// (device, inode, size, change and modification times: any write
	// moves the change time) instead of by hashing it again. Nil: the
	// source is hashed again and compared with Fingerprint.
	Info os.FileInfo
}

// VerifiedStaged is Verified without a second read of the source (issue
// 14): every frame of the staging store is read back from disk and checked
// as Verified checks it (CRC against its index row, bounds, coverage, the
// manifest, parents closed and acyclic, every §11 acceptance rule), and the
// entries it holds are compared with what the one parse of the source gave
// the writer: the same number, the same (id, parent, type) in order
// (rec.EntryDigest) and the same hash chain, which covers every payload.
// The payloads are not parsed again as typed entries: they are byte for
// byte (by the chain) the canonical payloads the reader produced from
// typed entries. Findings and the returned Passed are as Verified's.
func VerifiedStaged(ctx context.Context, rec Staged, stagingDir, sessionPath string, opt Options) (Passed, Report, error) {
	opt.SourcePath, opt.Staging = sessionPath, true
	if opt.Accept == nil {
		return Passed{}, Report{}, errors.New("verify: VerifiedStaged needs the owner to expect")
	}
	accept := *opt.Accept
	accept.HeaderID = rec.HeaderID
	accept.SourceFormat = opt.SourceFormat
	if accept.SourceFormat == "" {
		accept.SourceFormat = rec.SourceFormat
	}
	accept.MaxSegmentBytes = opt.MaxSegmentBytes
	if err := ctx.Err(); err != nil {
		return Passed{}, Report{}, fmt.Errorf("verify: %w", err)
	}
	// store.Check reads back and checks every frame (CRC against its row,
	// members, coverage, parents closed and acyclic, chain and counters
	// against the manifest): its summary is the store's side, with no
	// second pass over the frames.
	sv := &scan{out: findings{session: sessionPath}, staged: &rec, typedOK: true}
	var sum store.Summary
	st := storeChecksSummary(&sv.out, stagingDir, sessionPath, accept, &sum)
	sv.framesDone = st != nil && sum.FramesOK
	if !sv.framesDone {
		sv.iterErr = errors.New("not every frame of the staging store could be read back and checked")
	}
	sv.entries, sv.bytes, sv.chain, sv.stagedDigest = sum.Entries, sum.Bytes, sum.ChainHash, sum.EntryDigest
	sv.compareStaged(sessionPath)
	rep := sv.report(stagingDir, opt)
	if err := sourceStill(&rep, rec, sessionPath); err != nil {
		return Passed{}, rep, err
	}
	if onlyChanged(rep.Findings) {
		// The store is what was read; the source is no longer that
		// (issue 34 §3: reported as damage).
		return Passed{}, rep, fmt.Errorf("%s: %w (%s)", stagingDir, ErrSourceChanged, rep.Findings[0].Detail)
	}
	if len(rep.Findings) > 0 || !rep.Verified() {
		return Passed{}, rep, fmt.Errorf("%s: %w (%d findings)", stagingDir, ErrNotVerified, len(rep.Findings))
	}
	return Passed{staging: stagingDir, session: sessionPath, fingerprint: rec.Fingerprint, report: rep.Verification, ok: true}, rep, nil
}

// onlyChanged reports whether the findings are all CodeSourceChanged (and
// there is one).
func onlyChanged(list []Finding) bool {
	for _, f := range list {
		if f.Code != CodeSourceChanged {
			return false
		}
	}
	return len(list) > 0
}

// compareStaged adds a finding for each way the frames read back differ
// from what was staged.
func (sv *scan) compareStaged(sessionPath string) {
	rec := sv.staged
	if !sv.framesDone {
		return // the store's damage is the finding
	}
	if sv.entries != rec.Entries || sv.stagedDigest != rec.EntryDigest {
		sv.out.add(Finding{Code: CodeEntriesSource, Class: ClassCorrupt, Path: sessionPath,
			Detail: fmt.Sprintf("the store read back holds %d entries whose ids, parents or types differ from the %d read from the source", sv.entries, rec.Entries),
			Repair: RepairRebuild})
	}
	if sv.chain != rec.ChainHash {
		sv.out.add(Finding{Code: CodeChainBreak, Class: ClassCorrupt, Path: sessionPath,
			Detail: "the hash chain over the frames read back differs from the one over the payloads read from the source",
			Repair: RepairRebuild})
	}
}

// sourceStill checks that the source is still the file its fingerprint
// describes, adding a finding when it is not.
func sourceStill(rep *Report, rec Staged, sessionPath string) error {
	if rec.Info == nil {
		after, err := Fingerprint(sessionPath)
		switch {
		case errors.Is(err, ErrSourceChanged):
			rep.Findings = append(rep.Findings, changed(sessionPath, "the source changed while it was hashed after the verification"))
		case err != nil:
			return fmt.Errorf("verify: %w", err)
		case !sameSource(rec.Fingerprint, after):
			rep.Findings = append(rep.Findings, changed(sessionPath, "the source's fingerprint differs from the one taken before it was read"))
		}
		return nil
	}
	now, err := os.Lstat(sessionPath)
	if err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	if !SameStatus(rec.Info, now) {
		rep.Findings = append(rep.Findings, changed(sessionPath, "the source's status (size, inode or times) moved since it was read"))
	}
	return nil
}

// SameStatus reports whether two statuses of a file show it unwritten
// between them: same device, inode, size, change and modification times.
// A write, a truncation, a rename over it or a chmod moves one of them.
func SameStatus(a, b os.FileInfo) bool {
	sa, oka := durable.StatOf(a)
	sb, okb := durable.StatOf(b)
	if !oka || !okb {
		return false
	}
	return sa.Dev == sb.Dev && sa.Ino == sb.Ino && sa.Size == sb.Size && sa.Ctime == sb.Ctime && sa.Mtime == sb.Mtime
}

// SourceUnchanged checks, just before the cutover, that the source is still
// what the sidecar will claim: by its status when the read took it (any
// write moves the change time), else by hashing it again.
func SourceUnchanged(path string, rec Staged) error {
	stale := &readers.SourceChangedError{Path: path, Detail: "it moved between the read and the cutover"}
	if rec.Info != nil {
		now, err := os.Lstat(path)
		if err != nil {
			return fmt.Errorf("%w (%v)", stale, err)
		}
		if !SameStatus(rec.Info, now) {
			return stale
		}
		return nil
	}
	now, err := Fingerprint(path)
	if err != nil {
		return fmt.Errorf("%w (%v)", stale, err)
	}
	if !sameFingerprint(now, rec.Fingerprint) {
		return stale
	}
	return nil
}

func sameFingerprint(a, b wire.SourceFingerprint) bool {
	if a.ByteLength != b.ByteLength || a.SHA256 != b.SHA256 {
		return false
	}
	if (a.FileIdentity == nil) != (b.FileIdentity == nil) {
		return false
	}
	return a.FileIdentity == nil || *a.FileIdentity == *b.FileIdentity
}
