package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/google/uuid"

	"pisess/commands/tune"
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
	"pisess/writers/upgrade"
	"pisess/writers/wire"
)

// defaultJobs is --jobs when not given: the CPUs the process may use
// (tune.CPUs: a container's CPU quota, not the host's CPUs).
func defaultJobs() int { return tune.CPUs() }

// plan is what migrate intends for one session, and why.
type plan struct {
	action PlanAction
	reason string
	notes  []string
	// class is the sidecar's status class when one exists.
	class verify.Class
	// refusal is the planned refusal when discovery's Refusal is nil (a
	// header version other than 3), so that the report names its line.
	refusal *readers.RefusedError
	// failure, when set, is the session's failure found while planning
	// (its status could not be taken): nothing is read or written.
	failure *ErrorInfo
	// heal: the refresh rebuilds a damaged sidecar (class corrupt or
	// partial) from the source, keeping the damaged one in the quarantine.
	heal bool
	// busy: the session's lock is held with staging beside it (pi
	// rebuilding its sidecar): nothing is done, the result is busy.
	busy bool
}

const sqliteNote = "pi's resume reads sidecars of JSONL sessions only: this sidecar is for pisess and future readers"

// planSession decides a session's action from discovery and the
// sidecar's status, as deep as pi's open of it (verify.StatusOpen), or the
// tree's fresh cache (nil: none) where it vouches for the sidecar.
func planSession(s discover.Session, force bool, fc *verify.FreshCache) plan {
	var p plan
	if s.Format == readers.FormatSQLitev1 {
		p.notes = append(p.notes, sqliteNote)
	}
	switch {
	case s.Refusal != nil:
		p.action, p.reason = PlanRefuse, s.Refusal.Reason
		return p
	case s.ReadError != nil:
		return unreadHeader(s, p, s.ReadError)
	case s.Format == readers.FormatJSONLv3 && s.Version != 3:
		r := legacyRefusal(s)
		if r.Transient() {
			return unreadHeader(s, p, r)
		}
		p.action, p.refusal, p.reason = PlanRefuse, r, r.Reason
		return p
	case s.SidecarIsSymlink:
		p.action, p.reason = PlanNeedsRepair, "the sidecar is a symlink: pi can never open it; fsck --repair quarantines it"
		if force {
			p.action, p.reason = PlanRefresh, "the sidecar is a symlink; rebuilt from the source (--force)"
		}
		return p
	}
	leftovers := len(s.Staging) + len(s.Backups)
	if leftovers > 0 && !force {
		// The reference stages its own rebuild of a sidecar under the
		// same names, holding the session lock: staging beside a held
		// lock belongs to a live writer, never leftovers (issue 34 §1).
		if held, err := durable.OS.LockHeld(s.Lock); err == nil && held {
			p.action, p.busy = PlanSkip, true
			p.reason = fmt.Sprintf("%s is held and %d staging/backup director(ies) are beside the session: pi is writing its sidecar; the next run looks again", s.Lock, leftovers)
			return p
		}
	}
	if leftovers > 0 {
		// An interrupted run left these: fsck --repair decides whether a
		// backup goes back or to the quarantine. Building over them would
		// hide them (issue 7: leftovers mean needs repair).
		if !force {
			p.action = PlanNeedsRepair
			p.reason = fmt.Sprintf("%d leftover staging/backup director(ies) of an interrupted run: pisess fsck --repair restores or quarantines them (or --force rebuilds from the source)", leftovers)
			return p
		}
		p.notes = append(p.notes, fmt.Sprintf("%d leftover staging/backup director(ies) left for pisess fsck --repair", leftovers))
	}
	if s.Sidecar == "" {
		p.action, p.reason = PlanMigrate, "no sidecar"
		return p
	}
	st, err := fc.Status(s)
	if err != nil {
		// A status that cannot be taken (an lstat or open that failed)
		// says nothing about the sidecar: a failure of this run, tried
		// again by the next, never advice to repair (issue 32 §2).
		p.action, p.reason = PlanRefresh, "the sidecar's status could not be read"
		p.failure = &ErrorInfo{Class: string(wire.ErrorClassIOFailure), Message: "status: " + err.Error()}
		if force {
			p.reason, p.failure = "status could not be read; rebuilt from the source (--force)", nil
		}
		return p
	}
	p.class = st.Class
	first := ""
	if len(st.Findings) > 0 {
		first = ": " + st.Findings[0].Detail
	}
	switch st.Class {
	case verify.ClassMigrated:
		p.action, p.reason = PlanSkip, "the sidecar is fresh"
		if len(st.Findings) > 0 {
			// Fresh, and pi opens it, but broken where pi's next change
			// to it would fail (a mutation lock or ledger of the wrong
			// type, an empty ledger): not a sidecar to skip.
			p.action, p.reason = PlanNeedsRepair, "the sidecar is fresh"+first+": pisess fsck --repair rebuilds it"
		}
		if force {
			p.action, p.reason = PlanRefresh, "the sidecar is fresh; rebuilt anyway (--force)"
		}
	case verify.ClassStale:
		p.action, p.reason = PlanRefresh, "the sidecar is stale (the session changed since it was built)"
		if st.Freshness != nil && st.Freshness.Reason != "" {
			p.reason = "the sidecar is stale: " + st.Freshness.Reason
		}
	case verify.ClassUnmigrated:
		p.action, p.reason = PlanMigrate, "no sidecar"
	case verify.ClassCorrupt:
		if onlyInvalidSourceState(st.Findings) {
			// pi's resume reads an invalid source-state.json as stale
			// (FORMAT.md §8), and the Rust pi rewrites it in place under
			// the session lock, which this plan does not hold: caught
			// mid-write, it is empty. A refresh rebuilds it from the
			// source, as the finding's repair says.
			p.action, p.reason = PlanRefresh, "the sidecar is stale"+first
			break
		}
		fallthrough
	default: // corrupt, partial
		switch {
		case force:
			p.action, p.reason = PlanRefresh, fmt.Sprintf("the sidecar is %s%s; rebuilt from the source (--force)", st.Class, first)
		case verify.Rebuildable(st.Findings):
			// Damage a rebuild from the source mends (issue 34 §2): the
			// run heals it as it heals a killed run's leftovers, and
			// keeps the damaged sidecar in its quarantine (plan.class
			// tells the discarder so).
			p.action, p.heal = PlanRefresh, true
			p.reason = fmt.Sprintf("the sidecar is %s%s: rebuilt from the source, the damaged one kept in the quarantine", st.Class, first)
			p.notes = append(p.notes, "a repair: what pisess fsck --repair does for this sidecar, done by this run")
		default:
			p.action, p.reason = PlanNeedsRepair, fmt.Sprintf("the sidecar is %s%s: pisess fsck --repair repairs it", st.Class, first)
		}
	}
	return p
}

// unreadHeader plans a session whose header could not be read (EACCES,
// EMFILE, EIO: a readers.Class.Transient error): its version is unknown,
// so no refusal can be read from it, and nothing is known of its sidecar's
// freshness. It is a failure of this run, counted, and read again by the
// next (issue 32 §2), never a refusal.
func unreadHeader(s discover.Session, p plan, r *readers.RefusedError) plan {
	p.action, p.reason = PlanMigrate, "its header could not be read"
	if s.Sidecar != "" {
		p.action = PlanRefresh
	}
	p.failure = &ErrorInfo{Class: string(wire.ErrorClassIOFailure), Message: r.Error(), Line: r.Line}
	return p
}

// onlyInvalidSourceState reports whether the only findings are an invalid
// source-state.json: a store otherwise sound.
func onlyInvalidSourceState(list []verify.Finding) bool {
	for _, f := range list {
		if f.Code != verify.CodeSourceStateInvalid {
			return false
		}
	}
	return len(list) > 0
}

// planned is the result of a session before anything is done.
func planned(s discover.Session, p plan) SessionResult {
	return SessionResult{Path: s.Path, SourceFormat: string(s.Format), Action: p.action, Class: p.class, Reason: p.reason,
		SourceBytes: s.Size, Notes: p.notes, Sidecar: discover.SidecarPath(s.Path), heal: p.heal}
}

// runSession carries out one session's plan.
func runSession(ctx context.Context, env Env, s discover.Session, p plan, correlationID string) SessionResult {
	if res, ok := decided(s, p); ok {
		return res
	}
	return build(ctx, env, s, planned(s, p), correlationID)
}

// runs reports whether a session planned so is read or written: its plan
// is not its result (decided).
func (p plan) runs() bool {
	switch p.action {
	case PlanSkip, PlanNeedsRepair, PlanRefuse:
		return false
	}
	return p.failure == nil
}

// decided returns the result of a session whose plan is its result (skip,
// needs repair, refuse): nothing of it is read or written.
func decided(s discover.Session, p plan) (SessionResult, bool) {
	if p.runs() {
		return SessionResult{}, false
	}
	res := planned(s, p)
	switch {
	case p.failure != nil:
		res.Outcome, res.Error = OutcomeFailed, p.failure
		return res, true
	}
	switch p.action {
	case PlanSkip:
		res.Outcome = OutcomeSkipped
		if p.busy {
			res.Outcome, res.Error = OutcomeBusy, &ErrorInfo{Class: "busy", Message: p.reason}
		}
	case PlanNeedsRepair:
		res.Outcome = OutcomeLeft
	case PlanRefuse:
		res.Outcome = OutcomeRefused
		r := s.Refusal
		if r == nil {
			r = p.refusal
		}
		res.Error = refusedInfo(r, p.reason)
	}
	return res, true
}

// RebuildSidecar builds the sidecar of s from its source and installs it
// (a refresh), through the same pipeline as migrate: session lock, staging,
// verification, clean source state, cutover keeping the displaced store in
// the quarantine, every phase in the journal. fsck --repair uses it for
// stale and corrupt sidecars. A nil env.Journal is opened for s.Tree.
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
	// prefix is the PrefixHash of the source bytes the sidecar is built
	// from (JSONL), for the refresh record.
	prefix normalize.PrefixHash
	// verifiedNames are the sidecar's entries its verification walked
	// (a refresh in place's), for the fresh cache, and verifiedKeys
	// their metadata when it looked at each (verify.Report.Keys).
	verifiedNames []string
	verifiedKeys  []discover.FileKey
	// seal is the session's durable.Seal, opened before its first write
	// (nil in a dry run, which makes nothing durable).
	seal *durable.Seal
	// heal: the sidecar this build replaces is damaged (plan.heal, or
	// damaged, what a refresh in place found wrong in it).
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

// progress appends events that no recovery reads (planned, staging_copy,
// integrity_check, completed) without their own fsync: the staging seal,
// the cutover's synced records or the end of the run make them durable
// (ledger.Journal.AppendAllUnsynced). Several are written at once.
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

// ClassSourceChanged is the report's error class of a session whose
// source changed while the run read it (readers.ErrSourceChanged).
const ClassSourceChanged = "source_changed"

// failed records the failure and returns the result. A source that
// changed while it was read is one cause wherever the run noticed it
// (reading, verifying, before the cutover: issue 34 §3): one class, one
// message, journaled as io_failure with a recoverable outcome ("run
// again"), and never a refusal the refusal cache would keep.
func (x *session) failed(res SessionResult, class wire.ErrorClass, v wire.Verification, err error) SessionResult {
	if errors.Is(err, readers.ErrSourceChanged) {
		if jerr := x.journal(x.event(wire.PhaseFailed, v, wire.OutcomeRecoverableError, wire.ErrorClassIOFailure)); jerr != nil {
			x.env.Log.Warn().Str("session", x.s.Path).Err(jerr).Msg("failure not journaled")
		}
		x.env.Log.Warn().Str("session", x.s.Path).Err(err).Msg("source changed while it was read")
		return fail(res, ClassSourceChanged, fmt.Errorf("%s changed while pisess read it (a writer that does not take pi's session lock, such as the TypeScript pi, wrote it): the next run migrates it", x.s.Path))
	}
	canceled := errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
	if canceled {
		// An interrupt is not damage: the contract has no "cancelled"
		// class, and io_failure with a recoverable outcome is the one
		// that says "the run stopped, run it again" (doc.go:
		// Interrupts); the session report says canceled.
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
		lock, err := lockAside(ctx, env.Ops, s.Lock, env.LockTimeout, env.aside)
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
	stagingParent := filepath.Dir(x.sidecar)
	if env.DryRun {
		// A private directory of the run's own, flocked while it is used:
		// one a killed dry run leaves is removed by the next pisess
		// (privtmp.Sweep; issue 32 §3).
		tmp, err := privtmp.Make("", privtmp.PrefixDryRun)
		if err != nil {
			return fail(res, "operational", fmt.Errorf("dry run: %w", err))
		}
		defer func() {
			if err := tmp.Remove(); err != nil {
				env.Log.Warn().Err(err).Str("dir", tmp.Path).Msg("dry run's staging directory left: the next run removes it")
			}
		}()
		stagingParent = tmp.Path
	}
	staging := filepath.Join(stagingParent, filepath.Base(rollback.StagingPath(x.sidecar, x.migrationID)))
	keep := false
	defer func() {
		if !keep {
			// A staging directory is pisess's own partial output,
			// invisible to pi by its name: nothing of the user's is in it.
			env.removeStaging(staging)
		}
	}()

	src, err := s.OpenToMigrate()
	if err != nil {
		return x.refusedOrFailed(res, err)
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
		return x.refusedOrFailed(res, &readers.RefusedError{Path: s.Path, Line: line, Class: readers.ClassBadSessionID,
			Reason: fmt.Sprintf("session id %q is not a UUID: the reference's manifest requires one (pi allows custom ids); the session stays on its JSONL", id)})
	}
	durable.Failpoint(fpBeforeStage)
	if !env.DryRun {
		if err := x.openSeal(staging, true); err != nil {
			src.Close()
			return x.refusedOrFailed(res, err)
		}
	}
	// The staging store is written without a single fsync and sealed
	// once, after its ledger and source state, before the cutover: it is
	// invisible to pi until then (issue 14).
	sops := env.Ops
	sops.DeferSync = true
	sopt := writers.StageOptions{MaxSegmentBytes: env.MaxSegmentBytes, Clock: env.Clock, Ops: sops, Verified: true, SourcePath: s.Path}
	if s.Format == readers.FormatSQLitev1 && !env.DryRun {
		// The sidecar this build replaces, judged by its entries once it
		// is displaced (rollback.Displaced.Database).
		sopt.PrefixEntries = sidecarEntries(x.sidecar)
	}
	st, err := writers.Stage(ctx, src, staging, sopt)
	res.prefixEntries, res.prefixChain, res.headerID = sopt.PrefixEntries, st.PrefixChain, src.Header().ID
	rec := verify.Staged{HeaderID: src.Header().ID, SourceFormat: src.Header().Format,
		Entries: st.Entries, ChainHash: st.ChainHash, EntryDigest: st.EntryDigest}
	if err == nil {
		err = x.sourceFingerprint(src, fp, &rec)
	}
	src.Close()
	if err != nil {
		return x.refusedOrFailed(res, err)
	}
	durable.Failpoint(fpAfterStage)
	// The staging slot is free once the store is written: its verification
	// (a read-back of what was just written, from the page cache) and its
	// install overlap the next session's build (issue 14).
	env.yield()
	res.Entries, res.Bytes = st.Entries, st.Bytes
	if err := x.progress(x.event(wire.PhaseStagingCopy, none, wire.OutcomeOK, "")); err != nil {
		return fail(res, "operational", err)
	}
	uid, gid := -1, -1
	if !env.DryRun {
		if uid, gid, err = env.Ops.Owner(s.Path); err != nil {
			return x.failed(res, wire.ErrorClassIOFailure, none, fmt.Errorf("owner of %s: %w", s.Path, err))
		}
		if os.Geteuid() == 0 {
			// A root-owned sidecar makes pi's open fail outright.
			if err := env.Ops.ChownTree(staging, uid, gid); err != nil {
				return x.failed(res, wire.ErrorClassIOFailure, none, fmt.Errorf("give %s to uid %d: %w", staging, uid, err))
			}
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
			err = fmt.Errorf("%w: %s", err, firstFindings(vrep.Findings, 3))
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

	return x.install(ctx, res, staging, passed, v, uid, gid, func() error { return sourceUnchanged(s.Path, rec) }, st, &keep)
}

// openSeal opens the session's seal (durable.Seal) on dir, the store
// about to be written (made first, empty, when create), before the first
// byte of it is written, so that the seal's syncfs reports the writeback
// error of any of them, whoever saw it first (issue 32 §4). A seal opened
// before (by a refresh in place that gave way to a full rebuild) is
// closed.
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

// install is the end of every full build: the staging
// store's own ledger and clean source state (written, like the store,
// without fsyncs), one seal, the check that the source is still what was
// read (unchanged), the cutover, the refresh record and the completed
// event. installed is set once the staging directory has been renamed
// into place (the caller must not remove it then).
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

// sidecarEntries is the entry count the manifest of the sidecar at dir
// states, 0 when there is none to read.
func sidecarEntries(dir string) uint64 {
	st, err := store.Open(dir, store.ReadOptions{OnceManifest: true})
	if err != nil {
		return 0
	}
	m, err := st.Manifest()
	if err != nil {
		return 0
	}
	return m.Counters.EntriesTotal
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

// sourceUnchanged checks, just before the cutover, that the source is still
// what the sidecar will claim: by its status when the read took it (any
// write moves the change time), else by hashing it again.
func sourceUnchanged(path string, rec verify.Staged) error {
	stale := &readers.SourceChangedError{Path: path, Detail: "it moved between the read and the cutover"}
	if rec.Info != nil {
		now, err := os.Lstat(path)
		if err != nil {
			return fmt.Errorf("%w (%v)", stale, err)
		}
		if !verify.SameStatus(rec.Info, now) {
			return stale
		}
		return nil
	}
	now, err := verify.Fingerprint(path)
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

// refusedOrFailed turns the reference's verdict on the session's bytes
// into a refused result (recorded as a failed event: the run cannot
// migrate the session) and anything else into a failure of this run: an
// I/O or resource error, or a lock another process holds, even when a
// reader reported it as a *readers.RefusedError (readers.AsVerdict), is
// counted and tried again by the next run, never remembered (issue 32 §2);
// so is a source that changed while it was read (readers.ErrSourceChanged,
// issue 34 §3).
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

func firstFindings(list []verify.Finding, n int) string {
	var parts []string
	for i, f := range list {
		if i == n {
			parts = append(parts, fmt.Sprintf("and %d more", len(list)-n))
			break
		}
		parts = append(parts, f.String())
	}
	return strings.Join(parts, "; ")
}

// legacyRefusal says why the reference will not migrate a JSONL session
// whose header is not a plain version 3 (or returns the transient error
// that kept it from reading the header), and whether `pisess upgrade` can
// help: only when pi itself reads the file as version 1 or 2 (pi's rule:
// the last "version" member, `version ?? 1`, below 3) does pi rewrite it,
// and so can the upgrade. The reason is the reference's own (a duplicate
// member, a version it does not know), not a guess from the first member.
func legacyRefusal(s discover.Session) *readers.RefusedError {
	class, reason := readers.ClassUnsupportedVer, fmt.Sprintf("header version %d: the reference migrates version 3 only", s.Version)
	if s.Version == 0 {
		reason = "no header version (a version 1 file): the reference migrates version 3 only"
	}
	if _, _, err := jsonl.Sniff(s.Path); err != nil {
		if r := readers.AsRefused(err); r != nil {
			if r.Transient() {
				return r // no verdict: the header could not be read now
			}
			class, reason = r.Class, r.Reason
		}
	}
	switch v, err := upgrade.Sniff(s.Path); {
	case err != nil:
		reason += "; pi cannot read its header either (" + err.Error() + ")"
	case v == 1 || v == 2:
		reason += fmt.Sprintf("; pi reads it as version %d and rewrites it as version 3 when it opens it: `pisess upgrade %s` does the same now", v, s.Path)
	default:
		reason += "; pi reads it as a current file and never rewrites it, so `pisess upgrade` cannot help: only a new session (or an edit of the header) can"
	}
	return &readers.RefusedError{Path: s.Path, Line: 1, Class: class, Reason: reason}
}
