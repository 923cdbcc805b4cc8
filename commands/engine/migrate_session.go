package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/google/uuid"

	"pisess/ledger"
	"pisess/readers"
	"pisess/readers/discover"
	"pisess/readers/jsonl"
	"pisess/readers/normalize"
	"pisess/readers/privtmp"
	"pisess/rollback"
	"pisess/verify"
	"pisess/writers"
	"pisess/writers/durable"
	"pisess/writers/store"
	"pisess/writers/wire"
)

// runSession carries out one session's plan.
func runSession(ctx context.Context, env Env, s discover.Session, p plan, correlationID string) SessionResult {
	if res, ok := decided(s, p); ok {
		return res
	}
	return build(ctx, env, s, planned(s, p), correlationID)
}

// RebuildSidecar rebuilds the sidecar of s from its source and installs
// it through migrate's pipeline, the displaced store quarantined: fsck
// --repair's rebuild. A nil env.Journal is opened for s.Tree.
func RebuildSidecar(ctx context.Context, env Env, s discover.Session, correlationID string, reason string) SessionResult {
	res := planned(s, plan{action: PlanRefresh, reason: reason})
	if s.Refusal != nil {
		res.Outcome, res.Error = OutcomeRefused, refusedInfo(s.Refusal, s.Refusal.Reason)
		return res
	}
	if env.Journal == nil && !env.DryRun {
		j, err := ledger.OpenJournalWith(env.Ops, s.Tree)
		if err != nil {
			return fail(res, "operational", fmt.Errorf("open journal of %s: %w", s.Tree, err))
		}
		defer j.Close()
		env.Journal = j
	}
	if env.MaxSegmentBytes == 0 {
		env.MaxSegmentBytes = wire.MaxSegmentBytes
	}
	res = build(ctx, env, s, res, correlationID)
	if !env.DryRun {
		if err := env.Journal.Sync(); err != nil {
			res.Notes = append(res.Notes, err.Error())
		}
	}
	return res
}

func refusedInfo(r *readers.RefusedError, reason string) *ErrorInfo {
	if r == nil {
		return &ErrorInfo{Class: "refused", Message: reason}
	}
	return &ErrorInfo{Class: string(r.Class), Message: r.Error(), Line: r.Line}
}

func fail(res SessionResult, class string, err error) SessionResult {
	res.Outcome = OutcomeFailed
	res.Error = &ErrorInfo{Class: class, Message: err.Error()}
	return res
}

// session is one run of the pipeline on one session.
type session struct {
	env         Env
	s           discover.Session
	correlation string
	migrationID string
	sidecar     string
	// prefix hashes the source bytes the sidecar is built from (JSONL),
	// for the refresh record.
	prefix normalize.PrefixHash
	// The entries a refresh in place's verification walked, and their
	// metadata (verify.Report.Keys), for the fresh cache.
	verifiedNames []string
	verifiedKeys  []discover.FileKey
	// seal is opened before the first write (nil in a dry run).
	seal *durable.Seal
	// heal: the sidecar replaced is damaged (plan.heal, or damaged: what
	// a refresh in place found wrong in it).
	heal    bool
	damaged string
}

func (x *session) event(phase wire.Phase, v wire.Verification, outcome wire.Outcome, class wire.ErrorClass) wire.MigrationEvent {
	return wire.MigrationEvent{
		MigrationID: x.migrationID, Phase: phase, At: wire.FormatTimestamp(x.env.now()),
		SourcePath: x.s.Path, TargetPath: x.sidecar,
		SourceFormat: wire.SourceFormat(x.s.Format), TargetFormat: wire.FormatNativeV2,
		Verification: v, Outcome: outcome, ErrorClass: class, CorrelationID: x.correlation,
	}
}

// journal appends an event to the tree journal (nothing in a dry run).
func (x *session) journal(ev wire.MigrationEvent) error {
	return x.journalEvents(true, ev)
}

// progress appends events no recovery reads (planned, staging_copy,
// integrity_check, completed) unsynced: the seal, the cutover's synced
// records or the end of the run make them durable.
func (x *session) progress(evs ...wire.MigrationEvent) error {
	return x.journalEvents(false, evs...)
}

func (x *session) journalEvents(sync bool, evs ...wire.MigrationEvent) error {
	if x.env.DryRun || x.env.Journal == nil || len(evs) == 0 {
		return nil
	}
	if err := x.env.Journal.AppendEvents(sync, evs...); err != nil {
		return fmt.Errorf("journal %s event: %w", evs[0].Phase, err)
	}
	return nil
}

// failed journals the failure and returns the result. A source that
// changed while it was read is one class wherever the run noticed it
// (issue 34 §3), journaled as a recoverable io_failure ("run again") and
// never a refusal the refusal cache would keep.
func (x *session) failed(res SessionResult, class wire.ErrorClass, v wire.Verification, err error) SessionResult {
	if errors.Is(err, readers.ErrSourceChanged) {
		if jerr := x.journal(x.event(wire.PhaseFailed, v, wire.OutcomeRecoverableError, wire.ErrorClassIOFailure)); jerr != nil {
			x.env.Log.Warn().Str("session", x.s.Path).Err(jerr).Msg("failure not journaled")
		}
		x.env.Log.Warn().Str("session", x.s.Path).Err(err).Msg("source changed while it was read")
		return fail(res, ClassSourceChanged, fmt.Errorf("%s changed while pisess read it (a writer that does not take pi's session lock, such as the TypeScript pi, wrote it): the next run migrates it", x.s.Path))
	}
	if r := readers.AsRefused(err); r != nil && r.Class == readers.ClassLocked {
		// Another process holds the database locked, as pi holds a
		// session it writes: busy, as when the session lock stays held.
		if jerr := x.journal(x.event(wire.PhaseFailed, v, wire.OutcomeRecoverableError, wire.ErrorClassIOFailure)); jerr != nil {
			err = fmt.Errorf("%w (and %v)", err, jerr)
		}
		res.Outcome, res.Error = OutcomeBusy, &ErrorInfo{Class: "busy", Message: err.Error() + ": the next run migrates it"}
		return res
	}
	canceled := errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
	if canceled {
		// An interrupt is not damage: io_failure with a recoverable
		// outcome says "run it again" (docs/design.md, Interrupts).
		class = wire.ErrorClassIOFailure
	}
	outcome := wire.OutcomeFatalError
	if class == wire.ErrorClassIOFailure {
		outcome = wire.OutcomeRecoverableError
	}
	if jerr := x.journal(x.event(wire.PhaseFailed, v, outcome, class)); jerr != nil {
		err = fmt.Errorf("%w (and %v)", err, jerr)
	}
	if canceled {
		// The run's logger carries the correlation id already.
		x.env.Log.Warn().Str("session", x.s.Path).Err(err).Msg("session canceled")
		res = fail(res, "canceled", err)
		res.Outcome = OutcomeInterrupted
		return res
	}
	x.env.Log.Warn().Str("session", x.s.Path).Str("errorClass", string(class)).Err(err).Msg("session failed")
	return fail(res, string(class), err)
}

// build is the per-session pipeline (issue 7, step 3).
func build(ctx context.Context, env Env, s discover.Session, res SessionResult, correlationID string) SessionResult {
	x := &session{env: env, s: s, correlation: correlationID, migrationID: uuid.NewString(), sidecar: discover.SidecarPath(s.Path), heal: res.heal}
	none := wire.Verification{}
	if err := x.progress(x.event(wire.PhasePlanned, none, wire.OutcomeOK, "")); err != nil {
		return fail(res, "operational", err)
	}
	if !env.DryRun && !env.sessionLocked {
		lock, err := rollback.LockAside(ctx, env.Ops, s.Lock, env.LockTimeout, env.aside)
		if errors.Is(err, durable.ErrLockTimeout) {
			res.Outcome = OutcomeBusy
			res.Error = &ErrorInfo{Class: "busy", Message: fmt.Sprintf("%s stayed locked for %s: pi is writing the session; the next run will migrate it", s.Lock, env.LockTimeout)}
			if jerr := x.journal(x.event(wire.PhaseFailed, none, wire.OutcomeRecoverableError, wire.ErrorClassIOFailure)); jerr != nil {
				res.Error.Message += " (and " + jerr.Error() + ")"
			}
			return res
		}
		if err != nil {
			return x.failed(res, wire.ErrorClassIOFailure, none, fmt.Errorf("session lock: %w", err))
		}
		defer lock.Unlock()
	}
	defer func() { x.seal.Close() }() // the last one opened (openSeal)
	if r, ok := x.refreshInPlace(ctx, res); ok {
		return r
	}
	if x.damaged != "" && !res.heal {
		res.Class, res.heal = verify.ClassCorrupt, true
		res.Reason = "the sidecar is corrupt: " + x.damaged + ": rebuilt from the source, the damaged one kept in the quarantine"
	}
	env.fullPass()
	return x.full(ctx, res)
}

// full builds the session's sidecar from its whole source (a migration,
// or a refresh that cannot continue the old store): stage, verify, and
// install, or in a dry run stop once verified.
func (x *session) full(ctx context.Context, res SessionResult) SessionResult {
	env, s := x.env, x.s
	none := wire.Verification{}
	// A JSONL source fingerprints itself while it is read (issue 14: one
	// read of the source); the other formats are hashed first.
	var fp *wire.SourceFingerprint
	if s.Format != readers.FormatJSONLv3 {
		f, err := verify.Fingerprint(s.Path)
		if err != nil {
			return x.failed(res, wire.ErrorClassIOFailure, none, fmt.Errorf("fingerprint %s: %w", s.Path, err))
		}
		fp = &f
	}
	staging, done, err := x.stagingDir()
	if err != nil {
		return fail(res, "operational", err)
	}
	keep := false
	defer func() { done(keep) }()

	rec, st, res, ok := x.stage(ctx, res, staging, fp)
	if !ok {
		return res
	}
	durable.Failpoint(fpAfterStage)
	// The staging slot is free: verification (a read-back from the page
	// cache) and install overlap the next session's build (issue 14).
	env.yield()
	res.Entries, res.Bytes = st.Entries, st.Bytes
	if err := x.progress(x.event(wire.PhaseStagingCopy, none, wire.OutcomeOK, "")); err != nil {
		return fail(res, "operational", err)
	}
	uid, gid := -1, -1
	if !env.DryRun {
		if uid, gid, err = x.giveToOwner(staging); err != nil {
			return x.failed(res, wire.ErrorClassIOFailure, none, err)
		}
	}

	durable.Failpoint(fpBeforeVerify)
	passed, vrep, err := verify.VerifiedStaged(ctx, rec, staging, s.Path, verify.Options{
		SourceFormat: s.Format, MaxSegmentBytes: env.MaxSegmentBytes,
		Accept: &verify.AcceptOptions{OwnerUID: uid, OwnerGID: gid},
	})
	v := vrep.Verification
	res.Verification = &VerificationInfo{EntryCountMatch: v.EntryCountMatch, HashChainMatch: v.HashChainMatch, IndexConsistent: v.IndexConsistent}
	if err != nil {
		if errors.Is(err, verify.ErrNotVerified) {
			err = fmt.Errorf("%w: %s", err, verify.FirstFindings(vrep.Findings, 3))
			if jerr := x.journal(x.event(wire.PhaseIntegrityCheck, v, wire.OutcomeFatalError, wire.ErrorClassIntegrityMismatch)); jerr != nil {
				err = fmt.Errorf("%w (and %v)", err, jerr)
			}
			return x.failed(res, wire.ErrorClassIntegrityMismatch, v, err)
		}
		return x.refusedOrFailed(res, err)
	}
	if err := x.progress(x.event(wire.PhaseIntegrityCheck, v, wire.OutcomeOK, "")); err != nil {
		return fail(res, "operational", err)
	}
	durable.Failpoint(fpAfterVerify)
	if env.DryRun {
		res.Outcome = OutcomeChecked
		return res
	}

	return x.install(ctx, res, staging, passed, v, uid, gid, func() error { return verify.SourceUnchanged(s.Path, rec) }, st, &keep)
}

// stagingDir names the session's staging directory: beside the sidecar,
// or for a dry run in a private directory, flocked while used (the next
// pisess sweeps one a killed dry run leaves: privtmp.Sweep). done(kept)
// removes it unless installed, then the dry run's directory.
func (x *session) stagingDir() (staging string, done func(kept bool), err error) {
	env := x.env
	stagingParent := filepath.Dir(x.sidecar)
	var tmp *privtmp.Dir
	if env.DryRun {
		tmp, err = privtmp.Make("", privtmp.PrefixDryRun)
		if err != nil {
			return "", nil, fmt.Errorf("dry run: %w", err)
		}
		stagingParent = tmp.Path
	}
	staging = filepath.Join(stagingParent, filepath.Base(rollback.StagingPath(x.sidecar, x.migrationID)))
	return staging, func(kept bool) {
		if !kept {
			// A staging directory is pisess's own partial output,
			// invisible to pi by its name: nothing of the user's is in it.
			rollback.RemoveStaging(env.Ops, env.leftovers, staging, env.Log)
		}
		if tmp != nil {
			if err := tmp.Remove(); err != nil {
				env.Log.Warn().Err(err).Str("dir", tmp.Path).Msg("dry run's staging directory left: the next run removes it")
			}
		}
	}, nil
}

// stage writes the staging store from the session's source under its
// seal and returns what the read gave for the verification (rec, with the
// source's fingerprint: fp, or the one the read took). ok is false when
// res is the session's result already (refused or failed).
func (x *session) stage(ctx context.Context, res SessionResult, staging string, fp *wire.SourceFingerprint) (rec verify.Staged, st writers.StageResult, _ SessionResult, ok bool) {
	env, s := x.env, x.s
	src, err := s.OpenToMigrate()
	if err != nil {
		return rec, st, x.refusedOrFailed(res, err), false
	}
	if env.onOpened != nil {
		env.onOpened(s.Path)
	}
	env.opened()
	if id := src.Header().ID; !wire.ValidUUID(id) {
		// The reference refuses to write a manifest for it (FORMAT.md §5):
		// a reader's refusal, not an I/O failure of the staging store.
		src.Close()
		line := int64(0)
		if s.Format == readers.FormatJSONLv3 {
			line = 1 // the header
		}
		return rec, st, x.refusedOrFailed(res, &readers.RefusedError{Path: s.Path, Line: line, Class: readers.ClassBadSessionID,
			Reason: fmt.Sprintf("session id %q is not a UUID: the reference's manifest requires one (pi allows custom ids); the session stays on its JSONL", id)}), false
	}
	durable.Failpoint(fpBeforeStage)
	if !env.DryRun {
		if err := x.openSeal(staging, true); err != nil {
			src.Close()
			return rec, st, x.refusedOrFailed(res, err), false
		}
	}
	// Unsynced, sealed once before the cutover: invisible to pi until
	// then (issue 14).
	sops := env.Ops
	sops.DeferSync = true
	sopt := writers.StageOptions{MaxSegmentBytes: env.MaxSegmentBytes, Clock: env.Clock, Ops: sops, Verified: true, SourcePath: s.Path}
	if s.Format == readers.FormatSQLitev1 && !env.DryRun {
		// The sidecar this build replaces, judged by its entries once it
		// is displaced (rollback.Displaced.Database).
		sopt.PrefixEntries = store.ManifestEntries(x.sidecar)
	}
	st, err = writers.Stage(ctx, src, staging, sopt)
	res.prefixEntries, res.prefixChain, res.headerID = sopt.PrefixEntries, st.PrefixChain, src.Header().ID
	rec = verify.Staged{HeaderID: src.Header().ID, SourceFormat: src.Header().Format,
		Entries: st.Entries, ChainHash: st.ChainHash, EntryDigest: st.EntryDigest}
	if err == nil {
		err = x.sourceFingerprint(src, fp, &rec)
	}
	src.Close()
	if err != nil {
		return rec, st, x.refusedOrFailed(res, err), false
	}
	return rec, st, res, true
}

// giveToOwner returns the session file's owner, and as root gives the
// staging store to them: a root-owned sidecar makes pi's open fail
// outright.
func (x *session) giveToOwner(staging string) (uid, gid int, err error) {
	ops := x.env.Ops
	if uid, gid, err = ops.Owner(x.s.Path); err != nil {
		return -1, -1, fmt.Errorf("owner of %s: %w", x.s.Path, err)
	}
	if os.Geteuid() == 0 {
		if err := ops.ChownTree(staging, uid, gid); err != nil {
			return -1, -1, fmt.Errorf("give %s to uid %d: %w", staging, uid, err)
		}
	}
	return uid, gid, nil
}

// openSeal opens the session's seal on dir (made first when create)
// before the store's first byte, so that its syncfs reports any writeback
// error (issue 32 §4); a seal opened before (a refresh in place that gave
// way) is closed.
func (x *session) openSeal(dir string, create bool) error {
	if create {
		// Not synced: the seal makes the directory's creation durable
		// with the store, as Stage's own mkdir would.
		ops := x.env.Ops
		ops.DeferSync = true
		if err := ops.MkdirPrivate(dir); err != nil {
			if errors.Is(err, syscall.ENAMETOOLONG) {
				// The reference names its staging directory so too
				// (writers.Stage says the same).
				name := filepath.Base(dir)
				return readers.NameTooLong(x.s.Path, filepath.Base(x.sidecar), len(name), err)
			}
			return fmt.Errorf("staging %s: %w", dir, err)
		}
	}
	seal, err := x.env.Ops.OpenSeal(dir)
	if err != nil {
		return err
	}
	x.seal.Close()
	x.seal = seal
	return nil
}

// install ends every full build: the staging store's own ledger and clean
// source state (unsynced, like the store), one seal, the check that the
// source is unchanged, the cutover, the refresh record and the completed
// event. *installed is set once the staging directory is in place (the
// caller must not remove it then).
func (x *session) install(ctx context.Context, res SessionResult, staging string, passed verify.Passed, v wire.Verification,
	uid, gid int, unchanged func() error, st writers.StageResult, installed *bool) SessionResult {
	env, s := x.env, x.s
	sops := env.Ops
	sops.DeferSync = true
	// The store's own ledger holds the events of its migration, written
	// before it becomes visible (as the reference writes its completed
	// event into the staging store): the rename publishes them all.
	if err := ledger.AppendStoreEventsWith(sops, staging, x.storeEvents(v)...); err != nil {
		return x.failed(res, wire.ErrorClassIOFailure, v, fmt.Errorf("store ledger: %w", err))
	}
	fp := passed.Fingerprint()
	state := wire.SourceState{State: wire.SourceClean, SourceFingerprint: &fp}
	durable.Failpoint(fpBeforeSourceState)
	if err := sops.WriteFileInPlace(filepath.Join(staging, "source-state.json"), wire.AppendSourceState(nil, state), 0o600); err != nil {
		return x.failed(res, wire.ErrorClassIOFailure, v, fmt.Errorf("source state: %w", err))
	}
	durable.Failpoint(fpAfterSourceState)
	env.yield()
	if _, _, err := env.Ops.SealWith(x.seal, staging); err != nil {
		return x.failed(res, wire.ErrorClassIOFailure, v, fmt.Errorf("staging: %w", err))
	}
	durable.Failpoint(fpAfterStagingSeal)
	x.dropCached(staging)
	// The lock keeps pi out, but a writer that ignores it (the TypeScript
	// pi takes none) may have changed the file: never install a sidecar
	// that claims a fingerprint the source no longer has.
	if err := unchanged(); err != nil {
		return x.failed(res, wire.ErrorClassAtomicityViolation, v, err) // ErrSourceChanged's when it is that
	}
	durable.Failpoint(fpBeforeCutover)
	cut, err := rollback.Cutover(ctx, passed, rollback.CutoverSpec{
		SessionPath: s.Path, StagingDir: staging, SidecarDir: x.sidecar, Tree: s.Tree,
		CorrelationID: x.correlation, RelPath: s.Rel, OwnerUID: uid, OwnerGID: gid, OwnerSet: true,
		Ops: env.Ops, Journal: env.Journal, Clock: env.Clock, DeferQuarantineSync: true,
	})
	if err != nil {
		if _, statErr := os.Lstat(staging); statErr != nil {
			*installed = true // renamed into place: nothing to clean
		}
		res.Displaced = cut.Displaced // where the old sidecar is kept, if it was moved
		return x.failed(res, wire.ErrorClassAtomicityViolation, v, fmt.Errorf("cutover: %w", err))
	}
	*installed = true
	if x.heal {
		res.Healed = true
		x.noteHeal(cut.Displaced, res.Reason)
	}
	if s.Format == readers.FormatJSONLv3 {
		// Read under the session lock, just after the install: what the
		// next run's status of the sidecar would see.
		counters := st.Manifest.Counters
		env.Fresh.Vouch(s, fp, verify.Vouched{HeaderID: st.Manifest.SessionID,
			Entries: counters.EntriesTotal, Bytes: counters.BytesTotal}, nil, verify.SeenKeys{})
	}
	durable.Failpoint(fpAfterCutover)
	x.remember(fp, st)
	res.Displaced, res.syncDirs = cut.Displaced, cut.SyncDirs
	if cut.Warning != "" {
		res.Notes = append(res.Notes, cut.Warning)
	}
	if err := x.progress(x.event(wire.PhaseCompleted, v, wire.OutcomeOK, "")); err != nil {
		// The journal holds the cutover's intent without its outcome: the
		// next run reads it as unfinished, and a rollback of this run
		// cannot tell what it did. Not a session to report done.
		return x.failed(res, wire.ErrorClassIOFailure, v, fmt.Errorf("the sidecar is installed, but %w", err))
	}
	durable.Failpoint(fpAfterCompleted)
	res.Outcome = OutcomeDone
	return res
}

// noteHeal journals that the run rebuilt a damaged sidecar (a repair, as
// fsck --repair's rebuild is one), the damaged one at displaced.
func (x *session) noteHeal(displaced, why string) {
	if x.env.Journal == nil {
		return
	}
	err := x.env.Journal.AppendUnsynced(ledger.NoteRecord(ledger.Note{CorrelationID: x.correlation, At: wire.FormatTimestamp(x.env.now()),
		Session: x.s.Path, Kind: ledger.NoteRepair, Path: x.sidecar, QuarantinePath: displaced,
		Detail: "rebuilt from the source: " + why}))
	if err != nil {
		x.env.Log.Warn().Str("session", x.s.Path).Err(err).Msg("repair note not journaled")
	}
}

// dropCached gives back the cached pages of the sealed staging store's
// segments and index (durable.Ops.DropCached): verification has read them
// back, and the next read is pi's, later. Advice only: a failure is
// logged and changes nothing.
func (x *session) dropCached(staging string) {
	for _, dir := range []string{store.SegmentsPath(staging), store.IndexDirPath(staging)} {
		if err := x.env.Ops.DropCached(dir); err != nil {
			x.env.Log.Debug().Str("session", x.s.Path).Err(err).Msg("cached pages not dropped")
		}
	}
}

// storeEvents are the events of the session's migration that its store's
// own ledger holds.
func (x *session) storeEvents(v wire.Verification) []wire.MigrationEvent {
	var evs []wire.MigrationEvent
	for _, ph := range []wire.Phase{wire.PhasePlanned, wire.PhaseStagingCopy, wire.PhaseIntegrityCheck, wire.PhaseCutoverCommit, wire.PhaseCompleted} {
		ev := x.event(ph, v, wire.OutcomeOK, "")
		if ph == wire.PhasePlanned || ph == wire.PhaseStagingCopy {
			ev.Verification = wire.Verification{}
		}
		evs = append(evs, ev)
	}
	return evs
}

// sourceFingerprint fills rec's fingerprint: the one a JSONL source took
// while it was read, or fp, taken before the read.
func (x *session) sourceFingerprint(src readers.Source, fp *wire.SourceFingerprint, rec *verify.Staged) error {
	if fp != nil {
		rec.Fingerprint = *fp
		return nil
	}
	js, ok := src.(*jsonl.Source)
	if !ok {
		return fmt.Errorf("%s: a %T source cannot fingerprint itself", x.s.Path, src)
	}
	f, ok := verify.FingerprintFrom(js.FileInfo(), js.Size(), js.SHA256())
	if !ok {
		return fmt.Errorf("fingerprint %s: %w", x.s.Path, verify.ErrSourceChanged)
	}
	rec.Fingerprint, rec.Info = f, js.FileInfo()
	x.prefix = js.Prefix()
	return nil
}

// refusedOrFailed turns the reference's verdict on the session's bytes
// into a refused result (journaled as a failed event) and anything else
// into a failure of this run, tried again by the next and never
// remembered (issue 32 §2): an I/O or resource error, a lock another
// process holds (readers.AsVerdict), a source that changed while read.
func (x *session) refusedOrFailed(res SessionResult, err error) SessionResult {
	if r := readers.AsVerdict(err); r != nil && !errors.Is(err, readers.ErrSourceChanged) {
		res.Outcome = OutcomeRefused
		res.Action = PlanRefuse
		res.Reason = r.Reason
		res.Error = refusedInfo(r, r.Reason)
		if jerr := x.journal(x.event(wire.PhaseFailed, wire.Verification{}, wire.OutcomeFatalError, wire.ErrorClassIntegrityMismatch)); jerr != nil {
			// The refusal stands; the journal that could not say so is a
			// failure of the run.
			return fail(res, string(wire.ErrorClassIOFailure), fmt.Errorf("%s (and %w)", r.Error(), jerr))
		}
		return res
	}
	return x.failed(res, wire.ErrorClassIOFailure, wire.Verification{}, err)
}
