package store

import (
	"errors"
	"fmt"
	"strings"
)

// ErrTornTail is matched by a file whose end is an incomplete write: a last
// line without its newline, or a zero-filled tail. It is the one damage a
// repair may cut away (CutTornTail); it is distinct from wire.ErrChecksum,
// which is corruption of bytes that were once complete.
var ErrTornTail = errors.New("torn tail")

// ErrOutOfBounds is matched by an index row whose byte range does not lie
// within its segment.
var ErrOutOfBounds = errors.New("index row out of segment bounds")

// ErrIndexMismatch is matched by a frame whose coordinates (entrySeq,
// entryId, segmentSeq, frameSeq) differ from its index row's.
var ErrIndexMismatch = errors.New("frame does not match its index row")

// ErrIndexStructure is matched by an index whose rows break the rules of
// FORMAT.md §11.5: entrySeq contiguous from 1, unique entry ids, segments
// non-decreasing, frameSeq and byteOffset contiguous within a segment.
var ErrIndexStructure = errors.New("offset index structure violated")

// ErrUncovered is matched by segment bytes that no index row covers.
var ErrUncovered = errors.New("segment bytes not covered by the index")

// ErrTooLarge is matched by a segment or frame over the store's limit.
var ErrTooLarge = errors.New("over the segment size limit")

// FrameTooLargeError is an entry whose frame line (newline included) is
// over the limit: the writer's segment size, or the absolute frame limit
// (wire.MaxFrameBytes). It matches ErrTooLarge. A frame over
// wire.MaxSegmentBytes is one the reference refuses too: its migration
// writes 64 MiB segments and refuses a frame that does not fit one
// (session_store_v2.rs, validate_encoded_frame_length).
type FrameTooLargeError struct {
	Bytes int   // the frame line's length
	Limit int64 // the limit it is over
	Kind  string
	// AtLeast: Bytes is the payload's length, before the frame is made
	// (Writer.Appendable): the frame line is longer still.
	AtLeast bool
}

func (e *FrameTooLargeError) Error() string {
	if e.AtLeast {
		return fmt.Sprintf("frame line of more than %d bytes exceeds the %d-byte %s limit: %v", e.Bytes, e.Limit, e.Kind, ErrTooLarge)
	}
	return fmt.Sprintf("frame line of %d bytes exceeds the %d-byte %s limit: %v", e.Bytes, e.Limit, e.Kind, ErrTooLarge)
}

func (e *FrameTooLargeError) Is(target error) bool { return target == ErrTooLarge }

// ErrBaseLinksNeeded is matched by Append (and Appendable) on a Writer
// that ContinueInPlace made without Options.BaseLinks, for an entry whose
// parent is a base entry before the last: continue again with it.
var ErrBaseLinksNeeded = errors.New("the base store's links are needed")

// CorruptionError places an error in a store: Path is the file, Segment
// the segment number (0 when the file is not a segment), Offset the byte
// offset in it (meaningful when Segment > 0), Line the 1-based line of an
// index or ledger (0 when not a line document). Err says what is wrong; it
// wraps ErrTornTail, wire.ErrChecksum, ErrOutOfBounds, a *wire.DocError, ….
type CorruptionError struct {
	Path    string
	Segment uint64
	Offset  int64
	Line    int64
	Err     error
}

func (e *CorruptionError) Error() string {
	var b strings.Builder
	b.WriteString(e.Path)
	if e.Segment > 0 {
		fmt.Fprintf(&b, ": segment %d offset %d", e.Segment, e.Offset)
	}
	if e.Line > 0 {
		fmt.Fprintf(&b, ": line %d", e.Line)
	}
	b.WriteString(": ")
	b.WriteString(e.Err.Error())
	return b.String()
}

func (e *CorruptionError) Unwrap() error { return e.Err }
