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
)

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
