package wire

import (
	"errors"
	"strings"
)

// DocKind names a V2 document in errors.
type DocKind string

const (
	DocFrame          DocKind = "segment frame"
	DocIndexRow       DocKind = "offset index row"
	DocManifest       DocKind = "manifest"
	DocCheckpoint     DocKind = "checkpoint"
	DocMigrationEvent DocKind = "migration event"
	DocSourceState    DocKind = "source state"
	DocRollbackIntent DocKind = "rollback intent"
)

// ErrChecksum is matched (errors.Is) by every checksum or digest mismatch:
// a frame's payloadSha256 or payloadBytes against its payload, a manifest's
// manifestHash against its content, and a frame line against its CRC.
var ErrChecksum = errors.New("checksum mismatch")

// ErrTooLarge is matched by a document over its size limit.
var ErrTooLarge = errors.New("document too large")

// DocError is a refused document: Doc names the document, Member the
// offending member as a dotted path ("" for the document as a whole), Reason
// says what is wrong. Err, when set, is ErrChecksum, ErrTooLarge or the
// *SyntaxError from the JSON parser. Callers add path, line or offset.
type DocError struct {
	Doc    DocKind
	Member string
	Reason string
	Err    error
}

func (e *DocError) Error() string {
	var b strings.Builder
	b.WriteString(string(e.Doc))
	if e.Member != "" {
		b.WriteString(" member ")
		b.WriteString(e.Member)
	}
	b.WriteString(": ")
	b.WriteString(e.Reason)
	if e.Err != nil && e.Err != ErrChecksum && e.Err != ErrTooLarge {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

func (e *DocError) Unwrap() error { return e.Err }

func docErr(doc DocKind, member, reason string) *DocError {
	return &DocError{Doc: doc, Member: member, Reason: reason}
}
