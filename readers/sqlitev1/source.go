package sqlitev1

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"pisess/readers"
	"pisess/readers/normalize"
	"pisess/readers/payload"
)

// MaxJSONBytes is the reference's limit on one stored JSON text
// (session_sqlite.rs MAX_SQLITE_JSON_BYTES).
const MaxJSONBytes = 100 << 20

// DefaultBusyTimeout is how long Open waits for a writer's exclusive lock.
const DefaultBusyTimeout = 5 * time.Second

// Options tunes Open.
type Options struct {
	// BusyTimeout bounds the wait for another process's exclusive lock
	// (0: DefaultBusyTimeout).
	BusyTimeout time.Duration
	// TempDir is where the private copy is made ("": os.TempDir()).
	TempDir string
}

// Source streams the entries of one SQLite session, from a private copy
// (see the package documentation). It is not safe for concurrent use.
type Source struct {
	path   string
	snap   *snapshot
	db     *sql.DB
	conn   *sql.Conn
	header readers.Header
	graph  *normalize.Builder
	rows   *sql.Rows // pass 2
	seq    int64     // seq of the row Next read last
	err    error
}

var _ readers.Source = (*Source)(nil)

// Open opens the session database at path with the default options.
func Open(path string) (*Source, error) { return OpenWith(path, Options{}) }

// OpenWith copies the database at path into a private directory, checks
// the whole session (pass 1) and returns a Source streaming its entries.
// Every refusal is a *readers.RefusedError whose Line is the entry's seq
// (0 when the problem is not one entry's).
func OpenWith(path string, opt Options) (*Source, error) {
	if opt.BusyTimeout <= 0 {
		opt.BusyTimeout = DefaultBusyTimeout
	}
	snap, err := takeSnapshot(path, opt.TempDir, opt.BusyTimeout)
	if err != nil {
		return nil, err
	}
	s := &Source{path: path, snap: snap, graph: &normalize.Builder{Path: path, Unit: "seq"}}
	if err := s.open(); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

func (s *Source) open() error {
	u := url.URL{Scheme: "file", Path: s.snap.db}
	// The copy is private: WAL recovery or a hot-journal rollback may write
	// it. query_only keeps every statement from writing; trusted_schema=0
	// keeps a crafted schema from running functions through views.
	db, err := sql.Open("sqlite", u.String()+"?_pragma=query_only(1)&_pragma=trusted_schema(0)")
	if err != nil {
		return s.sqlRefusal(0, "open", err)
	}
	s.db = db
	ctx := context.Background()
	if s.conn, err = db.Conn(ctx); err != nil {
		return s.sqlRefusal(0, "open", err)
	}
	if err := s.quickCheck(ctx); err != nil {
		return err
	}
	if err := s.checkSchema(ctx); err != nil {
		return err
	}
	if err := s.readHeader(ctx); err != nil {
		return err
	}
	if err := s.scan(ctx); err != nil {
		return err
	}
	return s.graph.Finish(s.fetch)
}

// Header returns the session header.
func (s *Source) Header() readers.Header { return s.header }

// Branches counts the entries with two or more children (readers.Linked):
// Open has checked every link before the first entry is read.
func (s *Source) Branches() uint64 { return s.graph.Branches() }

// Size is the length of the database file as copied (its -wal is not
// counted).
func (s *Source) Size() int64 { return s.snap.size }

// SHA256 is the digest of the database file as copied (its -wal is not
// counted: a database with a -wal is not described by this alone).
func (s *Source) SHA256() [32]byte { return s.snap.digest }

// FileInfo is the database file's status when it was copied.
func (s *Source) FileInfo() os.FileInfo { return s.snap.info }

// Next returns the next entry in seq order, or io.EOF after the last. Any
// other error is a *readers.RefusedError and is final.
func (s *Source) Next() (readers.Entry, error) {
	if s.err != nil {
		return readers.Entry{}, s.err
	}
	e, err := s.next()
	if err != nil {
		s.err = err
	}
	return e, err
}

func (s *Source) next() (readers.Entry, error) {
	ctx := context.Background()
	if s.rows == nil {
		rows, err := s.conn.QueryContext(ctx, "SELECT seq, typeof(seq), typeof(json), json FROM pi_session_entries ORDER BY seq")
		if err != nil {
			return readers.Entry{}, s.sqlRefusal(0, "read entries", err)
		}
		s.rows = rows
	}
	if !s.rows.Next() {
		if err := s.rows.Err(); err != nil {
			return readers.Entry{}, s.sqlRefusal(s.seq+1, "read entries", err)
		}
		if !s.graph.Done() {
			return readers.Entry{}, s.refuse(s.seq+1, readers.ClassIO, "the private copy changed while it was read", nil)
		}
		s.graph.Release()
		return readers.Entry{}, io.EOF
	}
	seq, js, err := s.row(s.rows)
	if err != nil {
		return readers.Entry{}, err
	}
	s.seq = seq
	e, err := payload.Decode(js)
	if err != nil {
		return readers.Entry{}, s.refuse(seq, readers.ClassIO, "the private copy changed while it was read", err)
	}
	id, synthesized, err := s.graph.Resolve(seq, e)
	if err != nil {
		return readers.Entry{}, err
	}
	return readers.Entry{
		ID:            id,
		ParentID:      e.ParentID,
		Type:          e.Type,
		Timestamp:     e.Timestamp,
		Payload:       e.Canonical(),
		Position:      seq,
		SynthesizedID: synthesized,
		Role:          e.Role,
		Name:          e.Name,
	}, nil
}

// Close releases the database and removes the private copy.
func (s *Source) Close() error {
	var errs []error
	if s.rows != nil {
		errs = append(errs, s.rows.Close())
	}
	if s.conn != nil {
		errs = append(errs, s.conn.Close())
	}
	if s.db != nil {
		errs = append(errs, s.db.Close())
	}
	if s.snap != nil {
		errs = append(errs, s.snap.remove())
		s.snap.dir = ""
	}
	return errors.Join(errs...)
}

// quickCheck refuses a damaged database before anything is read from it.
func (s *Source) quickCheck(ctx context.Context) error {
	rows, err := s.conn.QueryContext(ctx, "PRAGMA quick_check(5)")
	if err != nil {
		return s.sqlRefusal(0, "quick_check", err)
	}
	defer rows.Close()
	var problems []string
	for rows.Next() {
		var msg string
		if err := rows.Scan(&msg); err != nil {
			return s.sqlRefusal(0, "quick_check", err)
		}
		if msg != "ok" {
			problems = append(problems, msg)
		}
	}
	if err := rows.Err(); err != nil {
		return s.sqlRefusal(0, "quick_check", err)
	}
	if len(problems) > 0 {
		return s.refuse(0, readers.ClassCorrupt, "SQLite quick_check: "+strings.Join(problems, "; "), nil)
	}
	return nil
}

// checkSchema requires the two tables the reference reads, as tables, with
// the columns it reads (pi_session_meta is not read here: the reference
// does without it).
func (s *Source) checkSchema(ctx context.Context) error {
	for _, t := range []struct {
		name string
		cols []string
	}{
		{"pi_session_header", []string{"id", "json"}},
		{"pi_session_entries", []string{"seq", "json"}},
	} {
		var typ string
		err := s.conn.QueryRowContext(ctx, "SELECT type FROM sqlite_schema WHERE name = ?", t.name).Scan(&typ)
		if errors.Is(err, sql.ErrNoRows) {
			return s.refuse(0, readers.ClassBadSchema, "not a pi SQLite session: no table "+t.name, nil)
		}
		if err != nil {
			return s.sqlRefusal(0, "read schema", err)
		}
		if typ != "table" {
			return s.refuse(0, readers.ClassBadSchema, fmt.Sprintf("not a pi SQLite session: %s is a %s, not a table", t.name, typ), nil)
		}
		have := map[string]bool{}
		rows, err := s.conn.QueryContext(ctx, "SELECT name FROM pragma_table_info(?)", t.name)
		if err != nil {
			return s.sqlRefusal(0, "read schema", err)
		}
		for rows.Next() {
			var c string
			if err := rows.Scan(&c); err != nil {
				rows.Close()
				return s.sqlRefusal(0, "read schema", err)
			}
			have[c] = true
		}
		rows.Close()
		for _, c := range t.cols {
			if !have[c] {
				return s.refuse(0, readers.ClassBadSchema, fmt.Sprintf("not a pi SQLite session: table %s has no column %s", t.name, c), nil)
			}
		}
	}
	return nil
}

// readHeader is the reference's read_stored_header: exactly one row, its
// json a valid version-3 SessionHeader, the row id equal to the JSON's id.
func (s *Source) readHeader(ctx context.Context) error {
	rows, err := s.conn.QueryContext(ctx,
		"SELECT typeof(id), id, typeof(json), json FROM pi_session_header ORDER BY id")
	if err != nil {
		return s.sqlRefusal(0, "read header", err)
	}
	defer rows.Close()
	type hrow struct {
		idType, jsType string
		id, js         []byte
	}
	var got []hrow
	for rows.Next() {
		var r hrow
		if err := rows.Scan(&r.idType, &r.id, &r.jsType, &r.js); err != nil {
			return s.sqlRefusal(0, "read header", err)
		}
		got = append(got, r)
	}
	if err := rows.Err(); err != nil {
		return s.sqlRefusal(0, "read header", err)
	}
	switch {
	case len(got) == 0:
		return s.refuse(0, readers.ClassBadHeader, "SQLite session missing header row", nil)
	case len(got) > 1:
		return s.refuse(0, readers.ClassBadHeader, fmt.Sprintf("SQLite session contains multiple header rows (%d)", len(got)), nil)
	}
	r := got[0]
	if r.jsType != "text" || r.idType != "text" {
		return s.refuse(0, readers.ClassBadHeader, fmt.Sprintf(
			"SQLite row read failed: header id is %s and json is %s; both must be text", r.idType, r.jsType), nil)
	}
	if err := s.checkText("session header", 0, r.js); err != nil {
		return err
	}
	h, err := normalize.ParseHeader(r.js)
	if err != nil {
		return s.refuse(0, readers.ClassBadHeader, "Invalid header in SQLite: "+err.Error(), err)
	}
	if p := normalize.CheckHeader(h, false); p != nil {
		return s.refuse(0, p.Class, "Invalid session header: "+p.Reason, nil)
	}
	if !utf8.Valid(r.id) || string(r.id) != h.ID {
		return s.refuse(0, readers.ClassBadHeader, fmt.Sprintf(
			"SQLite session header row ID does not match its serialized header ID (row %q, header %q)", r.id, h.ID), nil)
	}
	s.header = h.Readers(readers.FormatSQLitev1, r.js)
	return nil
}

// scan is pass 1 over the entries, in seq order: contiguity, then the
// entry itself, row by row, as the reference's read_stored_entries.
func (s *Source) scan(ctx context.Context) error {
	rows, err := s.conn.QueryContext(ctx, "SELECT seq, typeof(seq), typeof(json), json FROM pi_session_entries ORDER BY seq")
	if err != nil {
		return s.sqlRefusal(0, "read entries", err)
	}
	defer rows.Close()
	var want int64 = 1
	for rows.Next() {
		seq, js, err := s.row(rows)
		if err != nil {
			return err
		}
		if seq != want {
			return s.refuse(seq, readers.ClassBadSequence, fmt.Sprintf(
				"SQLite session entry sequence is not contiguous: expected=%d actual=%d", want, seq), nil)
		}
		want++
		e, err := payload.Decode(js)
		if err != nil {
			class, detail := readers.ClassBadEntry, err.Error()
			var pe *payload.Error
			if errors.As(err, &pe) {
				class, detail = pe.Class, pe.Detail
			}
			return s.refuse(seq, class, "Bad SQLite entry: "+detail, err)
		}
		s.graph.Add(seq, seq, e)
	}
	if err := rows.Err(); err != nil {
		return s.sqlRefusal(want, "read entries", err)
	}
	return nil
}

// row scans one entry row and checks its json is text, UTF-8 and within
// the limit.
func (s *Source) row(rows *sql.Rows) (int64, []byte, error) {
	var (
		seqv    any
		seqType string
		typ     string
		js      []byte
		seq, ok = int64(0), false
	)
	if err := rows.Scan(&seqv, &seqType, &typ, &js); err != nil {
		return 0, nil, s.sqlRefusal(s.seq+1, "read entry", err)
	}
	if seq, ok = seqv.(int64); !ok || seqType != "integer" {
		return 0, nil, s.refuse(0, readers.ClassBadSchema, fmt.Sprintf(
			"SQLite row read failed: entry seq is %s, not an integer", seqType), nil)
	}
	if typ != "text" {
		return seq, nil, s.refuse(seq, readers.ClassBadEntry, "SQLite row read failed: entry json is "+typ+", not text", nil)
	}
	return seq, js, s.checkText("session entry", seq, js)
}

func (s *Source) checkText(kind string, seq int64, js []byte) error {
	if len(js) > MaxJSONBytes {
		return s.refuse(seq, readers.ClassLineTooLong, fmt.Sprintf(
			"SQLite %s exceeds JSON limit: bytes=%d limit=%d", kind, len(js), MaxJSONBytes), nil)
	}
	if valid, n, ok := normalize.UTF8Error(js); !ok {
		return s.refuse(seq, readers.ClassInvalidUTF8, fmt.Sprintf(
			"SQLite %s is not valid UTF-8: %s", kind, normalize.UTF8Message(valid, n)), nil)
	}
	return nil
}

// fetch reads the entry with seq loc again, for legacy id synthesis.
func (s *Source) fetch(loc int64) (*payload.Entry, error) {
	var js []byte
	err := s.conn.QueryRowContext(context.Background(), "SELECT json FROM pi_session_entries WHERE seq = ?", loc).Scan(&js)
	if err != nil {
		return nil, s.sqlRefusal(loc, "read entry", err)
	}
	e, err := payload.Decode(js)
	if err != nil {
		return nil, s.refuse(loc, readers.ClassIO, "the private copy changed while it was read", err)
	}
	return e, nil
}

func (s *Source) refuse(seq int64, class readers.Class, reason string, err error) error {
	return &readers.RefusedError{Path: s.path, Line: seq, Class: class, Reason: reason, Err: err}
}

// sqlRefusal classifies an error from SQLite: a damaged file is corrupt,
// a lock is locked, the rest is io.
func (s *Source) sqlRefusal(seq int64, step string, err error) error {
	class := readers.ClassIO
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB:
			class = readers.ClassCorrupt
		case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
			class = readers.ClassLocked
		}
	}
	return s.refuse(seq, class, "SQLite session error: "+step+": "+err.Error(), err)
}
