package engine

import (
	"context"
	"errors"
	"fmt"
	"path"

	"pisess/ledger"
	"pisess/readers"
	"pisess/readers/jsonl"
	"pisess/rollback"
	"pisess/verify"
	"pisess/writers"
	"pisess/writers/durable"
	"pisess/writers/store"
	"pisess/writers/wire"
)

// inPlaceNext says what follows an attempt to refresh a sidecar in place.
type inPlaceNext int

const (
	// inPlaceStaged: nothing was written; the refresh goes through a
	// staging copy (a branch from an earlier entry, too much appended, the
	// store mutation lock held).
	inPlaceStaged inPlaceNext = iota
	// inPlaceRebuild: the sidecar is not the record's, or was written and
	// left dirty (not verified, a failure part way): a full rebuild.
	inPlaceRebuild
	// inPlaceDone: the result is the session's.
	inPlaceDone
)

// refreshInPlace is the incremental refresh without a staging copy
// (issue 14: O(appended)): under the store mutation lock the sidecar
// itself is continued (writers.AppendInPlace: checked against the record,
// every appended entry read and accepted before anything is written; then
// rollback.PrepareInPlace journals the cutover and that the old sidecar is
// not kept, and marks it dirty, before its first byte changes), verified
// (verify.VerifiedAppend), sealed with one shared syncfs that also makes
// the journal's records durable, and committed by a clean source state
// (rollback.CommitInPlace). Until that last write pi does not read the
// sidecar (FORMAT.md §8), so a crash or failure part way leaves a sidecar
// the next run rebuilds. The result is byte for byte the store a full
// rebuild writes at the same clock, its ledger included.
func (x *session) refreshInPlace(ctx context.Context, res SessionResult, rec ledger.RefreshRecord, sum [32]byte) (SessionResult, inPlaceNext) {
	env, s := x.env, x.s
	none := wire.Verification{}
	// Tried once: while another process holds it, the staging copy
	// (which writes nothing into the sidecar) does without.
	lock, err := env.Ops.LockFile(ctx, store.MutationLockPath(x.sidecar), 0)
	if err != nil {
		env.Log.Debug().Str("session", s.Path).Err(err).Msg("store mutation lock: refresh through a staging copy")
		return res, inPlaceStaged
	}
	defer lock.Unlock()
	var src *jsonl.AppendSource
	var prepared, mismatch bool
	spec := rollback.InPlaceSpec{SessionPath: s.Path, SidecarDir: x.sidecar, SourceFormat: wire.SourceFormat(s.Format),
		CorrelationID: x.correlation, Ops: env.Ops, Journal: env.Journal, Clock: env.Clock}
	prepare := func(b store.Base, appended int) error {
		if why := matchesRecord(b, rec); why != "" {
			mismatch = true
			return errors.New(why)
		}
		prepared = true // a failed mark may have cut the state file
		spec.BaseEntries, spec.Appended = b.Manifest.Counters.EntriesTotal, uint64(appended)
		// Read and checked: the next session's reading may begin while
		// this one is written (runJobs' pipeline).
		env.opened()
		return rollback.PrepareInPlace(spec)
	}
	durable.Failpoint(fpBeforeStage)
	if err := x.openSeal(x.sidecar, false); err != nil {
		env.Log.Debug().Str("session", s.Path).Err(err).Msg("seal: refresh through a staging copy")
		return res, inPlaceStaged
	}
	sops := env.Ops
	sops.DeferSync = true // sealed once below
	var names []string    // the vouched names, for the verification
	ar, err := writers.AppendInPlace(ctx, x.sidecar, x.openAppended(rec, sum, &src), writers.InPlaceOptions{
		StageOptions: writers.StageOptions{MaxSegmentBytes: env.MaxSegmentBytes, Clock: env.Clock, Ops: sops, SourcePath: x.s.Path}, Prepare: prepare,
		Vouched: func() ([]string, bool) {
			var ok bool
			names, ok = env.Fresh.FramesVouched(s)
			return names, ok
		},
		// Written: the staging slot is free. The manifest, verification
		// (a read-back of what was just written), ledger, seal and commit
		// overlap the next session's writing, as a full build's do (build).
		IndexSHA256State: rec.IndexState(),
		Written:          env.yield})
	switch {
	case err == nil:
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		return x.failed(res, wire.ErrorClassIOFailure, none, err), inPlaceDone
	case mismatch || prepared:
		env.Log.Debug().Str("session", s.Path).Err(err).Msg("refresh in place not possible: full rebuild")
		x.damagedBase(err)
		return res, inPlaceRebuild
	default:
		env.Log.Debug().Str("session", s.Path).Err(err).Msg("refresh in place not possible: through a staging copy")
		return res, inPlaceStaged
	}
	durable.Failpoint(fpAfterStage)
	uid, gid, err := env.Ops.Owner(s.Path)
	if err != nil {
		return x.failed(res, wire.ErrorClassIOFailure, none, fmt.Errorf("owner of %s: %w", s.Path, err)), inPlaceDone
	}
	passed, v, stop := x.verifyAppended(ctx, &res, x.sidecar, ar, src, uid, gid, names)
	switch {
	case stop != nil:
		return *stop, inPlaceDone
	case !passed.Valid():
		return res, inPlaceRebuild
	}
	res.Notes = append(res.Notes, fmt.Sprintf("refreshed in place: %d entries appended to the %d of the sidecar",
		len(ar.Appended), ar.Base.Manifest.Counters.EntriesTotal))
	// The store's ledger holds this migration's events, as a rebuilt
	// store's does; everything written is then sealed at once.
	if err := ledger.ReplaceStoreEventsWith(sops, x.sidecar, x.storeEvents(v)...); err != nil {
		return x.failed(res, wire.ErrorClassIOFailure, v, fmt.Errorf("store ledger: %w", err)), inPlaceDone
	}
	dev, whole, err := env.Ops.SealWith(x.seal, x.sidecar)
	if err != nil {
		return x.failed(res, wire.ErrorClassIOFailure, v, fmt.Errorf("sidecar: %w", err)), inPlaceDone
	}
	// The run's records of the session (PrepareInPlace) are durable with
	// it: written back by the same syncfs, else synced now.
	if err := env.Journal.SyncUnlessSealed(dev, whole); err != nil {
		return x.failed(res, wire.ErrorClassIOFailure, v, err), inPlaceDone
	}
	durable.Failpoint(fpAfterStagingSeal)
	if !src.Unchanged() {
		return x.failed(res, wire.ErrorClassAtomicityViolation, v, &readers.SourceChangedError{Path: s.Path, Detail: "it moved between the read and the commit"}), inPlaceDone
	}
	durable.Failpoint(fpBeforeCutover)
	if err := rollback.CommitInPlace(ctx, passed, spec); err != nil {
		return x.failed(res, wire.ErrorClassAtomicityViolation, v, fmt.Errorf("commit: %w", err)), inPlaceDone
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
	return res, inPlaceDone
}
