package upgrade

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/google/uuid"
	"golang.org/x/sys/unix"

	"pisess/readers"
	"pisess/readers/normalize"
	"pisess/readers/payload"
	"pisess/writers/durable"
	"pisess/writers/jsjson"
)

// Options says how to upgrade one file.
type Options struct {
	// DryRun computes everything and writes nothing anywhere.
	DryRun bool
	// LockTimeout is how long to wait for the session lock <file>.lock
	// (0: try once).
	LockTimeout time.Duration
	// Ops are the file operations; the zero value is durable.OS.
	Ops durable.Ops
	// Tree is the session's tree, QuarantinePath the file the original is
	// copied to before the rename (Run: ledger.QuarantinePath);
	// missing directories from Tree down to it are created. Both are
	// required unless DryRun.
	Tree           string
	QuarantinePath string
	// Record is called once the original is durable in the quarantine and
	// the source checked unchanged, before the rename (EventUpgraded), and
	// again if a change found after the rename made pisess put the
	// writer's version back (EventRestored). An error from the first call
	// aborts the upgrade, nothing changed. Required unless DryRun.
	Record func(Event) error

	hooks hooks
}

// hooks let tests act between the steps (a concurrent writer).
type hooks struct {
	afterPass1  func() // between pass 1 and pass 2
	afterRecord func() // after the fingerprint check and the journal note, before the rename
}

// Upgrade upgrades the session file at path (see the package comment) and
// reports what it did; a problem with this file is in the Result, never an
// error. Only ctx's cancellation is returned as an error (the file is then
// left as it was).
func Upgrade(ctx context.Context, path string, opt Options) (*Result, error) {
	if opt.Ops.OpenFile == nil {
		opt.Ops = durable.OS
	}
	u := &upgrader{ctx: ctx, path: path, opt: opt, ops: opt.Ops, res: &Result{Path: path}}
	err := u.run()
	u.cleanup()
	if ctx.Err() != nil && u.res.Status != StatusUpgraded {
		return u.res, ctx.Err()
	}
	return u.res, err
}

type upgrader struct {
	ctx  context.Context
	path string
	opt  Options
	ops  durable.Ops
	res  *Result

	lock *durable.Lock
	src  *os.File
	info os.FileInfo // the source at pass 1
	p    *plan
	ref  *refCheck

	sum    [32]byte // the source's SHA-256 (pass 1)
	size   int64
	newSum [32]byte

	tmp      string // the upgraded file, before its rename ("" once renamed or removed)
	qtmp     string // the quarantine copy before its rename
	qCreated bool   // this run put the quarantine copy in place
	recorded bool   // the journal names the quarantine copy
}

func (u *upgrader) run() error {
	if !u.opt.DryRun && (u.opt.Tree == "" || u.opt.QuarantinePath == "" || u.opt.Record == nil) {
		u.res.fail(readers.ClassIO, "upgrade: Tree, QuarantinePath and Record are required")
		return nil
	}
	if fi, err := os.Lstat(u.path); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		// Refused before the lock, which would create <link>.lock.
		u.res.refuse(0, readers.ClassSymlink, "the session file is a symlink; pisess follows none")
		return nil
	}
	if done, err := u.takeLock(); done || err != nil {
		return err
	}
	if done := u.open(); done {
		return nil
	}
	if !u.opt.DryRun {
		n, err := removeLeftovers(u.ops, u.path)
		u.res.LeftoversRemoved = n
		if err != nil {
			u.res.fail(readers.ClassIO, "remove leftover temps: "+err.Error())
			return nil
		}
	}
	if done, err := u.pass1(); done || err != nil {
		return err
	}
	if u.opt.hooks.afterPass1 != nil {
		u.opt.hooks.afterPass1()
	}
	if u.opt.DryRun {
		return u.pass2(io.Discard, nil)
	}
	return u.commit()
}

// takeLock takes the session lock. A dry run takes it only when the lock
// file exists already: creating it would write in the tree.
func (u *upgrader) takeLock() (done bool, err error) {
	lockPath := u.path + ".lock"
	if u.opt.DryRun {
		if _, err := os.Lstat(lockPath); errors.Is(err, fs.ErrNotExist) {
			return false, nil
		}
	}
	l, err := u.ops.LockFile(u.ctx, lockPath, u.opt.LockTimeout)
	switch {
	case errors.Is(err, durable.ErrLockTimeout):
		u.res.Status = StatusBusy
		u.res.Problem = &Problem{Class: readers.ClassLocked,
			Reason: fmt.Sprintf("the session lock %s stayed held for %v (is pi using the session?)", lockPath, u.opt.LockTimeout)}
		return true, nil
	case u.ctx.Err() != nil:
		return true, u.ctx.Err()
	case err != nil:
		u.res.fail(readers.ClassIO, "session lock: "+err.Error())
		return true, nil
	}
	u.lock = l
	return false, nil
}

// open opens the source without following a symlink anywhere in its path.
func (u *upgrader) open() (done bool) {
	f, err := u.ops.OpenNoFollow(u.path, unix.O_RDONLY|unix.O_NONBLOCK, 0)
	switch {
	case errors.Is(err, syscall.ELOOP):
		u.res.refuse(0, readers.ClassSymlink, "the path has a symlink in it; pisess follows none")
		return true
	case err != nil:
		u.res.fail(readers.ClassIO, err.Error())
		return true
	}
	info, err := f.Stat()
	if err != nil {
		f.Close()
		u.res.fail(readers.ClassIO, err.Error())
		return true
	}
	if !info.Mode().IsRegular() {
		f.Close()
		u.res.refuse(0, readers.ClassSpecialFile, fmt.Sprintf("not a regular file (%s)", info.Mode().Type()))
		return true
	}
	u.src, u.info = f, info
	return false
}

// source returns a reader of the whole source from its start, and the
// hash every byte read goes through.
func (u *upgrader) source(tee io.Writer) (io.Reader, hash.Hash) {
	h := sha256.New()
	w := io.Writer(h)
	if tee != nil {
		w = io.MultiWriter(h, tee)
	}
	return io.TeeReader(io.NewSectionReader(u.src, 0, math.MaxInt64), w), h
}

// pass1 validates the file and plans the upgrade.
func (u *upgrader) pass1() (done bool, err error) {
	r, h := u.source(nil)
	cr := &countingReader{r: r}
	s := newScanner(u.ctx, cr)
	p, err := scanPlan(s)
	var rf *refusal
	switch {
	case errors.As(err, &rf):
		u.res.Status, u.res.Problem = StatusRefused, &rf.Problem
		return true, nil
	case u.ctx.Err() != nil:
		return true, u.ctx.Err()
	case err != nil:
		u.res.fail(readers.ClassIO, "read: "+err.Error())
		return true, nil
	}
	u.res.Version = p.version
	switch p.version {
	case 3:
		u.res.Status = StatusCurrent
		return true, nil
	case NewerVersion:
		u.res.Status = StatusSkipped
		u.res.Problem = NotLegacy()
		return true, nil
	}
	u.p = p
	u.size = cr.n
	h.Sum(u.sum[:0])
	u.res.SourceSize, u.res.SourceSHA256 = u.size, hex.EncodeToString(u.sum[:])
	return false, nil
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.n += int64(n)
	return n, err
}

// pass2 rewrites the file to out, copying the source to tee (the
// quarantine) as it reads it, and checks that it read the same bytes as
// pass 1.
func (u *upgrader) pass2(out io.Writer, tee io.Writer) error {
	r, h := u.source(tee)
	cr := &countingReader{r: r}
	s := newScanner(u.ctx, cr)
	nh := sha256.New()
	u.ref = &refCheck{graph: normalize.Builder{Path: u.path, Unit: "line"}}
	w := newRewriter(u.p, u.res, io.MultiWriter(out, nh), u.ref)
	for {
		l, err := s.next()
		if err == io.EOF {
			break
		}
		if err == nil {
			err = w.line(l)
		}
		if err != nil {
			var rf *refusal
			switch {
			case u.ctx.Err() != nil:
				return u.ctx.Err()
			case errors.As(err, &rf):
				// Pass 1 accepted this line: the file changed in between.
				return u.changed("the file changed between the two reads")
			}
			u.res.fail(readers.ClassIO, "rewrite: "+err.Error())
			return nil
		}
	}
	var sum [32]byte
	h.Sum(sum[:0])
	if sum != u.sum || cr.n != u.size || u.p.entries != w.idx {
		return u.changed("the file changed between the two reads")
	}
	u.res.BlankLines, u.res.CRLFLines, u.res.BOM, u.res.NewlineAdded = s.blank, s.crlf, s.bom, s.noNewline
	nh.Sum(u.newSum[:0])
	u.res.NewSize, u.res.NewSHA256 = w.written, hex.EncodeToString(u.newSum[:])
	u.res.Reference = u.ref.finish(u.fetch)
	if u.opt.DryRun {
		u.res.Status = StatusPlanned
	}
	return nil
}

// fetch re-reads the source line at offset loc as the upgrade writes it,
// for the reference's id synthesis.
func (u *upgrader) fetch(loc int64) (*payload.Entry, error) {
	s := newScanner(u.ctx, io.NewSectionReader(u.src, loc, math.MaxInt64))
	l, err := s.next()
	if err != nil {
		return nil, &readers.RefusedError{Path: u.path, Class: readers.ClassIO,
			Reason: "the file changed while it was read"}
	}
	renameHookRole(&l.v)
	return payload.Decode(append(jsjson.Append(nil, l.v), '\n'))
}

// changed records that a concurrent writer changed the source.
func (u *upgrader) changed(reason string) error {
	u.res.Status = StatusChanged
	u.res.Problem = &Problem{Class: readers.ClassIO,
		Reason: reason + " (a writer that does not take the session lock?); the file was left as that writer left it"}
	return nil
}

// unchanged reports whether the source is still the file pass 1 read:
// the path names the same inode, with the same size, mtime and ctime.
func (u *upgrader) unchanged() bool {
	now, err := u.src.Stat()
	if err != nil || !sameFile(u.info, now, true) {
		return false
	}
	at, err := os.Lstat(u.path)
	return err == nil && os.SameFile(at, now)
}

func sameFile(a, b os.FileInfo, ctime bool) bool {
	sa, oka := durable.StatOf(a)
	sb, okb := durable.StatOf(b)
	if !oka || !okb || a.Size() != b.Size() {
		return false
	}
	same := sa.Dev == sb.Dev && sa.Ino == sb.Ino && sa.Mtime == sb.Mtime
	if ctime {
		same = same && sa.Ctime == sb.Ctime
	}
	return same
}

// commit writes the temp and the quarantine copy, records, and renames.
func (u *upgrader) commit() error {
	st := u.info.Sys().(*syscall.Stat_t)
	uid, gid := int(st.Uid), int(st.Gid)
	if os.Geteuid() != 0 && uid != os.Geteuid() {
		u.res.refuse(0, ClassOwner, fmt.Sprintf(
			"the file belongs to uid %d and pisess runs as uid %d: the upgraded file would change owner (run as the owner or as root)",
			uid, os.Geteuid()))
		return nil
	}
	durable.Failpoint(FailpointBeforeQuarantine)
	tmpFile, err := u.createTemp()
	if err != nil {
		u.res.fail(readers.ClassIO, "create temp: "+err.Error())
		return nil
	}
	qFile, err := u.openQuarantine(uid, gid)
	if err != nil {
		tmpFile.Close()
		u.res.fail(readers.ClassIO, "quarantine: "+err.Error())
		return nil
	}
	var tee io.Writer
	if qFile != nil {
		tee = qFile
	}
	err = u.pass2(tmpFile, tee)
	cerr := tmpFile.Close()
	if qFile != nil {
		if qerr := qFile.Close(); cerr == nil {
			cerr = qerr
		}
	}
	if err != nil || u.res.Status != "" {
		return err
	}
	if cerr != nil {
		u.res.fail(readers.ClassIO, "write: "+cerr.Error())
		return nil
	}
	if err := u.seal(uid, gid); err != nil || u.res.Status != "" {
		if err != nil {
			u.res.fail(readers.ClassIO, err.Error())
		}
		return nil
	}
	durable.Failpoint(FailpointAfterQuarantine)
	if !u.unchanged() {
		return u.changed("the file changed after it was read")
	}
	durable.Failpoint(FailpointBeforeJournal)
	if err := u.opt.Record(Event{Kind: EventUpgraded, Path: u.path, QuarantinePath: u.opt.QuarantinePath,
		SHA256: u.res.SourceSHA256, NewSHA256: u.res.NewSHA256, Detail: u.detail()}); err != nil {
		u.res.fail(readers.ClassIO, "journal: "+err.Error())
		return nil
	}
	u.recorded = true
	durable.Failpoint(FailpointAfterJournal)
	if u.opt.hooks.afterRecord != nil {
		u.opt.hooks.afterRecord()
	}
	durable.Failpoint(FailpointBeforeRename)
	if err := u.ops.Rename(u.tmp, u.path); err != nil {
		u.res.fail(readers.ClassIO, fmt.Sprintf("rename %s over %s: %v (the journal note says upgraded; the file holds sha256 %s or %s)",
			u.tmp, u.path, err, u.res.SourceSHA256, u.res.NewSHA256))
		return nil
	}
	u.tmp = ""
	durable.Failpoint(FailpointAfterRename)
	u.res.Quarantine = u.opt.QuarantinePath
	u.res.Status = StatusUpgraded
	// The old inode is unlinked now but still open: a writer that did
	// not take the session lock may have written to it since the check.
	if now, err := u.src.Stat(); err != nil || !sameFile(u.info, now, false) {
		return u.restore(uid, gid)
	}
	return nil
}

func (u *upgrader) detail() string {
	return fmt.Sprintf("version %d → 3: %d entries, %d ids assigned, %d roles renamed",
		u.p.version, u.res.Entries, len(u.res.IDs), len(u.res.RolesRenamed))
}

// createTemp creates <file>.upgrade.<uuid>.tmp beside the file.
func (u *upgrader) createTemp() (*durable.File, error) {
	tmp := TempPath(u.path, strings.ReplaceAll(uuid.NewString(), "-", ""))
	f, err := u.ops.CreatePrivate(tmp)
	if err != nil {
		return nil, err
	}
	u.tmp = tmp
	return f, nil
}

// openQuarantine prepares the quarantine copy: nil when an earlier run of
// the same correlation id left exactly these bytes there already, else
// the temp the copy is written to, <quarantine path>.tmp.
func (u *upgrader) openQuarantine(uid, gid int) (*durable.File, error) {
	q := u.opt.QuarantinePath
	if fi, err := os.Lstat(q); err == nil {
		if !fi.Mode().IsRegular() {
			return nil, fmt.Errorf("%s exists and is not a regular file", q)
		}
		if sum, err := fileSHA256(u.ops, q); err != nil {
			return nil, err
		} else if sum != u.sum {
			return nil, fmt.Errorf("%s exists with other content (correlation id used before for another upgrade of this file?)", q)
		}
		return nil, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	if err := mkdirBelow(u.ops, u.opt.Tree, filepath.Dir(q), uid, gid); err != nil {
		return nil, err
	}
	qtmp := q + TempSuffix
	if fi, err := os.Lstat(qtmp); err == nil && fi.Mode().IsRegular() {
		// Left by a run killed while copying; its name is ours.
		if err := removeFile(u.ops, qtmp); err != nil {
			return nil, err
		}
	}
	f, err := u.ops.CreatePrivate(qtmp)
	if err != nil {
		return nil, err
	}
	u.qtmp = qtmp
	return f, nil
}

// seal makes the temp durable with the original's mode and owner, and the
// quarantine copy durable in place (0600, the session's owner).
func (u *upgrader) seal(uid, gid int) error {
	if err := sealFile(u.ops, u.tmp, u.info.Mode().Perm(), uid, gid); err != nil {
		return fmt.Errorf("seal %s: %w", u.tmp, err)
	}
	if os.Geteuid() != 0 {
		if fi, err := os.Lstat(u.tmp); err != nil {
			return err
		} else if st := fi.Sys().(*syscall.Stat_t); int(st.Gid) != gid {
			u.res.refuse(0, ClassOwner, fmt.Sprintf(
				"the file's group is %d but a file pisess creates here gets group %d (run as root to keep it)", gid, st.Gid))
			return nil
		}
	}
	if u.qtmp == "" {
		return nil
	}
	if err := sealFile(u.ops, u.qtmp, 0o600, uid, gid); err != nil {
		return fmt.Errorf("seal %s: %w", u.qtmp, err)
	}
	if err := u.ops.RenameNoReplace(u.qtmp, u.opt.QuarantinePath); err != nil {
		return fmt.Errorf("quarantine %s: %w", u.opt.QuarantinePath, err)
	}
	u.qtmp, u.qCreated = "", true
	return nil
}

// restore puts the writer's version of the file back after the rename:
// the bytes of the old inode, which that writer changed after the last
// check, with the original's mode and owner.
func (u *upgrader) restore(uid, gid int) error {
	u.res.Status = StatusChanged
	u.res.RestoredAfter = true
	// The restore temp may end up the only copy of the writer's bytes: it
	// is never removed, even when a later step fails.
	tmp := u.path + RestoreInfix + strings.ReplaceAll(uuid.NewString(), "-", "") + TempSuffix
	fail := func(step string, err error) error {
		u.res.Status = StatusFailed
		u.res.Problem = &Problem{Class: readers.ClassIO, Reason: fmt.Sprintf(
			"the file changed after the last check (a writer without the session lock?) and putting that version back "+
				"failed at %s: %v; the upgraded file is in place, the original at %s, the writer's version in %s",
			step, err, u.opt.QuarantinePath, tmp)}
		return nil
	}
	f, err := u.ops.CreatePrivate(tmp)
	if err != nil {
		return fail("create", err)
	}
	h := sha256.New()
	_, err = io.Copy(io.MultiWriter(f, h), io.NewSectionReader(u.src, 0, math.MaxInt64))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fail("copy", err)
	}
	if err := sealFile(u.ops, tmp, u.info.Mode().Perm(), uid, gid); err != nil {
		return fail("seal", err)
	}
	if err := u.ops.Rename(tmp, u.path); err != nil {
		return fail("rename", err)
	}
	sum := hex.EncodeToString(h.Sum(nil))
	u.res.Problem = &Problem{Class: readers.ClassIO, Reason: "the file changed after the last check (a writer without the session lock?): " +
		"its new content was put back in place of the upgrade; the original before that change is at " + u.opt.QuarantinePath}
	if err := u.opt.Record(Event{Kind: EventRestored, Path: u.path, QuarantinePath: u.opt.QuarantinePath,
		SHA256: sum, NewSHA256: u.res.NewSHA256,
		Detail: "changed by another writer during the upgrade: its version (sha256) was put back over the upgraded file (newSha256)"}); err != nil {
		u.res.Problem.Reason += "; recording that in the journal failed: " + err.Error()
	}
	return nil
}

// cleanup releases what run left: temps not renamed, the source, the lock.
func (u *upgrader) cleanup() {
	for _, p := range []string{u.tmp, u.qtmp} {
		if p != "" {
			_ = removeFile(u.ops, p)
		}
	}
	if u.qCreated && !u.recorded {
		// Nothing names the copy: the journal note was never written.
		_ = removeFile(u.ops, u.opt.QuarantinePath)
	}
	if u.src != nil {
		u.src.Close()
	}
	if u.lock != nil {
		_ = u.lock.Unlock()
	}
}

func fileSHA256(ops durable.Ops, path string) ([32]byte, error) {
	var sum [32]byte
	f, err := ops.OpenNoFollow(path, unix.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return sum, err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return sum, err
	}
	h.Sum(sum[:0])
	return sum, nil
}

// checkHeader is the reference's check of the upgraded header
// (SessionHeader::validate, version 3 only).
func checkHeader(text []byte) *Problem {
	h, err := normalize.ParseHeader(text)
	if err != nil {
		return &Problem{Class: readers.ClassBadHeader, Reason: "Invalid header in JSONL: " + err.Error()}
	}
	if p := normalize.CheckHeader(h, false); p != nil {
		return &Problem{Class: p.Class, Reason: "Invalid session header in JSONL: " + p.Reason}
	}
	return nil
}

// Sniff reads the header of the file at path the way pi does (blank lines
// and a leading byte-order mark skipped, see the package comment) and
// returns its version: 1, 2 or 3. An error is a *readers.RefusedError
// (the file is not a session pi reads, or its version is unknown) or an
// I/O error. It reads only up to the first non-blank line and writes
// nothing. Discovery reads headers with the reference's stricter rules;
// a file it does not take as a session may still be one pi opens, and so
// one to upgrade.
func Sniff(path string) (int, error) {
	f, err := durable.OS.OpenNoFollow(path, unix.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil {
		return 0, err
	} else if !fi.Mode().IsRegular() {
		return 0, &readers.RefusedError{Path: path, Class: readers.ClassSpecialFile, Reason: "not a regular file"}
	}
	l, err := newScanner(context.Background(), f).next()
	if err == io.EOF {
		err = refuse(0, readers.ClassEmptyFile, "the file holds no line")
	}
	if err == nil {
		var v int
		if v, err = headerVersion(l); err == nil {
			return v, nil
		}
	}
	var rf *refusal
	if errors.As(err, &rf) {
		return 0, &readers.RefusedError{Path: path, Line: rf.Line, Class: rf.Class, Reason: rf.Reason}
	}
	return 0, err
}

// NotLegacy is the report of a file whose header version is above 3.
func NotLegacy() *Problem {
	return &Problem{Line: 1, Class: ClassNotLegacy,
		Reason: "the header version is newer than 3: pi treats the file as current and never rewrites it; not a legacy file"}
}
