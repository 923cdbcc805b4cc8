package engine

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"os"

	"pisess/ledger"
	"pisess/readers"
	"pisess/readers/jsonl"
	"pisess/readers/normalize"
	"pisess/rollback"
	"pisess/verify"
	"pisess/writers"
	"pisess/writers/durable"
	"pisess/writers/store"
	"pisess/writers/wire"
)

// remember records the sidecar just installed from the source bytes fp
// describes, st the store as its writer wrote it (nothing when the run
// keeps no record, or the store's identity cannot be read: the next
// refresh is then a full one). The digests are the writer's, not read
// back: the verification read the files and found what was written.
func (x *session) remember(fp wire.SourceFingerprint, st writers.StageResult) {
	if x.env.Refresh == nil || x.s.Rel == "" || x.s.Format != readers.FormatJSONLv3 {
		return
	}
	dev, ino, ok := store.ManifestIdentity(x.sidecar)
	if !ok || st.IndexSHA256 == "" || st.ManifestSHA256 == "" {
		return
	}
	m, idx, man := st.Manifest, st.IndexSHA256, st.ManifestSHA256
	r := ledger.RefreshRecord{
		SourceBytes: int64(fp.ByteLength), SourceSHA256: fp.SHA256,
		Entries: m.Counters.EntriesTotal, ChainHash: m.Integrity.ChainHash, IndexSHA256: idx,
		ManifestDev: dev, ManifestIno: ino, CorrelationID: x.correlation, ManifestSHA256: man,
	}
	if _, ok := wire.SHA256StateLength(st.IndexSHA256State); ok {
		r.IndexSHA256State = hex.EncodeToString(st.IndexSHA256State)
	}
	if n, ok := wire.SHA256StateLength(x.prefix.SHA256State); ok && n == fp.ByteLength {
		r.SourceXXH3, r.SourceSHA256State = hex.EncodeToString(x.prefix.XXH3[:]), hex.EncodeToString(x.prefix.SHA256State)
	}
	x.env.Refresh.Put(x.s.Rel, r)
}

// refreshAppended refreshes a stale sidecar in time proportional to what
// the source gained, when the record proves the source is the bytes the
// sidecar was built from followed by whole new lines: the sidecar is
// copied (each frame CRC-checked against its row), only the new lines are
// parsed, encoded and written, and only they are verified
// (verify.VerifiedAppend). The result is byte for byte what the full
// build writes at the same clock. ok is false, with nothing done but a
// removed staging directory, whenever anything does not hold: build then
// rebuilds from the whole source. It runs under the session lock.
func (x *session) refreshAppended(ctx context.Context, res SessionResult) (SessionResult, bool) {
	env, s := x.env, x.s
	rec, sum, ok := x.appendRecord(res)
	if !ok {
		return res, false
	}
	if env.InPlace && rec.ManifestSHA256 != "" {
		switch r, next := x.refreshInPlace(ctx, res, rec, sum); next {
		case inPlaceDone:
			return r, true
		case inPlaceRebuild:
			return res, false
		}
	}
	staging := rollback.StagingPath(x.sidecar, x.migrationID)
	installed := false
	defer func() {
		if !installed {
			// pisess's own partial output, invisible to pi by its name.
			env.removeStaging(staging)
		}
	}()
	fallback := func(err error) (SessionResult, bool) {
		env.Log.Debug().Str("session", s.Path).Err(err).Msg("incremental refresh not possible: full rebuild")
		x.damagedBase(err)
		return res, false
	}
	var src *jsonl.AppendSource
	open := x.openAppended(rec, sum, &src)
	durable.Failpoint(fpBeforeStage)
	if err := x.openSeal(staging, true); err != nil {
		return fallback(err)
	}
	sops := env.Ops
	sops.DeferSync = true // sealed once by install, as the full build's
	// A record with the manifest's digest vouches for the sidecar's
	// manifest and index (compared below, before anything is used): its
	// frames then need only their CRCs.
	vouched := rec.ManifestSHA256 != ""
	ar, err := writers.StageAppend(ctx, x.sidecar, open, staging, writers.StageOptions{MaxSegmentBytes: env.MaxSegmentBytes, Clock: env.Clock, Ops: sops, BaseVouched: vouched, SourcePath: s.Path})
	if err != nil {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return x.failed(res, wire.ErrorClassIOFailure, wire.Verification{}, err), true
		}
		return fallback(err)
	}
	if why := matchesRecord(ar.Base, rec); why != "" {
		return fallback(errors.New(why))
	}
	durable.Failpoint(fpAfterStage)
	return x.installAppended(ctx, res, staging, ar, src, &installed)
}

// damagedBase notes that the sidecar an incremental refresh began from
// holds a frame that does not match its row (err): the full rebuild that
// follows is a heal, which keeps the damaged sidecar in the quarantine
// (else the discarder would take it for a reproducible one).
func (x *session) damagedBase(err error) {
	if errors.Is(err, wire.ErrChecksum) {
		x.heal, x.damaged = true, err.Error()
	}
}

// recordPrefix is the record's normalize.PrefixHash, nil when it has none
// (ledger.RefreshRecord.Prefix).
func recordPrefix(r ledger.RefreshRecord) *normalize.PrefixHash {
	x, st, ok := r.Prefix()
	if !ok {
		return nil
	}
	return &normalize.PrefixHash{XXH3: x, SHA256State: st}
}

// openAppended opens the entries the session gained since rec, keeping the
// source in *src.
func (x *session) openAppended(rec ledger.RefreshRecord, sum [32]byte, src **jsonl.AppendSource) writers.OpenAppended {
	return func(known func(string) bool) (readers.Source, error) {
		a, err := jsonl.OpenAppend(x.s.Path, jsonl.AppendOptions{Offset: rec.SourceBytes, SHA256: sum, Prefix: recordPrefix(rec), Known: known})
		if err != nil {
			return nil, err
		}
		*src = a
		return a, nil
	}
}

// appendRecord returns the session's refresh record and its source digest
// when an incremental refresh may be tried: a JSONL session being
// refreshed (not forced, not a dry run) whose sidecar is the one the
// record describes (the same manifest.json).
func (x *session) appendRecord(res SessionResult) (ledger.RefreshRecord, [32]byte, bool) {
	env, s := x.env, x.s
	if env.Refresh == nil || env.DryRun || env.Force || res.Action != PlanRefresh || res.heal ||
		s.Format != readers.FormatJSONLv3 || s.Rel == "" {
		return ledger.RefreshRecord{}, [32]byte{}, false
	}
	rec, ok := env.Refresh.Get(s.Rel)
	if !ok {
		return ledger.RefreshRecord{}, [32]byte{}, false
	}
	sum, ok := rec.SHA256()
	if dev, ino, idok := store.ManifestIdentity(x.sidecar); !ok || !idok || dev != rec.ManifestDev || ino != rec.ManifestIno {
		return ledger.RefreshRecord{}, [32]byte{}, false
	}
	return rec, sum, true
}

// matchesRecord reports why base, the sidecar as an incremental refresh
// read it, is not the one rec describes ("" when it is).
func matchesRecord(b store.Base, rec ledger.RefreshRecord) string {
	if b.Manifest.Counters.EntriesTotal != rec.Entries || b.Manifest.Integrity.ChainHash != rec.ChainHash || b.IndexSHA256 != rec.IndexSHA256 ||
		rec.ManifestSHA256 != "" && b.ManifestSHA256 != rec.ManifestSHA256 {
		return "the sidecar is not the one the refresh record describes"
	}
	return ""
}

// verifyAppended verifies dir, a store that src's appended entries were
// written into (a staging copy or the sidecar itself), fills res's
// verification, counts and the incremental note, and records the
// staging_copy and integrity_check events. A store that fails its
// verification gives an invalid Passed (a full rebuild follows, which says
// what is wrong if anything still is); a non-nil stop is the session's
// result.
func (x *session) verifyAppended(ctx context.Context, res *SessionResult, dir string, ar writers.AppendResult, src *jsonl.AppendSource, uid, gid int, baseNames []string) (verify.Passed, wire.Verification, *SessionResult) {
	env, s := x.env, x.s
	none := wire.Verification{}
	durable.Failpoint(fpBeforeVerify)
	check := verify.AppendCheck{BaseManifest: ar.Base.Manifest, BaseLastRow: ar.Base.LastRow, BaseIndexBytes: ar.Base.IndexBytes,
		HeaderID: src.Header().ID, Fingerprint: src.Fingerprint(), Unchanged: src.Unchanged, BaseNames: baseNames}
	for _, e := range ar.Appended {
		check.Appended = append(check.Appended, verify.AppendedEntry(e))
	}
	passed, vrep, err := verify.VerifiedAppend(ctx, dir, s.Path, check, verify.Options{
		SourceFormat: s.Format, MaxSegmentBytes: env.MaxSegmentBytes, Accept: &verify.AcceptOptions{OwnerUID: uid, OwnerGID: gid,
			// A session of a tree this run walked (discover).
			AncestorsWalked: s.Rel != ""}})
	if err != nil {
		env.Log.Warn().Str("session", s.Path).Err(err).Str("findings", firstFindings(vrep.Findings, 3)).
			Msg("incremental refresh not verified: full rebuild")
		return verify.Passed{}, none, nil
	}
	v := vrep.Verification
	res.Verification = &VerificationInfo{EntryCountMatch: v.EntryCountMatch, HashChainMatch: v.HashChainMatch, IndexConsistent: v.IndexConsistent}
	res.Entries, res.Bytes = ar.Entries, ar.Bytes
	staged := x.event(wire.PhaseStagingCopy, none, wire.OutcomeOK, "")
	if err := x.progress(staged, x.event(wire.PhaseIntegrityCheck, v, wire.OutcomeOK, "")); err != nil {
		r := fail(*res, "operational", err)
		return verify.Passed{}, none, &r
	}
	durable.Failpoint(fpAfterVerify)
	res.Incremental = true
	x.prefix, x.verifiedNames, x.verifiedKeys = src.Prefix(), vrep.Names, vrep.Keys
	return passed, v, nil
}

// installAppended verifies a continued staging store and installs it: the
// rest of build for it. A store that fails its verification means a full
// rebuild (ok false); any other problem is the session's result.
func (x *session) installAppended(ctx context.Context, res SessionResult, staging string, ar writers.AppendResult, src *jsonl.AppendSource, installed *bool) (_ SessionResult, ok bool) {
	env, s := x.env, x.s
	none := wire.Verification{}
	uid, gid, err := env.Ops.Owner(s.Path)
	if err != nil {
		return x.failed(res, wire.ErrorClassIOFailure, none, fmt.Errorf("owner of %s: %w", s.Path, err)), true
	}
	if os.Geteuid() == 0 {
		if err := env.Ops.ChownTree(staging, uid, gid); err != nil {
			return x.failed(res, wire.ErrorClassIOFailure, none, fmt.Errorf("give %s to uid %d: %w", staging, uid, err)), true
		}
	}
	passed, v, stop := x.verifyAppended(ctx, &res, staging, ar, src, uid, gid, nil)
	if stop != nil {
		return *stop, true
	}
	if !passed.Valid() {
		return res, false
	}
	res.Notes = append(res.Notes, fmt.Sprintf("refreshed incrementally: %d entries appended to the %d copied from the sidecar",
		len(ar.Appended), ar.Base.Manifest.Counters.EntriesTotal))
	// The full build hashes the source again before its cutover; the
	// file's size and identity (its change time moves with any write and
	// cannot be set back) prove the same without reading it.
	unchanged := func() error {
		if !src.Unchanged() {
			return &readers.SourceChangedError{Path: s.Path, Detail: "it moved between the read and the cutover"}
		}
		return nil
	}
	return x.install(ctx, res, staging, passed, v, uid, gid, unchanged, ar.StageResult, installed), true
}
