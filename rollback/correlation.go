package rollback

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"pisess/ledger"
	"pisess/writers/durable"
	"pisess/writers/store"
	"pisess/writers/wire"
)

// Action is what a rollback did with one session.
type Action string

const (
	// ActionRolledBack: this call changed the session back (or recorded
	// steps an interrupted earlier call had done).
	ActionRolledBack Action = "rolled-back"
	// ActionAlreadyRolledBack: every step was done and recorded before.
	ActionAlreadyRolledBack Action = "already-rolled-back"
	// ActionNothingInstalled: the run recorded a cutover of the session but
	// stopped before installing anything; there is nothing to undo.
	ActionNothingInstalled Action = "nothing-installed"
	// ActionWouldRollBack: a dry run found steps to do.
	ActionWouldRollBack Action = "would-roll-back"
	// ActionRefused: the session is left as it is; Error says why
	// (ErrSourceChanged, ErrSuperseded, ErrMissing).
	ActionRefused Action = "refused"
	// ActionBusy: the session lock stayed held for the whole timeout.
	ActionBusy Action = "busy"
	// ActionFailed: a step failed; Error says which. What was done before
	// it is recorded; a re-run continues from there.
	ActionFailed Action = "failed"
)

// SessionResult is one session of a rollback by correlation id.
type SessionResult struct {
	// Session is the session file, as the journal names it.
	Session string
	Action  Action
	// Detail says what was (or would be) done, step by step, and anything
	// the user must know: a stale sidecar, where bytes were kept.
	Detail string
	// Changed is true when this call changed the tree or the journal.
	Changed bool
	// Stale is true when the sidecar the run installed had gone stale (pi
	// wrote the session after the run): it is rolled back all the same,
	// since the source holds every entry.
	Stale bool
	// Error is nil unless Action is refused, busy or failed.
	Error error
}

// Report is the result of ByCorrelation.
type Report struct {
	CorrelationID string
	DryRun        bool
	Sessions      []SessionResult
	// Forged are the run's journal lines refused as forged or corrupt
	// (ledger.ErrForged): nothing they name was looked at or touched.
	Forged []ledger.BadLine
}

// Problems counts the sessions left not rolled back (refused, busy,
// failed) and the forged records: the command exits non-zero when it is
// not 0.
func (r Report) Problems() int {
	n := len(r.Forged)
	for _, s := range r.Sessions {
		if s.Error != nil {
			n++
		}
	}
	return n
}

// ByCorrelation rolls back everything the run correlationID did to the
// sessions of tree, as the tree journal records it:
//
//   - a sidecar the run installed (cutover_commit) is moved into
//     <tree>/.pisess/quarantine/<id>/<session>.rolled-back-sidecar, also
//     when it has gone stale since (the source holds every entry; pi reads
//     the source when there is no sidecar);
//   - a sidecar the run displaced (a refresh) is put back, from the
//     quarantine or, after an interrupted cutover, from its backup sibling;
//   - a source the run upgraded (an upgraded note) is restored byte for
//     byte from the quarantine; the upgraded file stays in the quarantine
//     (<session>.rolled-back-source).
//
// Each session is handled under its session lock, with its source hashed
// before and after (it must be what the run left it, and, once restored,
// the original). Each step is checked before it is done, so a call killed
// at any point and made again finishes the work, and one more call changes
// nothing; each step's receipt is a rollback event (same correlation id,
// sourcePath the session) and a quarantined or restored note in the
// journal, appended once.
//
// A session whose upgraded source pi has changed since (entries appended
// after the upgrade, or a rewrite) is refused and left exactly as it is,
// sidecar included: restoring the original would lose the new entries. A
// copy of the current file goes to the quarantine (<session>.changed-source)
// and the result says which bytes are new (ErrSourceChanged). A session
// whose sidecar was replaced after the run is refused too (ErrSuperseded).
//
// A malformed id is ErrBadCorrelationID; an id the journal does not know is
// ErrUnknownCorrelation. Other errors mean the rollback could not run;
// per-session problems are in the report. The caller holds the tree lock.
func ByCorrelation(ctx context.Context, tree, correlationID string, opt Options) (Report, error) {
	rep := Report{CorrelationID: correlationID, DryRun: opt.DryRun}
	if !wire.ValidCorrelationID(correlationID) {
		return rep, fmt.Errorf("rollback %q: %w: it must match ^[A-Za-z0-9._:-]{8,128}$", correlationID, ErrBadCorrelationID)
	}
	j, err := ledger.OpenJournalWith(opt.Ops, tree)
	if err != nil {
		return rep, fmt.Errorf("rollback %s: %w", correlationID, err)
	}
	defer j.Close()
	recs, forged, err := j.RunRecords(correlationID)
	if err != nil {
		return rep, fmt.Errorf("rollback %s: %w", correlationID, err)
	}
	rep.Forged = forged
	if len(recs) == 0 && len(forged) == 0 {
		return rep, fmt.Errorf("rollback %s: %w: the journal %s has no record of it", correlationID, ErrUnknownCorrelation, j.Path())
	}
	if !opt.DryRun {
		// The rollback's records carry the id of the run it undoes: its
		// own run records bracket them, so that `pisess runs` keeps the
		// run's command, times and counts apart from its rollback (issue
		// 34 §3). Written with its first record: a rollback with nothing
		// left to do writes nothing.
		j.BeginRun(ledger.RunRecord{CorrelationID: correlationID, At: opt.now(), Phase: ledger.RunStart,
			Command: "rollback", Of: correlationID, PID: os.Getpid()}, opt.Hold)
		defer func() { endRollback(j, &rep, opt, ctx.Err() != nil) }()
	}
	r := &roller{tree: tree, cid: correlationID, opt: opt, ops: opt.Ops, journal: j, migrationID: opt.migrationID()}
	// Each session lock is tried once first; the sessions pi holds are
	// waited for (up to the lock timeout each) after all the others, which
	// they would otherwise hold up in turn.
	sessions := collectSessions(tree, recs)
	var held []int
	for i, s := range sessions {
		if err := ctx.Err(); err != nil {
			return rep, fmt.Errorf("rollback %s: %w", correlationID, err)
		}
		res := r.session(ctx, s, 0)
		if res.Action == ActionBusy {
			held = append(held, i)
		}
		rep.Sessions = append(rep.Sessions, res)
	}
	for _, i := range held {
		if err := ctx.Err(); err != nil {
			return rep, fmt.Errorf("rollback %s: %w", correlationID, err)
		}
		rep.Sessions[i] = r.session(ctx, sessions[i], opt.lockTimeout())
	}
	return rep, nil
}

// endRollback appends the rollback's end record, with its counts by
// action, when it wrote anything, and syncs the journal.
func endRollback(j *ledger.Journal, rep *Report, opt Options, interrupted bool) {
	totals := map[string]int64{"sessions": int64(len(rep.Sessions))}
	for _, s := range rep.Sessions {
		totals[string(s.Action)]++
	}
	end := ledger.RunRecord{CorrelationID: rep.CorrelationID, At: opt.now(), Phase: ledger.RunEnd, Command: "rollback",
		Of: rep.CorrelationID, Totals: totals, Interrupted: interrupted}
	if err := j.EndRun(end, false); err == nil {
		_ = j.Sync() // the records before it were each synced
	}
}

// sessionRun is what the journal says one run did to one session.
type sessionRun struct {
	session   string
	rel       string
	sidecar   string
	cutover   bool         // a cutover_commit event
	completed bool         // a completed/ok event: the cutover committed
	installed *ledger.Note // the installed note (staging identity)
	displaced *ledger.Note
	// discarded: the run did not keep the displaced sidecar (issue 12).
	discarded *ledger.Note
	upgraded  *ledger.Note
	// undone is the restored note an upgrade writes when it found the
	// file changed by another writer and put that version back: the
	// upgrade did not take.
	undone   *ledger.Note
	recorded map[string]bool // receipts already in the journal
	// inconsistent lists records of the session that contradict what
	// pisess writes (a sidecar that is not the session's, an upgrade
	// without its digests): the session is refused, nothing is touched.
	inconsistent []string
}

// checkConsistent records why rec, one of s's records, cannot be one that
// pisess wrote for s.
func (s *sessionRun) checkConsistent(rec ledger.Record) {
	bad := func(format string, args ...any) {
		s.inconsistent = append(s.inconsistent, fmt.Sprintf("journal line %d: ", rec.Line)+fmt.Sprintf(format, args...))
	}
	if ext := filepath.Ext(s.session); ext != ".jsonl" && ext != ".sqlite" {
		bad("%s is not a session file (.jsonl or .sqlite)", s.session)
	}
	if ev := rec.Event; ev != nil && ev.Phase == wire.PhaseCutoverCommit && ev.TargetPath != SidecarPath(ev.SourcePath) {
		bad("cutover_commit targets %s, which is not the sidecar of %s", ev.TargetPath, ev.SourcePath)
	}
	n := rec.Note
	if n == nil {
		return
	}
	switch n.Kind {
	case ledger.NoteInstalled:
		if n.Path != "" && n.Path != SidecarPath(n.Session) {
			bad("installed note names %s, which is not the sidecar of %s", n.Path, n.Session)
		}
	case ledger.NoteUpgraded:
		if n.Path != "" && n.Path != n.Session {
			bad("upgraded note names %s, which is not the session %s", n.Path, n.Session)
		}
		if n.QuarantinePath == "" || n.SHA256 == "" || n.NewSHA256 == "" {
			bad("upgraded note lacks its quarantined original or digests")
		}
	case ledger.NoteDisplaced:
		if n.QuarantinePath == "" {
			bad("displaced note names no quarantine entry")
		}
	}
}

func collectSessions(tree string, recs []ledger.Record) []*sessionRun {
	var order []*sessionRun
	byPath := map[string]*sessionRun{}
	get := func(session string) *sessionRun {
		key := filepath.Clean(session)
		if s := byPath[key]; s != nil {
			return s
		}
		abs := key
		if !filepath.IsAbs(abs) {
			abs = filepath.Join(tree, abs)
		}
		rel, err := filepath.Rel(tree, abs)
		if err != nil {
			rel = session
		}
		s := &sessionRun{session: session, rel: rel, sidecar: SidecarPath(abs), recorded: map[string]bool{}}
		byPath[key] = s
		order = append(order, s)
		return s
	}
	for _, rec := range recs {
		if link, found := ledger.SymlinkOnTheWay(tree, rec); found {
			get(rec.Session()).inconsistent = append(get(rec.Session()).inconsistent,
				fmt.Sprintf("journal line %d names a path through the symlink %s (pisess never follows one in a tree)", rec.Line, link))
		}
		if rec.Event != nil && rec.Event.Phase == wire.PhaseCutoverCommit || rec.Note != nil &&
			(rec.Note.Kind == ledger.NoteInstalled || rec.Note.Kind == ledger.NoteUpgraded || rec.Note.Kind == ledger.NoteDisplaced) {
			get(rec.Session()).checkConsistent(rec)
		}
		switch {
		case rec.Event != nil:
			ev := rec.Event
			switch ev.Phase {
			case wire.PhaseCutoverCommit:
				s := get(ev.SourcePath)
				s.cutover = true
				s.sidecar = filepath.Clean(ev.TargetPath)
			case wire.PhaseCompleted:
				if ev.Outcome == wire.OutcomeOK {
					if s := byPath[filepath.Clean(ev.SourcePath)]; s != nil {
						s.completed = true
					}
				}
			case wire.PhaseRollback:
				if s := byPath[filepath.Clean(ev.SourcePath)]; s != nil {
					s.recorded[eventKey(ev.TargetPath, ev.Outcome)] = true
				}
			}
		case rec.Note != nil:
			n := rec.Note
			switch n.Kind {
			case ledger.NoteInstalled:
				s := get(n.Session)
				s.installed = n
				if n.Path != "" {
					s.sidecar = filepath.Clean(n.Path)
				}
			case ledger.NoteDisplaced:
				get(n.Session).displaced = n
			case ledger.NoteDiscarded:
				if s := byPath[filepath.Clean(n.Session)]; s != nil {
					s.discarded = n
				}
			case ledger.NoteUpgraded:
				get(n.Session).upgraded = n
			case ledger.NoteQuarantined, ledger.NoteRestored:
				if s := byPath[filepath.Clean(n.Session)]; s != nil {
					s.recorded[noteKey(n.Kind, n.Path, n.QuarantinePath)] = true
					if n.Kind == ledger.NoteRestored && n.NewSHA256 != "" && s.upgraded != nil &&
						n.NewSHA256 == s.upgraded.NewSHA256 && n.QuarantinePath == s.upgraded.QuarantinePath {
						s.undone = n
					}
				}
			}
		}
	}
	var out []*sessionRun
	for _, s := range order {
		if s.cutover || s.installed != nil || s.upgraded != nil || s.displaced != nil {
			out = append(out, s)
		}
	}
	return out
}

func eventKey(target string, outcome wire.Outcome) string {
	return "event\x00" + filepath.Clean(target) + "\x00" + string(outcome)
}

func noteKey(kind ledger.NoteKind, path, q string) string {
	return "note\x00" + string(kind) + "\x00" + filepath.Clean(path) + "\x00" + filepath.Clean(q)
}

// roller rolls back the sessions of one run.
type roller struct {
	tree        string
	cid         string
	opt         Options
	ops         durable.Ops
	journal     *ledger.Journal
	migrationID string
}

// sessionJob is one session's rollback in progress.
type sessionJob struct {
	*sessionRun
	r        *roller
	dry      bool
	uid, gid int
	steps    []string // what was done, or would be
	changed  bool
	acted    bool // a step changed the tree in this call
	already  bool // a step had been done before
	stale    bool
	nothing  bool // the run recorded a cutover but installed nothing
}

func (j *sessionJob) note(format string, args ...any) {
	j.steps = append(j.steps, fmt.Sprintf(format, args...))
}

// session rolls back one session, waiting up to wait for its lock (0: one
// try).
func (r *roller) session(ctx context.Context, s *sessionRun, wait time.Duration) SessionResult {
	j := &sessionJob{sessionRun: s, r: r, dry: r.opt.DryRun}
	res := SessionResult{Session: s.session}
	if len(s.inconsistent) > 0 {
		// Not locked, not looked at: the records cannot be pisess's.
		res.Action = ActionRefused
		res.Error = &StepError{Session: s.session, Step: "check journal",
			Err: fmt.Errorf("%w: %s", ledger.ErrForged, strings.Join(s.inconsistent, "; "))}
		res.Detail = "the run's journal records of this session contradict what pisess writes: nothing done (fsck reports the journal)"
		return res
	}
	path := r.abs(s.session)
	if uid, gid, err := r.ops.Owner(path); err == nil {
		j.uid, j.gid = uid, gid
	} else if uid, gid, err := r.ops.Owner(r.tree); err == nil {
		j.uid, j.gid = uid, gid
	}
	if !j.dry {
		lockPath := path + ".lock"
		lock, err := r.ops.LockFile(ctx, lockPath, wait)
		if err != nil {
			res.Action, res.Error = ActionFailed, &StepError{Session: s.session, Step: "lock", Err: err}
			if errors.Is(err, durable.ErrLockTimeout) {
				res.Action = ActionBusy
				res.Detail = "the session lock is held (pi is writing the session?): nothing done; run the rollback again"
			}
			return res
		}
		defer lock.Unlock()
		// pi opens the lock file O_RDWR as the session's owner: a root run
		// that created it must give it away.
		_ = r.ops.ChownIfRoot(lockPath, j.uid, j.gid)
	}
	err := j.run()
	res.Stale, res.Changed = j.stale, j.changed
	res.Detail = strings.Join(j.steps, "; ")
	switch {
	case err != nil:
		res.Error = err
		res.Action = ActionFailed
		if errors.Is(err, ErrSourceChanged) || errors.Is(err, ErrSuperseded) || errors.Is(err, ErrMissing) {
			res.Action = ActionRefused
		} else if !j.dry {
			// A step failed: its receipt says so (once), so the journal
			// shows where the rollback stopped; a re-run continues.
			if rerr := j.record(stepRecord{target: path, outcome: wire.OutcomeFatalError, class: failureClass(err),
				format: sourceFormatOf(path)}); rerr != nil {
				res.Error = errors.Join(err, rerr)
			}
			res.Changed = j.changed
		}
	case j.dry && j.acted:
		res.Action = ActionWouldRollBack
	case j.acted:
		res.Action = ActionRolledBack
	case j.nothing && !j.already:
		res.Action = ActionNothingInstalled
	case j.changed:
		res.Action = ActionRolledBack
	case j.already:
		res.Action = ActionAlreadyRolledBack
	default:
		res.Action = ActionNothingInstalled
	}
	return res
}

func (r *roller) abs(p string) string {
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	return filepath.Join(r.tree, p)
}

// sourceState is an upgraded session's source as the rollback finds it.
type sourceState int

const (
	sourceNotUpgraded sourceState = iota
	sourceUpgraded                // the bytes the run wrote: restorable
	sourceOriginal                // the original bytes: already restored
	sourceGrown                   // the run's bytes plus bytes appended after
	sourceChanged                 // anything else
)

func (j *sessionJob) run() error {
	path := j.r.abs(j.session)
	want := ""
	if j.upgraded != nil {
		want = j.upgraded.NewSHA256
	}
	before, err := fileDigest(j.r.ops, path, want)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return &StepError{Session: j.session, Step: "check source", Err: fmt.Errorf("%w: the session file is gone; nothing done", ErrMissing)}
		}
		return &StepError{Session: j.session, Step: "check source", Err: err}
	}
	src := sourceNotUpgraded
	if up := j.upgraded; up != nil {
		switch {
		case before.sha == up.SHA256:
			src = sourceOriginal
		case before.sha == up.NewSHA256:
			src = sourceUpgraded
		case before.prefix >= 0:
			src = sourceGrown
		default:
			src = sourceChanged
		}
	}
	keep := ledger.QuarantinePath(j.r.tree, j.r.cid, j.rel, kindRolledBackSource)
	restoredBefore := j.upgraded != nil && j.recorded[eventKey(path, wire.OutcomeOK)]
	switch {
	case j.undone != nil:
		// The upgrade itself put a concurrent writer's version back: the
		// file is that writer's, not the run's.
		j.note("the run's upgrade did not take (another writer changed the file during it and the upgrade put that version back): the source is left as it is")
		src = sourceNotUpgraded
	case src == sourceOriginal:
		if k, err := lstatKind(keep); err != nil || k == kindMissing {
			j.note("the run's upgrade never replaced the source (it stopped before its rename): nothing to restore")
			src = sourceNotUpgraded
		}
	}
	if (src == sourceGrown || src == sourceChanged) && restoredBefore {
		// An earlier rollback restored the original, and pi has written
		// the session since: nothing of the run is left in the source.
		j.already = true
		j.note("the original source was restored by an earlier rollback (pi has written the session since)")
		src = sourceNotUpgraded
	} else if src == sourceGrown || src == sourceChanged {
		return j.refuseChanged(path, before, src)
	}
	if err := j.precheck(path, src); err != nil {
		return err
	}
	if err := j.sidecarOut(before); err != nil {
		return err
	}
	if src == sourceUpgraded {
		if err := j.restoreSource(path); err != nil {
			return err
		}
	} else if src == sourceOriginal {
		j.already = true
		if err := j.recordSourceRestore(path); err != nil {
			return err
		}
	}
	if err := j.displacedBack(); err != nil {
		return err
	}
	if j.dry {
		return nil
	}
	if j.nothing {
		// The receipt that the run's cutover of this session is undone
		// (there was nothing to undo): it resolves the run's cutover_commit
		// intent for ledger.Unfinished.
		if err := j.record(stepRecord{target: j.sidecar, outcome: wire.OutcomeOK, format: wire.FormatNativeV2}); err != nil {
			return err
		}
	}
	expect := before.sha
	if src == sourceUpgraded {
		expect = j.upgraded.SHA256
	}
	after, err := fileDigest(j.r.ops, path, "")
	if err != nil || after.sha != expect {
		if err == nil {
			err = fmt.Errorf("the source's SHA-256 is %s, expected %s", after.sha, expect)
		}
		return &StepError{Session: j.session, Step: "verify source after", Err: err}
	}
	return nil
}

// precheck makes sure that what the rollback will need is there before it
// changes anything: the original of an upgraded source, with its digest.
func (j *sessionJob) precheck(path string, src sourceState) error {
	if src != sourceUpgraded {
		return nil
	}
	up := j.upgraded
	if up.QuarantinePath == "" {
		return &StepError{Session: j.session, Step: "check original", Err: fmt.Errorf("%w: the upgraded note names no quarantined original", ErrMissing)}
	}
	d, err := fileDigest(j.r.ops, j.r.abs(up.QuarantinePath), "")
	if err != nil {
		return &StepError{Session: j.session, Step: "check original", Err: fmt.Errorf("%w: %v", ErrMissing, err)}
	}
	if want, ok := ledger.ParseIdentity(up.Detail); ok {
		if got, err := ledger.InodeOf(j.r.abs(up.QuarantinePath)); err != nil || got != want {
			return &StepError{Session: j.session, Step: "check original",
				Err: fmt.Errorf("%w: %s is not the file the run quarantined (%s)", ErrMissing, up.QuarantinePath, want)}
		}
	}
	if d.sha != up.SHA256 {
		return &StepError{Session: j.session, Step: "check original",
			Err: fmt.Errorf("%w: %s has SHA-256 %s, the run recorded %s", ErrMissing, up.QuarantinePath, d.sha, up.SHA256)}
	}
	return nil
}

// refuseChanged keeps a copy of an upgraded source that pi changed after
// the upgrade and refuses the session.
func (j *sessionJob) refuseChanged(path string, cur digest, src sourceState) error {
	up := j.upgraded
	copyPath := ledger.QuarantinePath(j.r.tree, j.r.cid, j.rel, kindChangedSource+"-"+cur.sha[:16])
	var what string
	if src == sourceGrown {
		what = fmt.Sprintf("pi appended %d bytes to %s after the run upgraded it: the bytes from offset %d to the end (%d) are new, and the original the run kept at %s lacks them",
			cur.size-cur.prefix, j.session, cur.prefix, cur.size, up.QuarantinePath)
	} else {
		what = fmt.Sprintf("%s is neither the file the run upgraded it to (SHA-256 %s) nor the original (%s): pi rewrote it after the run",
			j.session, up.NewSHA256, up.SHA256)
	}
	if j.dry {
		j.note("%s; would keep a copy of the current file at %s and leave the session as it is", what, copyPath)
		return &StepError{Session: j.session, Step: "check source", Err: fmt.Errorf("%w: %s", ErrSourceChanged, what)}
	}
	k, err := lstatKind(copyPath)
	if err != nil {
		return &StepError{Session: j.session, Step: "keep changed source", Err: err}
	}
	if k == kindMissing {
		dir := filepath.Dir(copyPath)
		if err := mkdirQuarantine(j.r.ops, j.r.tree, dir, j.uid, j.gid); err != nil {
			return &StepError{Session: j.session, Step: "keep changed source", Err: err}
		}
		durable.Failpoint(fpBeforeGrownCopy)
		if _, err := copyInto(j.r.ops, path, dir, filepath.Base(copyPath), cur.sha); err != nil {
			return &StepError{Session: j.session, Step: "keep changed source", Err: err}
		}
		_ = j.r.ops.ChownIfRoot(copyPath, j.uid, j.gid)
		durable.Failpoint(fpAfterGrownCopy)
		j.acted = true
	} else if d, err := fileDigest(j.r.ops, copyPath, ""); err != nil || d.sha != cur.sha {
		return &StepError{Session: j.session, Step: "keep changed source", Err: fmt.Errorf("%s exists and is not a copy of the current file: left alone", copyPath)}
	}
	if err := j.record(stepRecord{
		target: copyPath, outcome: wire.OutcomeFatalError, class: wire.ErrorClassIntegrityMismatch,
		format: wire.FormatJSONLv3,
		note: &ledger.Note{Kind: ledger.NoteQuarantined, Path: j.session, QuarantinePath: copyPath, SHA256: cur.sha,
			Detail: "rollback refused: " + what + "; this is a copy of the whole current file, which stays in place"},
	}); err != nil {
		return err
	}
	j.note("%s; the session is left as it is (sidecar included) and a copy of the current file is at %s. "+
		"To keep the new entries, keep the session as it is; restoring the original would lose them", what, copyPath)
	return &StepError{Session: j.session, Step: "check source", Err: fmt.Errorf("%w: %s", ErrSourceChanged, what)}
}

// sidecarOut moves the sidecar the run installed into the quarantine.
func (j *sessionJob) sidecarOut(src digest) error {
	if !j.cutover && j.installed == nil {
		return nil
	}
	q := ledger.QuarantinePath(j.r.tree, j.r.cid, j.rel, kindRolledBackStore)
	kq, err := lstatKind(q)
	if err != nil {
		return &StepError{Session: j.session, Step: "check quarantine", Err: err}
	}
	if kq != kindMissing {
		j.already = true
		j.note("the sidecar the run installed is already in %s", q)
		return j.recordSidecarOut(q)
	}
	ks, err := lstatKind(j.sidecar)
	if err != nil {
		return &StepError{Session: j.session, Step: "check sidecar", Err: err}
	}
	if ks == kindMissing {
		j.note("no sidecar is installed at %s", j.sidecar)
		j.nothing = true
		return nil
	}
	ours, why := j.ours()
	if !ours {
		if !j.completed && j.displaced == nil && !j.backupExists() {
			j.note("the run did not install its sidecar (it stopped before its cutover); the sidecar at %s is not the run's and stays", j.sidecar)
			j.nothing = true
			return nil
		}
		return &StepError{Session: j.session, Step: "check sidecar", Err: fmt.Errorf("%w: %s", ErrSuperseded, why)}
	}
	j.stale = isStale(j.r.ops, j.sidecar, src)
	staleNote := ""
	if j.stale {
		staleNote = " (it was stale: pi wrote the session after the run; the source holds every entry, and pi reads the source when there is no sidecar)"
	}
	if j.dry {
		j.acted = true
		j.note("would move the sidecar the run installed, %s, to %s%s", j.sidecar, q, staleNote)
		return nil
	}
	if ks != kindDir {
		return &StepError{Session: j.session, Step: "move sidecar", Err: fmt.Errorf("%s is not a directory", j.sidecar)}
	}
	if err := mkdirQuarantine(j.r.ops, j.r.tree, filepath.Dir(q), j.uid, j.gid); err != nil {
		return &StepError{Session: j.session, Step: "move sidecar", Err: err}
	}
	durable.Failpoint(fpBeforeSidecarQuarantine)
	if err := j.r.ops.RenameNoReplace(j.sidecar, q); err != nil {
		return &StepError{Session: j.session, Step: "move sidecar", Err: err}
	}
	durable.Failpoint(fpAfterSidecarQuarantine)
	j.acted = true
	j.note("moved the sidecar the run installed, %s, to %s%s", j.sidecar, q, staleNote)
	return j.recordSidecarOut(q)
}

func (j *sessionJob) recordSidecarOut(q string) error {
	return j.record(stepRecord{
		target: q, outcome: wire.OutcomeOK, format: wire.FormatNativeV2,
		note: &ledger.Note{Kind: ledger.NoteQuarantined, Path: j.sidecar, QuarantinePath: q,
			Detail: "rollback: the sidecar this run installed, moved aside"},
	})
}

// ours tells whether the sidecar in place is the one the run installed,
// and if not, why.
func (j *sessionJob) ours() (bool, string) {
	if j.installed != nil {
		if want, ok := ledger.ParseIdentity(j.installed.Detail); ok {
			got, err := ledger.InodeOf(j.sidecar)
			switch {
			case err != nil || got != want:
				return false, fmt.Sprintf("the sidecar at %s is not the directory the run installed (%s)%s", j.sidecar, want, j.laterRuns())
			case j.continuedLater():
				return false, fmt.Sprintf("the sidecar at %s was continued in place after the run%s", j.sidecar, j.laterRuns())
			}
			return true, ""
		}
	}
	evs, err := ledger.ReadStoreEvents(j.sidecar)
	if err == nil {
		for _, ev := range evs {
			if ev.CorrelationID == j.r.cid {
				return true, ""
			}
		}
	}
	if j.backupExists() {
		// The backup of this run's cutover is beside it: the sidecar was
		// installed by the rename that followed the backup's.
		return true, ""
	}
	return false, fmt.Sprintf("the sidecar at %s holds no event of run %s%s", j.sidecar, j.r.cid, j.laterRuns())
}

// continuedLater reports whether a later run continued the sidecar in
// place (the same directory): its ledger, which such a refresh replaces
// with its own events, then holds none of this run's.
func (j *sessionJob) continuedLater() bool {
	evs, err := ledger.ReadStoreEvents(j.sidecar)
	if err != nil || len(evs) == 0 {
		return false
	}
	for _, ev := range evs {
		if ev.CorrelationID == j.r.cid {
			return false
		}
	}
	return true
}

// laterRuns names the runs whose events the sidecar in place holds.
func (j *sessionJob) laterRuns() string {
	evs, err := ledger.ReadStoreEvents(j.sidecar)
	if err != nil || len(evs) == 0 {
		return "; it was replaced after the run (pi rebuilds a sidecar it cannot use)"
	}
	var ids []string
	seen := map[string]bool{}
	for _, ev := range evs {
		if !seen[ev.CorrelationID] {
			seen[ev.CorrelationID] = true
			ids = append(ids, ev.CorrelationID)
		}
	}
	return fmt.Sprintf("; it was written by run %s: roll that run back first", strings.Join(ids, ", "))
}

func (j *sessionJob) backupExists() bool {
	k, err := lstatKind(BackupPath(j.sidecar, j.r.cid))
	return err == nil && k == kindDir
}

// isStale reports whether a sidecar's source-state does not vouch for the
// source as it is (FORMAT.md §8, by digest: the rollback has hashed it).
func isStale(ops durable.Ops, sidecar string, src digest) bool {
	st, err := store.Open(sidecar, store.ReadOptions{Ops: ops})
	if err != nil {
		return true
	}
	ss, err := st.SourceState()
	if err != nil || ss.State != wire.SourceClean || ss.SourceFingerprint == nil {
		return true
	}
	fp := ss.SourceFingerprint
	return fp.ByteLength != uint64(src.size) || fp.SHA256 != src.sha
}

// restoreSource puts the original of an upgraded source back. The
// upgraded file first gets a second name in the quarantine (a hard link:
// no copy, and no moment without a session file), then the original is
// renamed over the session path: one atomic replace that keeps the
// original's bytes, mode and owner.
func (j *sessionJob) restoreSource(path string) error {
	up := j.upgraded
	orig := j.r.abs(up.QuarantinePath)
	keep := ledger.QuarantinePath(j.r.tree, j.r.cid, j.rel, kindRolledBackSource)
	if j.dry {
		j.acted = true
		j.note("would keep the upgraded file at %s and restore the original from %s", keep, up.QuarantinePath)
		return nil
	}
	k, err := lstatKind(keep)
	if err != nil {
		return &StepError{Session: j.session, Step: "keep upgraded source", Err: err}
	}
	switch k {
	case kindMissing:
		if err := mkdirQuarantine(j.r.ops, j.r.tree, filepath.Dir(keep), j.uid, j.gid); err != nil {
			return &StepError{Session: j.session, Step: "keep upgraded source", Err: err}
		}
		durable.Failpoint(fpBeforeSourceLink)
		if err := linkDurable(j.r.ops, path, keep); err != nil {
			return &StepError{Session: j.session, Step: "keep upgraded source", Err: err}
		}
		durable.Failpoint(fpAfterSourceLink)
		j.acted = true
	case kindFile:
		same, err := sameFile(path, keep)
		if err != nil {
			return &StepError{Session: j.session, Step: "keep upgraded source", Err: err}
		}
		if !same {
			d, err := fileDigest(j.r.ops, keep, "")
			if err != nil || d.sha != up.NewSHA256 {
				return &StepError{Session: j.session, Step: "keep upgraded source",
					Err: fmt.Errorf("%s exists and is not the upgraded file: left alone", keep)}
			}
		}
	default:
		return &StepError{Session: j.session, Step: "keep upgraded source", Err: fmt.Errorf("%s is not a file", keep)}
	}
	if err := j.record(stepRecord{
		target: keep, outcome: wire.OutcomeOK, format: wire.FormatJSONLv3,
		note: &ledger.Note{Kind: ledger.NoteQuarantined, Path: j.session, QuarantinePath: keep, SHA256: up.NewSHA256,
			Detail: "rollback: the upgraded source, kept before the original replaces it"},
	}); err != nil {
		return err
	}
	// The quarantined copy is 0600 and the upgraded file has the
	// original's mode and owner (writers/upgrade gives it them): the
	// original goes back with those.
	st, err := durable.Lstat(path)
	if err != nil {
		return &StepError{Session: j.session, Step: "restore original source", Err: err}
	}
	// The session has its own name and, normally, the keep link just
	// made: any other name is outside pisess's knowledge (a planted link),
	// and the rename must not unlink over it.
	names := uint64(1)
	if linked, err := sameFile(path, keep); err == nil && linked {
		names = 2
	}
	if uint64(st.Nlink) != names {
		return &StepError{Session: j.session, Step: "restore original source",
			Err: fmt.Errorf("%w: %s has %d names, expected %d: left alone", durable.ErrMultiLink, j.session, st.Nlink, names)}
	}
	// Mode and owner are set through a no-follow descriptor of the
	// original, which must have one name only (SetModeOwner refuses more).
	if err := j.r.ops.SetModeOwner(orig, os.FileMode(st.Mode&0o777), int(st.Uid), int(st.Gid)); err != nil {
		return &StepError{Session: j.session, Step: "restore original source", Err: err}
	}
	if d, err := fileDigest(j.r.ops, orig, ""); err != nil || d.sha != up.SHA256 {
		return &StepError{Session: j.session, Step: "restore original source",
			Err: fmt.Errorf("%w: %s is no longer the original the run recorded", ErrMissing, up.QuarantinePath)}
	}
	durable.Failpoint(fpBeforeSourceRestore)
	if err := j.r.ops.Rename(orig, path); err != nil {
		return &StepError{Session: j.session, Step: "restore original source", Err: err}
	}
	durable.Failpoint(fpAfterSourceRestore)
	j.acted = true
	j.note("restored the original source from %s (the upgraded file is kept at %s)", up.QuarantinePath, keep)
	return j.recordSourceRestore(path)
}

func (j *sessionJob) recordSourceRestore(path string) error {
	up := j.upgraded
	if j.dry {
		return nil
	}
	return j.record(stepRecord{
		target: path, outcome: wire.OutcomeOK, format: wire.FormatJSONLv3,
		note: &ledger.Note{Kind: ledger.NoteRestored, Path: j.session, QuarantinePath: up.QuarantinePath, SHA256: up.SHA256,
			Detail: "rollback: the original source, restored byte for byte"},
	})
}

// displacedBack puts back the sidecar the run displaced.
func (j *sessionJob) displacedBack() error {
	q := ledger.QuarantinePath(j.r.tree, j.r.cid, j.rel, kindDisplaced)
	if j.displaced != nil && j.displaced.QuarantinePath != "" {
		q = j.r.abs(j.displaced.QuarantinePath)
	}
	from := ""
	for _, p := range []string{q, BackupPath(j.sidecar, j.r.cid)} {
		k, err := lstatKind(p)
		if err != nil {
			return &StepError{Session: j.session, Step: "check displaced sidecar", Err: err}
		}
		if k == kindDir {
			from = p
			break
		}
	}
	ks, err := lstatKind(j.sidecar)
	if err != nil {
		return &StepError{Session: j.session, Step: "check sidecar", Err: err}
	}
	if from == "" {
		if j.displaced == nil {
			return nil
		}
		if j.discarded != nil && (ks == kindMissing || j.dry) {
			// Reproducible from the source, so not kept (issue 12): with
			// no sidecar pi reads the session file, exactly as it did
			// with the stale one; the next migrate builds it again.
			j.note("the sidecar the run displaced was not kept (reproducible from the source): pi reads the session file until the next migrate")
			return nil
		}
		if ks == kindMissing && !j.dry {
			return &StepError{Session: j.session, Step: "restore displaced sidecar",
				Err: fmt.Errorf("%w: the sidecar the run displaced is neither at %s nor installed", ErrMissing, q)}
		}
		j.already = true
		j.note("the sidecar the run displaced is back at %s", j.sidecar)
		if j.dry {
			return nil
		}
		return j.recordDisplacedBack(q)
	}
	if ks != kindMissing && !(j.dry && j.acted) {
		return &StepError{Session: j.session, Step: "restore displaced sidecar",
			Err: fmt.Errorf("%w: a sidecar is installed at %s, so the one the run displaced stays at %s", ErrSuperseded, j.sidecar, from)}
	}
	if j.dry {
		j.acted = true
		j.note("would put the sidecar the run displaced back from %s", from)
		return nil
	}
	durable.Failpoint(fpBeforeDisplacedRestore)
	if err := j.r.ops.RenameNoReplace(from, j.sidecar); err != nil {
		return &StepError{Session: j.session, Step: "restore displaced sidecar", Err: err}
	}
	durable.Failpoint(fpAfterDisplacedRestore)
	j.acted = true
	j.note("put the sidecar the run displaced back from %s", from)
	return j.recordDisplacedBack(from)
}

func (j *sessionJob) recordDisplacedBack(from string) error {
	return j.record(stepRecord{
		target: j.sidecar, outcome: wire.OutcomeOK, format: wire.FormatNativeV2,
		note: &ledger.Note{Kind: ledger.NoteRestored, Path: j.sidecar, QuarantinePath: from,
			Detail: "rollback: the sidecar the run displaced, put back"},
	})
}

// stepRecord is the receipt of one step: a note, then a rollback event.
type stepRecord struct {
	target  string
	outcome wire.Outcome
	class   wire.ErrorClass
	format  wire.SourceFormat
	note    *ledger.Note
}

// record appends a step's note and event to the journal unless they are
// there already (a re-run after a crash, or a run with nothing left to do).
func (j *sessionJob) record(sr stepRecord) error {
	if j.dry {
		return nil
	}
	appended := false
	if n := sr.note; n != nil {
		key := noteKey(n.Kind, n.Path, n.QuarantinePath)
		if !j.recorded[key] {
			n.CorrelationID, n.At, n.Session = j.r.cid, j.r.opt.now(), j.session
			if err := j.r.journal.Append(ledger.NoteRecord(*n)); err != nil {
				return &StepError{Session: j.session, Step: "record", Err: err}
			}
			j.recorded[key] = true
			appended = true
		}
	}
	key := eventKey(sr.target, sr.outcome)
	if !j.recorded[key] {
		ok := sr.outcome == wire.OutcomeOK
		ev := wire.MigrationEvent{
			MigrationID: j.r.migrationID, Phase: wire.PhaseRollback, At: j.r.opt.now(),
			SourcePath: j.session, TargetPath: sr.target,
			SourceFormat: sr.format, TargetFormat: sr.format,
			Verification:  wire.Verification{EntryCountMatch: ok, HashChainMatch: ok, IndexConsistent: ok},
			Outcome:       sr.outcome,
			ErrorClass:    sr.class,
			CorrelationID: j.r.cid,
		}
		if err := j.r.journal.Append(ledger.EventRecord(ev)); err != nil {
			return &StepError{Session: j.session, Step: "record", Err: err}
		}
		j.recorded[key] = true
		appended = true
	}
	if appended {
		j.changed = true
		durable.Failpoint(fpAfterRollbackRecord)
	}
	return nil
}

// sourceFormatOf names a session file's format for a rollback event.
func sourceFormatOf(session string) wire.SourceFormat {
	if strings.HasSuffix(session, ".sqlite") {
		return wire.FormatSQLitev1
	}
	return wire.FormatJSONLv3
}
