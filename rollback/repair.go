package rollback

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"

	"pisess/ledger"
	"pisess/readers"
	"pisess/readers/discover"
	"pisess/verify"
	"pisess/writers/durable"
	"pisess/writers/store"
	"pisess/writers/wire"
)

// Repairer carries out fsck --repair's repairs in one tree (issue "fsck"):
// check → repair → re-check, each step kept in the tree's quarantine and
// journal by Q. The run that uses it (package engine) gives it the lock
// waits of its schedule (Lock) and the migrate pipeline's rebuild of a
// sidecar from its source (Rebuild): the rest is here.
type Repairer struct {
	Ops         durable.Ops
	Clock       func() time.Time
	LockTimeout time.Duration // for FinishPendingLocked's own locks
	Log         *zerolog.Logger
	// Root is the tree's root, Journal its journal and Q its quarantine
	// for this run.
	Root    string
	Journal *ledger.Journal
	Q       *ledger.Quarantiner
	// Lock takes a session's lock or its store's mutation lock (waiting
	// up to the lock timeout, without the caller's place in its pool).
	Lock func(ctx context.Context, path string) (*durable.Lock, error)
	// Rebuild rebuilds the sidecar of s from its source through the
	// migrate pipeline (staging, verification, cutover with the old
	// sidecar kept in the quarantine) under the session lock, which the
	// caller (Session) holds; a source the reference refuses comes back as
	// a *readers.RefusedError. displaced is where the old sidecar went
	// ("" when there was none).
	Rebuild func(ctx context.Context, s discover.Session, reason string) (displaced string, err error)
}

// check is fsck's check of one session (verify.CheckSession).
func (r *Repairer) check(ctx context.Context, s discover.Session) (verify.Class, []verify.FsckFinding) {
	return verify.CheckSession(ctx, r.Ops, s)
}

// Session mends one session: check → repair → re-check. In order:
//
//  1. under the session lock, the leftovers: staging directories to the
//     quarantine; a backup restored when no sidecar is installed and it
//     passes the store check and pi's acceptance rules, else quarantined;
//  2. still under the session lock and now the store's mutation lock, the
//     in-place repairs, when nothing calls for a rebuild anyway: finish a
//     pending rollback, modes, torn tails (the cut bytes kept in the
//     quarantine first), the index and the manifest recomputed from the
//     frames (the old ones kept first), the owner;
//  3. a re-check, with a full verification against the source: whatever
//     is still wrong, or stale, or an in-place repair that failed, is
//     rebuilt from the source through the migrate pipeline (the old
//     sidecar, whatever it is, goes to the quarantine); a sidecar that
//     cannot be rebuilt because the reference refuses its source is
//     quarantined (pi uses the JSONL either way);
//  4. the final check: a finding is Repaired when it is gone; every move
//     no finding names (the old sidecar a rebuild displaced) is reported
//     as a repaired finding of its own (verify.CodeMoved).
//
// The session lock is held from the first check to the end of the
// rebuild: pi (which takes it) cannot change what the check found before
// the repair acts on it (issue 32 §4).
//
// Nothing is repaired under a symlinked ancestor: pi could never open the
// sidecar, and pisess follows no symlink.
func (r *Repairer) Session(ctx context.Context, s discover.Session, out *verify.FsckSession) {
	for _, f := range out.Findings {
		if f.Code == verify.CodeSymlinkAncestor {
			return
		}
	}
	// Discovery leaves Sidecar empty when none exists; a restored backup
	// becomes one.
	s.Sidecar = discover.SidecarPath(s.Path)
	errs := map[string]string{} // finding key → why its repair failed
	fail := func(f verify.FsckFinding, err error) {
		errs[f.Key()] = err.Error()
		r.Log.Warn().Err(err).Str("session", s.Path).Str("code", f.Code).Str("path", f.Path).Msg("repair failed")
	}

	var moves []verify.FsckFinding
	moved := func(path, dst, detail string) {
		moves = append(moves, verify.FsckFinding{Code: verify.CodeMoved, Session: s.Path, Path: path,
			Detail: detail + "; moved to " + dst, Action: verify.ActionQuarantine,
			Repair: "fsck --repair: keep it in the quarantine", Repaired: true})
	}

	lock, err := r.Lock(ctx, s.Lock)
	if err != nil {
		for _, f := range out.Findings {
			fail(f, fmt.Errorf("session busy: %w", err))
		}
		r.finish(ctx, s, out, errs, nil)
		return
	}
	lost := r.repairLeftovers(s, out.Findings, fail)
	s.Staging, s.Backups = nil, nil

	rebuild := ""
	if lost && !exists(s.Sidecar) {
		// A cutover (a refresh or an earlier repair) was interrupted after
		// the old sidecar was set aside, and that store is unusable: the
		// session had a sidecar, so rebuild it from the source, as the
		// interrupted run would have.
		rebuild = "repair: the backup of an interrupted cutover is unusable; rebuilt from the source"
	}
	if exists(s.Sidecar) {
		_, cur := r.check(ctx, s)
		rebuild = rebuildReason(cur)
		failed := r.mendInPlace(ctx, s, cur, rebuild != "", fail)
		if rebuild == "" {
			_, cur = r.check(ctx, s)
			rebuild = rebuildReason(cur)
		}
		if rebuild == "" {
			// A cheaper repair that failed, or left its damage, is
			// escalated: the source is authoritative (issue 32 §3: a
			// failed index rebuild was reported on every run).
			rebuild = escalation(cur, failed)
		}
	}
	if rebuild != "" {
		r.rebuildSidecar(ctx, s, rebuild, out.Findings, fail, moved)
	}
	_ = lock.Unlock()
	r.finish(ctx, s, out, errs, moves)
}

// escalates reports whether a failed in-place repair of this kind is
// mended by a rebuild from the source: a chown is not (a run that cannot
// give the store to its owner could not give a rebuilt one either).
func escalates(a verify.RepairAction) bool { return a != verify.ActionChown }

// escalation says why a sidecar whose in-place repairs failed (failed:
// the first failure, "" when none) or left an in-place problem (cur, the
// re-check) is rebuilt from the source instead, or "" when nothing calls
// for it.
func escalation(cur []verify.FsckFinding, failed string) string {
	if failed != "" {
		return "repair: the in-place repair failed (" + failed + "); rebuilt from the source"
	}
	for _, f := range cur {
		if !f.Notice && !f.Repaired && verify.InPlace(f.Action) && escalates(f.Action) {
			return fmt.Sprintf("repair: %s is still found after the in-place repair (%s); rebuilt from the source", f.Code, f.Detail)
		}
	}
	return ""
}

// rebuildReason says why the sidecar must be rebuilt from its source, or
// "" when the findings left can be mended in place (or not at all).
func rebuildReason(fs []verify.FsckFinding) string {
	for _, f := range fs {
		if f.Repaired || f.Notice && f.Action != verify.ActionRefresh {
			continue
		}
		switch f.Action {
		case verify.ActionRefresh:
			return "refresh: " + f.Detail
		case verify.ActionRebuild:
			return fmt.Sprintf("repair: %s %s", f.Code, f.Detail)
		}
	}
	return ""
}

// finish re-checks the session and settles every finding: Repaired when
// the re-check no longer finds it; anything the re-check finds that was
// not there before is added, unrepaired.
func (r *Repairer) finish(ctx context.Context, s discover.Session, out *verify.FsckSession, errs map[string]string, moves []verify.FsckFinding) {
	s.Staging, s.Backups = nil, nil
	for _, p := range discoverLeftovers(s) {
		s.Staging = append(s.Staging, p.staging...)
		s.Backups = append(s.Backups, p.backups...)
	}
	class, now := r.check(ctx, s)
	out.After = class
	left := map[string]verify.FsckFinding{}
	for _, f := range now {
		if !f.Notice {
			left[f.Key()] = f
		}
	}
	for i := range out.Findings {
		f := &out.Findings[i]
		if f.Notice {
			continue
		}
		_, still := left[f.Key()]
		f.Repaired = !still
		if still {
			f.RepairError = errs[f.Key()]
			if f.RepairError == "" && f.Action != verify.ActionNone {
				f.RepairError = "still found after the repair"
			}
		}
		delete(left, f.Key())
	}
	for _, f := range now {
		if _, ok := left[f.Key()]; ok {
			f.Detail += " (found after the repair)"
			out.Findings = append(out.Findings, f)
		}
	}
	out.Findings = append(out.Findings, moves...)
}

type leftovers struct{ staging, backups []string }

// discoverLeftovers lists the staging and backup siblings of s again (the
// repairs moved some).
func discoverLeftovers(s discover.Session) []leftovers {
	trees, err := discover.Walk([]string{s.Path})
	if err != nil {
		return nil
	}
	var out []leftovers
	for _, t := range trees {
		for _, x := range t.Sessions {
			if x.Path == s.Path {
				out = append(out, leftovers{x.Staging, x.Backups})
			}
		}
	}
	return out
}

// repairLeftovers quarantines staging directories and restores or
// quarantines backups. The caller holds the session lock. It reports
// whether a backup was quarantined while no sidecar was installed (the
// session lost its sidecar to an interrupted cutover).
func (r *Repairer) repairLeftovers(s discover.Session, fs []verify.FsckFinding, fail func(verify.FsckFinding, error)) (lost bool) {
	for _, f := range fs {
		if f.Code != verify.CodeTreeStaging && f.Code != verify.CodeTreeBackup {
			continue
		}
		if f.Action == verify.ActionRestoreBackup && !exists(s.Sidecar) {
			err := r.verifyBackup(s, f.Path)
			if err == nil {
				if err = r.Ops.RenameNoReplace(f.Path, s.Sidecar); err == nil {
					err = r.Q.Note(ledger.Note{Session: s.Path, Kind: ledger.NoteRestored, Path: s.Sidecar,
						QuarantinePath: f.Path, Detail: "fsck restored the backup of an interrupted cutover as the sidecar"})
					if err != nil {
						fail(f, err)
					}
					continue
				}
			}
			r.Log.Info().Err(err).Str("backup", f.Path).Msg("backup not restored; quarantining it")
		}
		kind := "staging"
		if f.Code == verify.CodeTreeBackup {
			kind = "backup"
			lost = lost || !exists(s.Sidecar)
		}
		if _, err := r.Q.Move(s.Path, f.Path, kind, f.Detail); err != nil {
			fail(f, err)
		}
	}
	return lost
}

// verifyBackup checks a backup before it is put back as the sidecar: the
// store check finds nothing and pi's acceptance rules hold (it may be
// stale: the sidecar check that follows refreshes it).
func (r *Repairer) verifyBackup(s discover.Session, dir string) error {
	st, err := store.Open(dir, store.ReadOptions{})
	if err != nil {
		return err
	}
	if ps := st.Check(); len(ps) > 0 {
		return fmt.Errorf("backup %s fails the store check: %s", dir, ps[0])
	}
	opt := verify.AcceptOptions{OwnerUID: -1, OwnerGID: -1, SourceFormat: s.Format}
	if h, err := discover.ReadHeader(s.Path); err == nil {
		opt.HeaderID = h.ID
	}
	if uid, gid, err := r.Ops.Owner(s.Path); err == nil {
		opt.OwnerUID, opt.OwnerGID = uid, gid
	}
	if fs := verify.Acceptance(dir, s.Path, opt); len(fs) > 0 {
		return fmt.Errorf("backup %s fails pi's acceptance rules: %s", dir, fs[0])
	}
	return nil
}

// mendInPlace applies the in-place repairs under the store's mutation
// lock (the caller holds the session lock). A pending rollback is always
// finished first, as every changing open of the reference does; when the
// sidecar is to be rebuilt anyway nothing else is touched, so that the
// quarantine receives it exactly as it was. It returns the first repair
// that failed ("" when none did), for the caller to escalate.
func (r *Repairer) mendInPlace(ctx context.Context, s discover.Session, fs []verify.FsckFinding, rebuilding bool, fail func(verify.FsckFinding, error)) (failed string) {
	has := map[verify.RepairAction][]verify.FsckFinding{}
	for _, f := range fs {
		if !f.Notice && verify.InPlace(f.Action) {
			has[f.Action] = append(has[f.Action], f)
		}
	}
	if len(has) == 0 {
		return ""
	}
	root := s.Sidecar
	if fi, err := os.Lstat(root); err != nil || !fi.IsDir() {
		return ""
	}

	mlock, err := r.Lock(ctx, store.MutationLockPath(root))
	if err != nil {
		for _, list := range has {
			for _, f := range list {
				fail(f, fmt.Errorf("store busy: %w", err))
			}
		}
		return "" // pi is changing the store: nothing to escalate
	}
	defer mlock.Unlock()
	// A failure is charged to its finding, and the first is returned.
	record := fail
	fail = func(f verify.FsckFinding, err error) {
		if failed == "" && escalates(f.Action) {
			failed = fmt.Sprintf("%s: %v", f.Action, err)
		}
		record(f, err)
	}

	if fs := has[verify.ActionFinishRollback]; len(fs) > 0 {
		f := fs[0]
		// The roll-forward rewrites the index and the manifest, marks a
		// sidecar dirty and consumes the intent: keep them first (the segment bytes it cuts
		// it keeps itself, as <segment>.tail.bak).
		for _, p := range []struct{ path, kind string }{
			{store.IndexPath(root), "index"}, {store.ManifestPath(root), "manifest"},
			{store.SourceStatePath(root), "source-state"},
			{IntentPath(root), "rollback-intent"},
			{filepath.Join(store.TmpPath(root), "offsets.stage"), "rollback-stage"},
		} {
			if _, _, err := r.keepCopy(p.path, p.kind); err != nil {
				fail(f, err)
				return failed
			}
		}
		if _, err := FinishPendingLocked(ctx, root, Options{Ops: r.Ops, Clock: r.Clock,
			LockTimeout: r.LockTimeout}); err != nil {
			fail(f, err)
		} else if err := r.Q.Note(ledger.Note{Session: s.Path, Kind: ledger.NoteRepair, Path: f.Path,
			Detail: "fsck finished the pending rollback to a checkpoint (rolled forward)"}); err != nil {
			fail(f, err)
		}
	}
	if rebuilding {
		return failed
	}
	// One chmod pass fixes every mode finding; it is charged to the first.
	if fs := has[verify.ActionChmod]; len(fs) > 0 {
		if err := r.fixModes(s, root); err != nil {
			fail(fs[0], err)
		}
	}
	changed := false
	for _, f := range has[verify.ActionCutTail] {
		cut, err := r.cutTail(s, f.Path)
		if err != nil {
			fail(f, err)
			continue
		}
		changed = changed || (cut && filepath.Base(f.Path) != store.LedgerName)
	}
	if len(has[verify.ActionRebuildIndex]) > 0 || changed {
		if err := r.rebuildIndex(s, root); err != nil {
			for _, f := range has[verify.ActionRebuildIndex] {
				fail(f, err)
			}
			if failed == "" {
				failed = "rebuild the index: " + err.Error()
			}
		} else {
			changed = true
		}
	}
	if len(has[verify.ActionRecomputeManifest]) > 0 || changed {
		if err := r.recomputeManifest(s, root); err != nil {
			for _, f := range has[verify.ActionRecomputeManifest] {
				fail(f, err)
			}
			if failed == "" {
				failed = "recompute the manifest: " + err.Error()
			}
		}
	}
	if fs := has[verify.ActionChown]; len(fs) > 0 {
		if err := r.fixOwner(s, root); err != nil {
			fail(fs[0], err)
		}
	}
	return failed
}

// cutTail keeps the bytes after the last newline of path in the quarantine
// and only then truncates them away (store.CutTornTail); it reports
// whether anything was cut.
func (r *Repairer) cutTail(s discover.Session, path string) (bool, error) {
	tail, off, err := tornTail(r.Ops, path)
	if err != nil || len(tail) == 0 {
		return false, err
	}
	dst, sum, err := r.Q.Keep(path, "torn-tail", tail)
	if err != nil {
		return false, err
	}
	cut, err := store.CutTornTail(path)
	if err != nil {
		return false, err
	}
	if !bytes.Equal(cut, tail) {
		return true, fmt.Errorf("cut torn tail of %s: %d bytes cut differ from the %d kept in %s", path, len(cut), len(tail), dst)
	}
	return true, r.Q.Note(ledger.Note{Session: s.Path, Kind: ledger.NoteQuarantined, Path: path, QuarantinePath: dst, SHA256: sum,
		Detail: fmt.Sprintf("fsck cut a torn tail of %d bytes at offset %d (the last whole line ends there)", len(tail), off)})
}

// tornTail returns the bytes of path after its last newline and where
// they start.
func tornTail(ops durable.Ops, path string) ([]byte, int64, error) {
	f, err := ops.OpenNoFollow(path, unix.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, 0, err
	}
	if !fi.Mode().IsRegular() {
		return nil, 0, fmt.Errorf("%s: not a regular file", path)
	}
	const block = 64 << 10
	size := fi.Size()
	buf := make([]byte, block)
	keep := int64(0)
	for end := size; end > 0; {
		start := max(end-block, 0)
		b := buf[:end-start]
		if _, err := f.ReadAt(b, start); err != nil && !errors.Is(err, io.EOF) {
			return nil, 0, err
		}
		if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
			keep = start + int64(i) + 1
			break
		}
		end = start
	}
	tail := make([]byte, size-keep)
	if _, err := f.ReadAt(tail, keep); err != nil && !errors.Is(err, io.EOF) {
		return nil, 0, err
	}
	return tail, keep, nil
}

// readAll reads a whole regular file without following a symlink.
func readAll(ops durable.Ops, path string) ([]byte, error) {
	f, err := ops.OpenNoFollow(path, unix.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// keepCopy keeps the current bytes of a file about to be rewritten; a
// missing file has nothing to keep.
func (r *Repairer) keepCopy(path, kind string) (string, string, error) {
	b, err := readAll(r.Ops, path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", "", nil
	}
	if err != nil {
		return "", "", err
	}
	return r.Q.Keep(path, kind, b)
}

// rebuildIndex keeps the old index and rewrites it from the frames.
func (r *Repairer) rebuildIndex(s discover.Session, root string) error {
	path := store.IndexPath(root)
	dst, sum, err := r.keepCopy(path, "index")
	if err != nil {
		return err
	}
	if fi, err := os.Lstat(store.IndexDirPath(root)); errors.Is(err, fs.ErrNotExist) {
		if err := r.Ops.MkdirPrivate(store.IndexDirPath(root)); err != nil {
			return err
		}
	} else if err == nil && !fi.IsDir() {
		return fmt.Errorf("%s is not a directory", store.IndexDirPath(root))
	}
	n, err := store.RebuildIndex(root)
	if err != nil {
		return err
	}
	return r.Q.Note(ledger.Note{Session: s.Path, Kind: ledger.NoteRepair, Path: path, QuarantinePath: dst, SHA256: sum,
		Detail: fmt.Sprintf("fsck rebuilt the index from the frames (%d rows); the old index, if any, is in the quarantine", n)})
}

// recomputeManifest keeps the old manifest and rewrites it from the
// frames, with the session id of the source's header.
func (r *Repairer) recomputeManifest(s discover.Session, root string) error {
	h, err := discover.ReadHeader(s.Path)
	if err != nil {
		return fmt.Errorf("recompute manifest: read the session header: %w", err)
	}
	path := store.ManifestPath(root)
	dst, sum, err := r.keepCopy(path, "manifest")
	if err != nil {
		return err
	}
	if _, err := store.RecomputeManifest(root, h.ID, wire.SourceFormat(s.Format)); err != nil {
		return err
	}
	return r.Q.Note(ledger.Note{Session: s.Path, Kind: ledger.NoteRepair, Path: path, QuarantinePath: dst, SHA256: sum,
		Detail: "fsck recomputed the manifest from the frames; the old manifest, if any, is in the quarantine"})
}

// fixModes sets every directory of the store to 0700 and every file to
// 0600 where a group or other bit (or an owner bit pi needs) is wrong.
// Symlinks and special files are left alone: they call for a rebuild.
func (r *Repairer) fixModes(s discover.Session, root string) error {
	var fixed []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case fi.IsDir() && fi.Mode().Perm() != 0o700:
			if err := r.Ops.MkdirPrivate(path); err != nil {
				return err
			}
		case fi.Mode().IsRegular() && fi.Mode().Perm()&0o077 != 0 || fi.Mode().IsRegular() && fi.Mode().Perm()&0o600 != 0o600:
			if err := chmodFile(r.Ops, path, 0o600); err != nil {
				return err
			}
		default:
			return nil
		}
		fixed = append(fixed, fmt.Sprintf("%s (was %04o)", path, fi.Mode().Perm()))
		return nil
	})
	if err != nil {
		return fmt.Errorf("fix modes: %w", err)
	}
	if len(fixed) == 0 {
		return nil
	}
	return r.Q.Note(ledger.Note{Session: s.Path, Kind: ledger.NoteRepair, Path: root,
		Detail: fmt.Sprintf("fsck set private modes (0700/0600) on %d path(s): %v", len(fixed), fixed)})
}

// chmodFile sets perm on the regular file path through a descriptor opened
// without following a symlink in any component. (durable has no chmod of
// an existing file yet; MkdirPrivate does directories.)
func chmodFile(ops durable.Ops, path string, perm os.FileMode) error {
	f, err := ops.OpenNoFollow(path, unix.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("chmod %s: not a regular file", path)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Nlink > 1 {
		// Another name of this inode may lie outside the tree.
		return fmt.Errorf("chmod %s: %w (%d)", path, durable.ErrMultiLink, st.Nlink)
	}
	return f.Chmod(perm)
}

// fixOwner gives the whole store to the session file's owner (as root).
func (r *Repairer) fixOwner(s discover.Session, root string) error {
	if os.Geteuid() != 0 {
		return errors.New("only root can give files to another user: run fsck --repair as root, or chown the store yourself")
	}
	uid, gid, err := r.Ops.Owner(s.Path)
	if err != nil {
		return err
	}
	if err := r.Ops.ChownTree(root, uid, gid); err != nil {
		return err
	}
	return r.Q.Note(ledger.Note{Session: s.Path, Kind: ledger.NoteRepair, Path: root,
		Detail: fmt.Sprintf("fsck gave the store to the session file's owner %d:%d", uid, gid)})
}

// rebuildSidecar rebuilds the sidecar from the source through the migrate
// pipeline (which verifies and cuts over, the old sidecar — a store, or a
// file, FIFO or symlink at its path — going to the quarantine: Cutover);
// the caller holds the session lock. When the reference refuses the
// source, no sidecar can be built from it: the broken one is quarantined
// instead, and pi keeps using the JSONL, as it would anyway. A source
// that cannot be read now (an I/O error, a lock: readers.AsVerdict) is no
// refusal: the sidecar stays. Every move is reported through moved.
func (r *Repairer) rebuildSidecar(ctx context.Context, s discover.Session, reason string, fs []verify.FsckFinding,
	fail func(verify.FsckFinding, error), moved func(path, dst, detail string)) {
	failAll := func(err error) {
		for _, f := range fs {
			if f.Action == verify.ActionRebuild || f.Action == verify.ActionRefresh {
				fail(f, err)
			}
		}
	}
	displaced, err := r.Rebuild(ctx, s, reason)
	if displaced != "" {
		moved(s.Sidecar, displaced, "the old sidecar, displaced by its rebuild from the source ("+reason+")")
	}
	if err == nil {
		return
	}
	if readers.AsVerdict(err) == nil || !exists(s.Sidecar) {
		failAll(err)
		return
	}
	dst, qerr := r.Q.Move(s.Path, s.Sidecar, "sidecar",
		"the sidecar could not be rebuilt because its source is refused ("+err.Error()+"); pi uses the JSONL")
	if dst != "" {
		moved(s.Sidecar, dst, "the sidecar, which cannot be rebuilt: its source is refused ("+err.Error()+")")
	}
	if qerr != nil {
		failAll(fmt.Errorf("%w; quarantining the sidecar failed too: %w", err, qerr))
	}
}

// exists reports whether something is at path (not following a symlink).
func exists(path string) bool {
	_, err := os.Lstat(path)
	return !errors.Is(err, fs.ErrNotExist)
}
