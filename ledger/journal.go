package ledger

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"unicode/utf8"

	"pisess/writers/durable"
	"pisess/writers/wire"

	"golang.org/x/sys/unix"
)

// Names inside a tree.
const (
	// PisessDir is the tree's own directory.
	PisessDir = ".pisess"
	// JournalName is the journal's file name inside PisessDir.
	JournalName = "journal.jsonl"
)

// JournalPath returns <tree>/.pisess/journal.jsonl.
func JournalPath(tree string) string { return filepath.Join(tree, PisessDir, JournalName) }

// Record is one journal line: exactly one of Event, Note and Run is set.
type Record struct {
	Line  int64 // 1-based line number; 0 for a record not read from a journal
	Event *wire.MigrationEvent
	Note  *Note
	Run   *RunRecord
}

// EventRecord and NoteRecord build records to append.
func EventRecord(ev wire.MigrationEvent) Record { return Record{Event: &ev} }
func NoteRecord(n Note) Record                  { return Record{Note: &n} }

// CorrelationID is the record's correlation id.
func (r Record) CorrelationID() string {
	switch {
	case r.Event != nil:
		return r.Event.CorrelationID
	case r.Note != nil:
		return r.Note.CorrelationID
	case r.Run != nil:
		return r.Run.CorrelationID
	}
	return ""
}

// Session is the session file the record concerns: an event's sourcePath
// or a note's session ("" for a run record).
func (r Record) Session() string {
	switch {
	case r.Event != nil:
		return r.Event.SourcePath
	case r.Note != nil:
		return r.Note.Session
	}
	return ""
}

// encode checks r and returns its line.
func (r Record) encode() ([]byte, error) {
	switch {
	case r.Event != nil && r.Note != nil || r.Run != nil && (r.Event != nil || r.Note != nil):
		return nil, errors.New("journal record: more than one of an event, a note and a run record")
	case r.Run != nil:
		if err := CheckRun(*r.Run); err != nil {
			return nil, err
		}
		return AppendRun(nil, *r.Run), nil
	case r.Event != nil:
		if err := wire.CheckMigrationEvent(*r.Event); err != nil {
			return nil, fmt.Errorf("journal record: %w", err)
		}
		return wire.AppendMigrationEvent(nil, *r.Event), nil
	case r.Note != nil:
		if err := CheckNote(*r.Note); err != nil {
			return nil, err
		}
		return AppendNote(nil, *r.Note), nil
	}
	return nil, errors.New("journal record: none of an event, a note and a run record")
}

// BadLine is a journal line that does not parse, or a record refused as
// forged (ErrForged: a path outside the tree, or anywhere pisess would
// never have written it); the journal reads on, and no caller acts on it.
type BadLine struct {
	Line   int64
	Detail string
	// Forged is set for a record that parses but names a path pisess
	// refuses; CorrelationID is then the run it claims to belong to.
	Forged        bool
	CorrelationID string
}

// MaxJournalLine bounds a journal line: pisess's own records are a few
// hundred bytes, so a longer line is garbage (or an attempt to make every
// reader buffer it) and is reported without being kept in memory.
const MaxJournalLine = 1 << 20

// Journal is a tree's journal, <tree>/.pisess/journal.jsonl.
type Journal struct {
	tree string
	path string
	ops  durable.Ops
	mu   sync.Mutex

	// What one append learns spares the next ones of this Journal work
	// (an append was ~14 system calls; issue 14): the tree's owner, that
	// .pisess/ exists, and where the line it wrote whole ended. A journal
	// still of that size and identity ends with that line: no torn tail
	// to look for.
	uid, gid int
	ready    bool
	end      journalEnd
	// unsynced counts the appends not yet known durable: a Sync with none
	// has nothing to do (a run that appended nothing opens nothing).
	unsynced int
	// app holds the journal open once an append has left it whole (end
	// set): the next append whose look finds it as it was writes there,
	// three system calls instead of nine (issue 14). Close releases it.
	app *durable.Appender

	// run is the start record of the run appending through this Journal
	// (BeginRun), written with its first record, after hold (which records
	// the run as the tree lock's holder); runStarted once it is.
	run        *RunRecord
	hold       func() error
	runStarted bool
}

// journalEnd identifies the journal file as an append left it: its change
// time moves with any write, so a file replaced or written by another has
// another one even where its inode number and size were reused.
type journalEnd struct {
	dev, ino uint64
	size     int64
	ctime    durable.Timespec
}

// journalEndOf returns what identifies the journal file now (ok false
// when it is missing or not a regular file).
func journalEndOf(path string) (journalEnd, bool) {
	fi, err := os.Lstat(path)
	if err != nil || !fi.Mode().IsRegular() {
		return journalEnd{}, false
	}
	st, ok := durable.StatOf(fi)
	if !ok {
		return journalEnd{}, false
	}
	return journalEnd{dev: st.Dev, ino: st.Ino, size: fi.Size(), ctime: st.Ctime}, true
}

// follows reports whether e is the journal at now with line appended and
// nothing else.
func (e journalEnd) follows(now journalEnd, line []byte) bool {
	return e.dev == now.dev && e.ino == now.ino && e.size == now.size+int64(len(line))
}

// endOfStat is journalEnd from a stat of the open journal.
func endOfStat(st unix.Stat_t) journalEnd {
	s := durable.StatOfUnix(&st)
	return journalEnd{dev: s.Dev, ino: s.Ino, size: s.Size, ctime: s.Ctime}
}

// OpenJournal returns the journal of tree, an existing directory, using
// durable.OS. Nothing is created until the first Append, so that read-only
// commands (status, verify, fsck without --repair) leave no trace.
func OpenJournal(tree string) (*Journal, error) { return OpenJournalWith(durable.OS, tree) }

// OpenJournalWith is OpenJournal with the given file operations.
func OpenJournalWith(ops durable.Ops, tree string) (*Journal, error) {
	// Records are confined to the tree by path: it must be absolute.
	tree, err := filepath.Abs(tree)
	if err != nil {
		return nil, fmt.Errorf("open journal: %w", err)
	}
	fi, err := os.Lstat(tree)
	if err != nil {
		return nil, fmt.Errorf("open journal: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("open journal: %s is not a directory", tree)
	}
	// Checked now, not at each append: a journal of the wrong type would
	// fail every session's first record, and the run would go on.
	for _, o := range pisessObjects {
		if o.rel == filepath.Join(PisessDir, "lock") {
			continue
		}
		if err := wrongType(tree, o); err != nil {
			return nil, fmt.Errorf("open journal: %w", err)
		}
	}
	return &Journal{tree: tree, path: JournalPath(tree), ops: ops}, nil
}

// Path is the journal file's path.
func (j *Journal) Path() string { return j.path }

// Tree is the journal's tree.
func (j *Journal) Tree() string { return j.tree }

// Append writes rec as one whole line and fsyncs it. .pisess/ is created
// 0700 and the journal 0600 when missing; when pisess runs as root they are
// given to the owner of the tree, as everything pisess creates in a tree
// is. A torn last line left by a killed run is first terminated, so the new
// record is whole and the fragment stays, reported as a BadLine.
//
// Paths inside the tree are stored tree-relative; a record naming a path
// that a reader would refuse as forged is not written.
func (j *Journal) Append(rec Record) error { return j.append(true, rec) }

// AppendAll is Append for several records written at once, in order, with
// one open, write and fsync: they reach the disk together.
func (j *Journal) AppendAll(recs ...Record) error { return j.append(true, recs...) }

// AppendUnsynced is Append without the fsync, for records that no recovery
// depends on (a session's planned, staging_copy and integrity_check
// events, its completed event): the record reaches the disk with the next
// Append (whose fsync writes back the whole file), a seal of the same
// filesystem (durable.Ops.SealTree) or Sync. A crash can lose it, as it can
// lose a record the run had not yet written: what recovery reads —
// cutover_commit and the notes — is always appended with Append. The
// journal's first record is always synced, with its directory entry.
func (j *Journal) AppendUnsynced(rec Record) error { return j.append(false, rec) }

// AppendAllUnsynced is AppendAll without the fsync: records that must be
// durable before something they describe is published, made so by Sync
// before the caller publishes it (a refresh in place: its records and the
// sidecar are made durable together, and only then is the sidecar
// committed).
func (j *Journal) AppendAllUnsynced(recs ...Record) error { return j.append(false, recs...) }

// AppendEvents appends migration events as one write: fsynced (AppendAll)
// when sync, else without (AppendAllUnsynced: the progress events no
// recovery reads, made durable by the run's next seal or Sync).
func (j *Journal) AppendEvents(sync bool, evs ...wire.MigrationEvent) error {
	recs := make([]Record, len(evs))
	for i, ev := range evs {
		recs[i] = EventRecord(ev)
	}
	return j.append(sync, recs...)
}

// Sync makes every record appended so far durable (before a publication,
// at the end of a run).
func (j *Journal) Sync() error { return j.SyncUnlessSealed(0, false) }

// SyncUnlessSealed is Sync after a seal of a whole filesystem
// (durable.Ops.SealFilesystem) that began after the records were
// appended: nothing more when the journal is on that filesystem (dev, with
// whole), else an fsync.
func (j *Journal) SyncUnlessSealed(dev uint64, whole bool) error {
	if whole {
		if end, ok := journalEndOf(j.path); ok && end.dev == dev {
			return nil
		}
	}
	return j.sync()
}

func (j *Journal) sync() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.unsynced == 0 {
		return nil
	}
	if j.app != nil {
		if now, ok := journalEndOf(j.path); ok && now == j.end {
			if err := j.app.Sync(); err != nil {
				return fmt.Errorf("journal sync %s: %w", j.path, err)
			}
			j.unsynced = 0
			return nil
		}
	}
	return j.syncByPath()
}

// syncByPath opens the journal and fsyncs it. j.mu is held.
func (j *Journal) syncByPath() error {
	f, err := openRegular(j.ops, j.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("journal sync: %w", err)
	}
	defer f.Close()
	if err := j.ops.SyncFile(f); err != nil {
		return fmt.Errorf("journal sync %s: %w", j.path, err)
	}
	j.unsynced = 0 // appends hold j.mu: none came in between
	return nil
}

func (j *Journal) append(sync bool, recs ...Record) error {
	var line []byte // the records' lines, each with its newline
	for _, rec := range recs {
		if err := checkPaths(j.tree, rec); err != nil {
			return err
		}
		l, err := relativeRecord(j.tree, rec).encode()
		if err != nil {
			return err
		}
		line = append(line, l...)
	}
	if len(line) == 0 {
		return nil
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	starting := j.run != nil && !j.runStarted
	if starting {
		if j.hold != nil {
			if err := j.hold(); err != nil {
				return fmt.Errorf("journal append: %w", err)
			}
		}
		line = append(AppendRun(nil, *j.run), line...)
	}
	if err := j.appendLocked(sync, line); err != nil {
		return err
	}
	if starting {
		j.runStarted = true
	}
	return nil
}

// BeginRun makes start (a RunStart record) the first line this Journal
// writes, with the first record appended through it, after hold (nil:
// none) has recorded the run as the tree lock's holder: a run that
// appends nothing writes neither (issue 34 §3: a run with nothing to do
// changes nothing).
func (j *Journal) BeginRun(start RunRecord, hold func() error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.run, j.hold, j.runStarted = &start, hold, false
}

// EndRun appends end (a RunEnd record, unsynced: the caller syncs) when
// the run's start was written, or always when force (a run that changed
// the tree without a record of its own, such as the takeover of a dead
// run's lock). The run is over: later appends write no start.
func (j *Journal) EndRun(end RunRecord, force bool) error {
	j.mu.Lock()
	started := j.runStarted
	j.mu.Unlock()
	if !started && !force {
		j.mu.Lock()
		j.run = nil
		j.mu.Unlock()
		return nil
	}
	err := j.append(false, RunRecordOf(end))
	j.mu.Lock()
	j.run = nil
	j.mu.Unlock()
	return err
}

// RunStarted reports whether the run's start record was written.
func (j *Journal) RunStarted() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.runStarted
}

// appendLocked writes line (whole records) with j.mu held.
func (j *Journal) appendLocked(sync bool, line []byte) error {
	if !j.ready {
		dir := filepath.Dir(j.path)
		uid, gid, err := j.ops.Owner(j.tree)
		if err != nil {
			return fmt.Errorf("journal append: %w", err)
		}
		if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
			if err := j.ops.MkdirPrivate(dir); err != nil {
				return fmt.Errorf("journal append: %w", err)
			}
			if err := j.ops.ChownIfRoot(dir, uid, gid); err != nil {
				return fmt.Errorf("journal append: %w", err)
			}
		}
		j.uid, j.gid, j.ready = uid, gid, true
	}
	exists := true
	now, found := journalEndOf(j.path)
	if found && now == j.end && j.app != nil {
		return j.appendHeld(sync, line, now)
	}
	j.closeHeld()
	if !found || now != j.end {
		torn, ok, err := j.tornTail()
		if err != nil {
			return fmt.Errorf("journal append: %w", err)
		}
		if torn {
			if err := j.ops.AppendLine(j.path, []byte{'\n'}); err != nil {
				return fmt.Errorf("journal append: terminate torn line: %w", err)
			}
			now.size++ // the terminator
		}
		exists = ok
	}
	ops := j.ops
	ops.DeferSync = ops.DeferSync || (!sync && exists)
	j.end = journalEnd{}
	j.unsynced++ // a failed append may have written part of its line
	if err := ops.AppendLines(j.path, line); err != nil {
		return fmt.Errorf("journal append: %w", err)
	}
	if !ops.DeferSync {
		j.unsynced = 0 // its fsync wrote back the whole file
	}
	if !exists {
		if err := j.ops.ChownIfRoot(j.path, j.uid, j.gid); err != nil {
			return fmt.Errorf("journal append: %w", err)
		}
		return nil // the next append looks at the new file
	}
	if after, ok := journalEndOf(j.path); ok && found && after.follows(now, line) {
		j.end = after // nothing but this line was written since the look
		if app, st, err := j.ops.OpenAppender(j.path); err == nil {
			if endOfStat(st) == after {
				j.app = app
			} else {
				app.Close()
			}
		}
	}
	return nil
}

// appendHeld appends line to the journal held open (j.app), which the look
// that gave now found as the last append left it. j.mu is held.
func (j *Journal) appendHeld(sync bool, line []byte, now journalEnd) error {
	j.end = journalEnd{}
	j.unsynced++ // a failed append may have written part of its line
	st, err := j.app.Append(line, now.size)
	if err == nil && sync && !j.ops.DeferSync {
		if err = j.app.Sync(); err == nil {
			j.unsynced = 0 // the fsync wrote back the whole file
		}
	}
	if err != nil {
		j.closeHeld()
		return fmt.Errorf("journal append: %w", err)
	}
	if after := endOfStat(st); after.follows(now, line) {
		j.end = after
	} else {
		j.closeHeld() // another wrote too: the next append looks again
	}
	return nil
}

// closeHeld closes the journal held open, if any. j.mu is held.
func (j *Journal) closeHeld() {
	if j.app != nil {
		_ = j.app.Close()
		j.app = nil
	}
}

// Close releases what the journal holds open; it may be appended to again
// (which opens it again).
func (j *Journal) Close() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.closeHeld()
	return nil
}

// tornTail reports whether the journal exists and its last byte is not a
// newline.
func (j *Journal) tornTail() (torn, exists bool, err error) {
	f, err := openRegular(j.ops, j.path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, false, nil
	}
	if err != nil {
		return false, false, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return false, true, err
	}
	if fi.Size() == 0 {
		return false, true, nil
	}
	var b [1]byte
	if _, err := f.ReadAt(b[:], fi.Size()-1); err != nil {
		return false, true, err
	}
	return b[0] != '\n', true, nil
}

// Scan reads the whole journal in order, calling fn for every record; it
// streams, so memory does not grow with the journal. Lines that do not
// parse are returned as BadLines (a torn last line among them); blank
// lines are skipped. A missing journal is empty. An error from fn stops the
// scan and is returned.
func (j *Journal) Scan(fn func(Record) error) ([]BadLine, error) {
	f, err := openRegular(j.ops, j.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read journal: %w", err)
	}
	defer f.Close()
	return j.scan(f, fn)
}

// scan is Scan over any reader of journal bytes.
func (j *Journal) scan(in io.Reader, fn func(Record) error) ([]BadLine, error) {
	r := bufio.NewReaderSize(in, 64<<10)
	var bad []BadLine
	var lineNo int64
	for {
		line, err := readLine(r, MaxJournalLine)
		if len(line) == 0 && err == io.EOF {
			return bad, nil
		}
		lineNo++
		if err != nil && err != io.EOF {
			if errors.Is(err, errLineTooLong) {
				bad = append(bad, BadLine{Line: lineNo, Detail: fmt.Sprintf("line is longer than %d bytes (not a pisess record)", MaxJournalLine)})
				continue
			}
			return bad, fmt.Errorf("read journal %s: %w", j.path, err)
		}
		rec, detail := parseRecord(line)
		if detail != "" {
			bad = append(bad, BadLine{Line: lineNo, Detail: detail})
			continue
		}
		if rec == nil {
			continue // blank
		}
		if err := confineRecord(j.tree, rec); err != nil {
			bad = append(bad, BadLine{Line: lineNo, Detail: err.Error(), Forged: true, CorrelationID: rec.CorrelationID()})
			continue
		}
		rec.Line = lineNo
		if err := fn(*rec); err != nil {
			return bad, err
		}
	}
}

// parseRecord parses one journal line; nil and "" for a blank line.
func parseRecord(line []byte) (*Record, string) {
	if line[len(line)-1] != '\n' {
		return nil, "torn last line (no newline): a write was cut off"
	}
	if !utf8.Valid(line) {
		return nil, "not UTF-8"
	}
	if strings.TrimSpace(string(line)) == "" {
		return nil, ""
	}
	line = trimCR(line)
	v, err := wire.ParseJSON(line[:len(line)-1], nil)
	if err != nil {
		return nil, err.Error()
	}
	schema, _ := v.Get("schema")
	switch schema.Str {
	case wire.SchemaMigrationEvent:
		ev, err := wire.ParseMigrationEvent(line)
		if err != nil {
			return nil, err.Error()
		}
		return &Record{Event: &ev}, ""
	case SchemaNote:
		n, err := ParseNote(line)
		if err != nil {
			return nil, err.Error()
		}
		return &Record{Note: &n}, ""
	case SchemaRun:
		r, err := ParseRun(line)
		if err != nil {
			return nil, err.Error()
		}
		return &Record{Run: &r}, ""
	}
	return nil, fmt.Sprintf("unknown schema %q", schema.Str)
}

// Records returns the records of one run, in journal order; with
// correlationID "" every record. Bad lines are skipped (Scan reports them).
func (j *Journal) Records(correlationID string) ([]Record, error) {
	out, _, err := j.RunRecords(correlationID)
	return out, err
}

// RunRecords is Records with the records of the run that were refused as
// forged (their paths lie outside the tree or where pisess never writes):
// a rollback reports them and acts on none of them.
func (j *Journal) RunRecords(correlationID string) ([]Record, []BadLine, error) {
	var out []Record
	bad, err := j.Scan(func(r Record) error {
		if correlationID == "" || r.CorrelationID() == correlationID {
			out = append(out, r)
		}
		return nil
	})
	var forged []BadLine
	for _, b := range bad {
		if b.Forged && (correlationID == "" || b.CorrelationID == correlationID) {
			forged = append(forged, b)
		}
	}
	return out, forged, err
}

// CorrelationIDs returns the correlation ids in the journal, in the order
// of their first record.
func (j *Journal) CorrelationIDs() ([]string, error) {
	seen := map[string]bool{}
	var out []string
	_, err := j.Scan(func(r Record) error {
		if id := r.CorrelationID(); !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
		return nil
	})
	return out, err
}

// LastMigration returns the correlation id of the last run that completed
// a migration of sessionPath (a completed event with outcome ok), for
// status. ok is false when there is none or the journal cannot be read:
// status reports what it can.
func (j *Journal) LastMigration(sessionPath string) (correlationID string, ok bool) {
	want := filepath.Clean(sessionPath)
	_, err := j.Scan(func(r Record) error {
		if ev := r.Event; ev != nil && ev.Phase == wire.PhaseCompleted && ev.Outcome == wire.OutcomeOK &&
			filepath.Clean(ev.SourcePath) == want {
			correlationID, ok = ev.CorrelationID, true
		}
		return nil
	})
	if err != nil {
		return "", false
	}
	return correlationID, ok
}

// BadLines returns the journal's lines that do not parse, for fsck.
func (j *Journal) BadLines() ([]BadLine, error) {
	return j.Scan(func(Record) error { return nil })
}
