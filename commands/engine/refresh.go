package engine

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"path"

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
// describes (ledger.RefreshRecord), or nothing when a part of the record
// is not known: the next refresh is then a full one. The digests are the
// writer's: the verification read the files back and found them.
func (x *session) remember(fp wire.SourceFingerprint, st writers.StageResult) {
	if x.env.Refresh == nil || x.s.Rel == "" || x.s.Format != readers.FormatJSONLv3 {
		return
	}
	dev, ino, ok := store.ManifestIdentity(x.sidecar)
	_, indexed := wire.SHA256StateLength(st.IndexSHA256State)
	prefix, hashed := wire.SHA256StateLength(x.prefix.SHA256State)
	if !ok || !indexed || !hashed || prefix != fp.ByteLength || st.IndexSHA256 == "" || st.ManifestSHA256 == "" {
		return
	}
	m := st.Manifest
	x.env.Refresh.Put(x.s.Rel, ledger.RefreshRecord{
		SourceBytes: int64(fp.ByteLength), SourceSHA256: fp.SHA256,
		Entries: m.Counters.EntriesTotal, ChainHash: m.Integrity.ChainHash, IndexSHA256: st.IndexSHA256,
		ManifestDev: dev, ManifestIno: ino, CorrelationID: x.correlation, ManifestSHA256: st.ManifestSHA256,
		SourceXXH3: hex.EncodeToString(x.prefix.XXH3[:]), SourceSHA256State: hex.EncodeToString(x.prefix.SHA256State),
		IndexSHA256State: hex.EncodeToString(st.IndexSHA256State),
	})
}

// refreshInPlace continues a stale sidecar where it lies with the whole
// lines its source gained since the refresh record (docs/design.md, "The
// two refresh paths"), byte for byte as a full rebuild would write it.
// ok is false whenever it cannot: build then rebuilds from the whole
// source, which a dirty sidecar does not hinder. Under the session lock.
func (x *session) refreshInPlace(ctx context.Context, res SessionResult) (_ SessionResult, ok bool) {
	env, s := x.env, x.s
	rec, prefix, ok := x.appendRecord(res)
	if !ok {
		return res, false
	}
	none := wire.Verification{}
	rebuild := func(why string, err error) (SessionResult, bool) {
		env.Log.Debug().Str("session", s.Path).Err(err).Msg(why + ": full rebuild")
		return res, false
	}
	// Tried once: while another process holds it, a full rebuild (which
	// writes nothing into the sidecar) does without.
	lock, err := env.Ops.LockFile(ctx, store.MutationLockPath(x.sidecar), 0)
	if err != nil {
		return rebuild("store mutation lock", err)
	}
	defer lock.Unlock()
	var src *jsonl.AppendSource
	spec := rollback.InPlaceSpec{SessionPath: s.Path, SidecarDir: x.sidecar, SourceFormat: wire.SourceFormat(s.Format),
		CorrelationID: x.correlation, Ops: env.Ops, Journal: env.Journal, Clock: env.Clock}
	prepare := func(b store.Base, appended int) error {
		if why := matchesRecord(b, rec); why != "" {
			return errors.New(why)
		}
		spec.BaseEntries, spec.Appended = b.Manifest.Counters.EntriesTotal, uint64(appended)
		// Read and checked: the next session's reading may begin while
		// this one is written (runJobs' pipeline).
		env.opened()
		return rollback.PrepareInPlace(spec)
	}
	durable.Failpoint(fpBeforeStage)
	if err := x.openSeal(x.sidecar, false); err != nil {
		return rebuild("seal", err)
	}
	sops := env.Ops
	sops.DeferSync = true // sealed once below
	var names []string    // the vouched names, for the verification
	ar, err := writers.AppendInPlace(ctx, x.sidecar, x.openAppended(rec, prefix, &src), writers.InPlaceOptions{
		StageOptions: writers.StageOptions{MaxSegmentBytes: env.MaxSegmentBytes, Clock: env.Clock, Ops: sops, SourcePath: x.s.Path}, Prepare: prepare,
		Vouched: func() ([]string, bool) {
			var ok bool
			names, ok = env.Fresh.FramesVouched(s)
			return names, ok
		},
		// Written: the slot is free, the rest overlaps the next session.
		IndexSHA256State: rec.IndexState(),
		Written:          env.yield})
	switch {
	case err == nil:
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		return x.failed(res, wire.ErrorClassIOFailure, none, err), true
	default:
		x.damagedBase(err)
		return rebuild("refresh in place not possible", err)
	}
	durable.Failpoint(fpAfterStage)
	uid, gid, err := env.Ops.Owner(s.Path)
	if err != nil {
		return x.failed(res, wire.ErrorClassIOFailure, none, fmt.Errorf("owner of %s: %w", s.Path, err)), true
	}
	passed, v, stop := x.verifyAppended(ctx, &res, ar, src, uid, gid, names)
	switch {
	case stop != nil:
		return *stop, true
	case !passed.Valid():
		return res, false
	}
	res.Notes = append(res.Notes, fmt.Sprintf("refreshed in place: %d entries appended to the %d of the sidecar",
		len(ar.Appended), ar.Base.Manifest.Counters.EntriesTotal))
	// The store's ledger holds this migration's events, as a rebuilt
	// store's does; everything written is then sealed at once.
	if err := ledger.ReplaceStoreEventsWith(sops, x.sidecar, x.storeEvents(v)...); err != nil {
		return x.failed(res, wire.ErrorClassIOFailure, v, fmt.Errorf("store ledger: %w", err)), true
	}
	dev, whole, err := env.Ops.SealWith(x.seal, x.sidecar)
	if err != nil {
		return x.failed(res, wire.ErrorClassIOFailure, v, fmt.Errorf("sidecar: %w", err)), true
	}
	// The run's records of the session (PrepareInPlace) are durable with
	// it: written back by the same syncfs, else synced now.
	if err := env.Journal.SyncUnlessSealed(dev, whole); err != nil {
		return x.failed(res, wire.ErrorClassIOFailure, v, err), true
	}
	durable.Failpoint(fpAfterStagingSeal)
	if !src.Unchanged() {
		return x.failed(res, wire.ErrorClassAtomicityViolation, v, &readers.SourceChangedError{Path: s.Path, Detail: "it moved between the read and the commit"}), true
	}
	durable.Failpoint(fpBeforeCutover)
	if err := rollback.CommitInPlace(ctx, passed, spec); err != nil {
		return x.failed(res, wire.ErrorClassAtomicityViolation, v, fmt.Errorf("commit: %w", err)), true
	}
	// Read under the locks, just after the last write: what the next
	// run's status of the sidecar would see.
	counters := ar.StageResult.Manifest.Counters
	env.Fresh.Vouch(s, passed.Fingerprint(), verify.Vouched{HeaderID: src.Header().ID,
		Entries: counters.EntriesTotal, Bytes: counters.BytesTotal}, x.verifiedNames,
		// Written since the verification looked: the ledger and state.
		verify.SeenKeys{Keys: x.verifiedKeys, Changed: []string{path.Join(store.MigrationsDir, store.LedgerName), store.SourceStateName}})
	durable.Failpoint(fpAfterCutover)
	x.remember(passed.Fingerprint(), ar.StageResult)
	if err := x.progress(x.event(wire.PhaseCompleted, v, wire.OutcomeOK, "")); err != nil {
		res.Notes = append(res.Notes, "installed, but "+err.Error())
	}
	durable.Failpoint(fpAfterCompleted)
	res.Outcome = OutcomeDone
	return res, true
}

// damagedBase notes a frame of the sidecar that does not match its row
// (err): the full rebuild that follows is a heal, which keeps the damaged
// sidecar (the discarder would take it for a reproducible one).
func (x *session) damagedBase(err error) {
	if errors.Is(err, wire.ErrChecksum) {
		x.heal, x.damaged = true, err.Error()
	}
}

// openAppended opens the entries the session gained since rec, keeping the
// source in *src.
func (x *session) openAppended(rec ledger.RefreshRecord, prefix normalize.PrefixHash, src **jsonl.AppendSource) writers.OpenAppended {
	return func(known func(string) bool) (readers.Source, error) {
		a, err := jsonl.OpenAppend(x.s.Path, jsonl.AppendOptions{Offset: rec.SourceBytes, Prefix: prefix, Known: known})
		if err != nil {
			return nil, err
		}
		*src = a
		return a, nil
	}
}

// appendRecord returns the session's refresh record and the PrefixHash of
// the source bytes it describes when a refresh in place may be tried: a
// JSONL session refreshed in place (not forced, not a dry run) whose
// manifest.json is the one the record describes.
func (x *session) appendRecord(res SessionResult) (ledger.RefreshRecord, normalize.PrefixHash, bool) {
	env, s := x.env, x.s
	if env.Refresh == nil || !env.InPlace || env.DryRun || env.Force || res.Action != PlanRefresh || res.heal ||
		s.Format != readers.FormatJSONLv3 || s.Rel == "" {
		return ledger.RefreshRecord{}, normalize.PrefixHash{}, false
	}
	rec, ok := env.Refresh.Get(s.Rel)
	if !ok {
		return ledger.RefreshRecord{}, normalize.PrefixHash{}, false
	}
	xxh3, state, ok := rec.Prefix()
	if dev, ino, idok := store.ManifestIdentity(x.sidecar); !ok || !idok || dev != rec.ManifestDev || ino != rec.ManifestIno {
		return ledger.RefreshRecord{}, normalize.PrefixHash{}, false
	}
	return rec, normalize.PrefixHash{XXH3: xxh3, SHA256State: state}, true
}

// matchesRecord reports why base, the sidecar as the refresh read it, is
// not the one rec describes ("" when it is).
func matchesRecord(b store.Base, rec ledger.RefreshRecord) string {
	if b.Manifest.Counters.EntriesTotal != rec.Entries || b.Manifest.Integrity.ChainHash != rec.ChainHash ||
		b.IndexSHA256 != rec.IndexSHA256 || b.ManifestSHA256 != rec.ManifestSHA256 {
		return "the sidecar is not the one the refresh record describes"
	}
	return ""
}

// verifyAppended verifies the sidecar src's entries were appended to,
// fills res and journals staging_copy and integrity_check. A store that
// fails gives an invalid Passed (a full rebuild follows); a non-nil stop
// is the session's result.
func (x *session) verifyAppended(ctx context.Context, res *SessionResult, ar writers.AppendResult, src *jsonl.AppendSource, uid, gid int, baseNames []string) (verify.Passed, wire.Verification, *SessionResult) {
	env, s := x.env, x.s
	none := wire.Verification{}
	durable.Failpoint(fpBeforeVerify)
	check := verify.AppendCheck{BaseManifest: ar.Base.Manifest, BaseLastRow: ar.Base.LastRow, BaseIndexBytes: ar.Base.IndexBytes,
		HeaderID: src.Header().ID, Fingerprint: src.Fingerprint(), Unchanged: src.Unchanged, BaseNames: baseNames}
	for _, e := range ar.Appended {
		check.Appended = append(check.Appended, verify.AppendedEntry(e))
	}
	passed, vrep, err := verify.VerifiedAppend(ctx, x.sidecar, s.Path, check, verify.Options{
		SourceFormat: s.Format, MaxSegmentBytes: env.MaxSegmentBytes, Accept: &verify.AcceptOptions{OwnerUID: uid, OwnerGID: gid,
			// A session of a tree this run walked (discover).
			AncestorsWalked: s.Rel != ""}})
	if err != nil {
		env.Log.Warn().Str("session", s.Path).Err(err).Str("findings", verify.FirstFindings(vrep.Findings, 3)).
			Msg("refresh in place not verified: full rebuild")
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
