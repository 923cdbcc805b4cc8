// Package readers holds the normalized model every source format is read
// into: a session Header and a stream of Entry values in source order, each
// carrying the payload exactly as the reference implementation serializes it
// (FORMAT.md §2), so that a hash chain computed from a source equals the one
// computed from the store built from it.
package readers

import (
	"errors"
	"fmt"
)

// SourceFormat names the format a session was read from; the values are the
// manifest's sourceFormat strings.
type SourceFormat string

const (
	FormatJSONLv3  SourceFormat = "jsonl_v3"
	FormatSQLitev1 SourceFormat = "sqlite_v1"
	FormatNativeV2 SourceFormat = "native_v2"
)

// Valid reports whether f is one of the formats the manifest admits.
func (f SourceFormat) Valid() bool {
	switch f {
	case FormatJSONLv3, FormatSQLitev1, FormatNativeV2:
		return true
	}
	return false
}

// Header is a session's header as the source states it.
type Header struct {
	ID            string
	Timestamp     string
	Cwd           string
	Version       int // 0 when the header has none (JSONL version 1)
	ParentSession string
	Format        SourceFormat
	// Raw is the header line or row exactly as stored (without newline).
	Raw []byte
}

// Entry is one normalized session entry.
type Entry struct {
	ID       string
	ParentID string // "" when the entry has no parent
	Type     string // the entry type tag: message, model_change, ...
	// Timestamp is the entry's own timestamp member, as written.
	Timestamp string
	// Payload is the canonical payload bytes (sorted keys, compact).
	Payload []byte
	// Position is where the entry came from: a 1-based line number for
	// JSONL, the seq for SQLite, the entry sequence for a V2 store.
	Position int64
	// SynthesizedID is true when the source had no id and the reference's
	// deterministic legacy id was assigned (FORMAT.md §10).
	SynthesizedID bool
	// Role is the message role for message entries ("" otherwise).
	Role string
	// Name is the session_info name when present.
	Name *string
}

// Source is a streaming reader of one session. Next returns io.EOF after the
// last entry; any other error is final. An entry Next returns is its
// caller's: no later call reuses its payload (writers.Stage reads ahead
// on one goroutine while it writes the entries before on another).
type Source interface {
	Header() Header
	Next() (Entry, error)
	Close() error
}

// Appender is implemented by a source that can append an entry's payload
// to a buffer its caller owns instead of allocating one per entry (a
// session of a million entries made a million payloads for the collector).
// The entry's Payload is then a part of the returned buffer (buf itself,
// or a larger copy when it did not fit), capped at its own end, and stays
// valid until the caller reuses that buffer; a large entry's payload may
// be a slice of its own.
type Appender interface {
	Source
	NextAppend(buf []byte) (Entry, []byte, error)
}

// Linked is implemented by a source that checks its entries' links itself
// before it yields any: ids unique, every parent present, no cycle (the
// reference's order of refusals). Branches counts the entries with two or
// more children. A writer given it need not keep every id (writers.Stage).
type Linked interface {
	Source
	Branches() uint64
}

// Problem classes a reader reports. Callers branch on Class, never on text.
type Class string

const (
	ClassEmptyFile        Class = "empty_file"
	ClassBadHeader        Class = "bad_header"
	ClassUnsupportedVer   Class = "unsupported_version"
	ClassMalformedJSON    Class = "malformed_json"
	ClassInvalidUTF8      Class = "invalid_utf8"
	ClassLoneSurrogate    Class = "lone_surrogate"
	ClassUnknownType      Class = "unknown_entry_type"
	ClassUnknownRole      Class = "unknown_role"
	ClassBadEntry         Class = "bad_entry" // missing or mistyped member
	ClassBadEntryID       Class = "bad_entry_id"
	ClassDuplicateID      Class = "duplicate_id"
	ClassMissingParent    Class = "missing_parent"
	ClassParentCycle      Class = "parent_cycle"
	ClassTornLine         Class = "torn_line"
	ClassLineTooLong      Class = "line_too_long"
	ClassNondeterministic Class = "nondeterministic_id"
	ClassBadSessionID     Class = "bad_session_id"
	ClassIO               Class = "io"
	ClassLocked           Class = "locked"
	ClassCorrupt          Class = "corrupt"
	ClassSymlink          Class = "symlink"      // the source path is a symlink: pisess follows none
	ClassSpecialFile      Class = "special_file" // not a regular file (FIFO, device, directory)
	ClassBadSequence      Class = "bad_sequence" // SQLite entry seq not contiguous from 1
	ClassBadSchema        Class = "bad_schema"   // SQLite tables or columns are not pi's
	// ClassFrameTooLarge: an entry whose frame does not fit a segment of
	// the reference's size (64 MiB): its migration refuses the session.
	ClassFrameTooLarge Class = "frame_too_large"
	// ClassNameTooLong: the session's file name is so long that the names
	// the reference derives from it (<stem>.v2.staging.<uuid>) exceed the
	// file system's limit on a name: it cannot migrate the session either.
	ClassNameTooLong Class = "name_too_long"
)

// Transient reports whether a problem of class c says something about
// this run rather than about the session's bytes: an I/O or resource error
// (EIO, EMFILE, ENOMEM, EACCES, a full or missing TMPDIR: ClassIO) or a
// lock another process holds (ClassLocked). Such a problem is a failure of
// the run that met it, to be tried again by the next one; every other
// class is a verdict that any machine reading the same bytes would give,
// which may be remembered (the refusal cache) until the file changes.
func (c Class) Transient() bool {
	return c == ClassIO || c == ClassLocked
}

// RefusedError says why a source cannot be migrated. Line is 1-based (for
// SQLite, the seq; 0 when the problem is not tied to one line).
type RefusedError struct {
	Path   string
	Line   int64
	Class  Class
	Reason string
	Err    error
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("%s: %s: %s", position(e.Path, e.Line), e.Class, e.Reason)
}

// position is "path:line", or path when line is 0.
func position(path string, line int64) string {
	if line > 0 {
		return fmt.Sprintf("%s:%d", path, line)
	}
	return path
}

func (e *RefusedError) Unwrap() error { return e.Err }

// Transient reports whether the error is a failure of this run (an I/O
// error, a lock held by another process) rather than a verdict about the
// session: see [Class.Transient].
func (e *RefusedError) Transient() bool { return e != nil && e.Class.Transient() }

// AsVerdict returns the RefusedError in err's chain when it is a verdict
// about the session's bytes (not [RefusedError.Transient]), or nil: what a
// caller may report as a refusal and remember. A transient one is a
// failure of the run.
func AsVerdict(err error) *RefusedError {
	if r := AsRefused(err); r != nil && !r.Transient() {
		return r
	}
	return nil
}

// FrameTooLarge is the reference's refusal of a session one of whose
// entries (at line, id) makes a frame of frame bytes ("more than n bytes"
// when only a bound is known), over its segment of limit bytes. The
// writer's and fsck's checks word it once, so that migrate and fsck give
// the same reason.
func FrameTooLarge(path string, line int64, id, frame string, limit int64, err error) *RefusedError {
	return &RefusedError{Path: path, Line: line, Class: ClassFrameTooLarge, Err: err, Reason: fmt.Sprintf(
		"entry %s makes a frame of %s, more than the reference's %d-byte segment: its migration refuses the session, and pi keeps it on its JSONL",
		id, frame, limit)}
}

// NameTooLong is the refusal of a session whose staging directory, named
// sidecar+".staging.<id>" (name bytes in all), is a name longer than the
// file system allows.
func NameTooLong(path, sidecar string, name int, err error) *RefusedError {
	return &RefusedError{Path: path, Class: ClassNameTooLong, Err: err, Reason: fmt.Sprintf(
		"its staging directory %s.staging.<id> is a name of %d bytes, more than the file system allows: "+
			"the reference names its staging directory so too and cannot migrate the session; a shorter file name can",
		sidecar, name)}
}

// ErrSourceChanged is matched by an error that means the source changed
// while it was read (a writer that ignores pi's session lock appended to
// it, or rewrote it): not a refusal — the reference would migrate the
// session as it is — nor damage, and never a verdict to remember: the
// next run reads it again (issue 34 §3: one cause, reported as three
// classes).
var ErrSourceChanged = errors.New("the source changed while it was read")

// SourceChangedError is ErrSourceChanged with where it showed: the file,
// its line (0 when not tied to one) and how.
type SourceChangedError struct {
	Path   string
	Line   int64
	Detail string
}

func (e *SourceChangedError) Error() string {
	return fmt.Sprintf("%s: %v: %s", position(e.Path, e.Line), ErrSourceChanged, e.Detail)
}

// Is makes a *SourceChangedError match ErrSourceChanged.
func (e *SourceChangedError) Is(target error) bool { return target == ErrSourceChanged }

// AsRefused returns the RefusedError in err's chain, or nil.
func AsRefused(err error) *RefusedError {
	var r *RefusedError
	if errors.As(err, &r) {
		return r
	}
	return nil
}
