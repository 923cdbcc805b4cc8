package ledger

import (
	"fmt"

	"pisess/writers/wire"
)

// SchemaNote is the schema of a pisess note line in the tree journal.
const SchemaNote = "pisess.journal_note.v1"

// NoteKind says what a note records.
type NoteKind string

const (
	// NoteDisplaced: a refresh moved the sidecar it replaced into the
	// quarantine (QuarantinePath); a rollback puts it back.
	NoteDisplaced NoteKind = "displaced"
	// NoteInstalled: a sidecar was installed at Path.
	NoteInstalled NoteKind = "installed"
	// NoteUpgraded: the original source was quarantined (QuarantinePath,
	// SHA256) and replaced by an upgraded file (NewSHA256) at Path.
	NoteUpgraded NoteKind = "upgraded"
	// NoteQuarantined: fsck moved Path aside to QuarantinePath.
	NoteQuarantined NoteKind = "quarantined"
	// NoteRepair: fsck repaired Path in place (Detail says how).
	NoteRepair NoteKind = "repair"
	// NoteRestored: a rollback or repair put QuarantinePath back at Path.
	NoteRestored NoteKind = "restored"
	// NoteDiscarded: a refresh did not keep the sidecar it displaced
	// (QuarantinePath, now removed): pisess built it and the session file
	// still holds the exact bytes it was built from, so it is reproducible.
	// A rollback of the run then leaves no sidecar: pi reads the session
	// file, as with a stale sidecar, until the next migrate.
	NoteDiscarded NoteKind = "discarded"
)

// Valid reports whether k is one of the note kinds.
func (k NoteKind) Valid() bool {
	switch k {
	case NoteDisplaced, NoteInstalled, NoteUpgraded, NoteQuarantined, NoteRepair, NoteRestored, NoteDiscarded:
		return true
	}
	return false
}

// Note is a pisess journal note. Members are written in this order; the
// optional ones (Path onwards) are omitted when empty.
type Note struct {
	CorrelationID  string
	At             string // RFC 3339
	Session        string // the session file the note concerns
	Kind           NoteKind
	Path           string // what was installed, moved or repaired
	QuarantinePath string // where it went, or came back from
	SHA256         string // of the quarantined bytes (the original source for upgraded)
	NewSHA256      string // of the file that replaced it (upgraded)
	Detail         string
}

var noteNames = []string{"schema", "correlationId", "at", "session", "kind", "path",
	"quarantinePath", "sha256", "newSha256", "detail"}

// CheckNote reports what makes n unfit for the journal.
func CheckNote(n Note) error {
	switch {
	case !wire.ValidCorrelationID(n.CorrelationID):
		return fmt.Errorf("journal note: correlationId %q does not match ^[A-Za-z0-9._:-]{8,128}$", n.CorrelationID)
	case !wire.ValidRFC3339(n.At):
		return fmt.Errorf("journal note: at %q is not an RFC 3339 timestamp", n.At)
	case n.Session == "":
		return fmt.Errorf("journal note: session is empty")
	case !n.Kind.Valid():
		return fmt.Errorf("journal note: unknown kind %q", n.Kind)
	case n.SHA256 != "" && !wire.ValidSHA256Hex(n.SHA256):
		return fmt.Errorf("journal note: sha256 is not a lower-case SHA-256 hex digest")
	case n.NewSHA256 != "" && !wire.ValidSHA256Hex(n.NewSHA256):
		return fmt.Errorf("journal note: newSha256 is not a lower-case SHA-256 hex digest")
	}
	return nil
}

// AppendNote appends n as a compact line with its newline, written by
// wire's JSON writer (the reference's escaping), members in fixed order.
func AppendNote(dst []byte, n Note) []byte {
	members := []wire.Member{
		{Key: "schema", Value: wire.String(SchemaNote)},
		{Key: "correlationId", Value: wire.String(n.CorrelationID)},
		{Key: "at", Value: wire.String(n.At)},
		{Key: "session", Value: wire.String(n.Session)},
		{Key: "kind", Value: wire.String(string(n.Kind))},
	}
	for _, opt := range []struct{ key, val string }{
		{"path", n.Path}, {"quarantinePath", n.QuarantinePath}, {"sha256", n.SHA256},
		{"newSha256", n.NewSHA256}, {"detail", n.Detail},
	} {
		if opt.val != "" {
			members = append(members, wire.Member{Key: opt.key, Value: wire.String(opt.val)})
		}
	}
	return append(wire.AppendCompact(dst, wire.Object(members...)), '\n')
}

// ParseNote decodes a note line (with its newline). Members may come in any
// order; unknown members are ignored, so that an older pisess can read a
// newer one's journal; a duplicate or mistyped member is refused, and so
// is a note CheckNote refuses.
func ParseNote(line []byte) (Note, error) {
	if len(line) == 0 || line[len(line)-1] != '\n' {
		return Note{}, fmt.Errorf("journal note: line is not LF-terminated")
	}
	v, err := wire.ParseJSON(line[:len(line)-1], nil)
	if err != nil {
		return Note{}, fmt.Errorf("journal note: %w", err)
	}
	if v.Kind != wire.KindObject {
		return Note{}, fmt.Errorf("journal note: not an object")
	}
	vals := make([]string, len(noteNames))
	seen := make([]bool, len(noteNames))
	for _, m := range v.Obj {
		i := indexOf(noteNames, m.Key)
		if i < 0 {
			continue
		}
		if seen[i] {
			return Note{}, fmt.Errorf("journal note: duplicate member %s", m.Key)
		}
		seen[i] = true
		if m.Value.Kind != wire.KindString {
			return Note{}, fmt.Errorf("journal note: member %s is not a string", m.Key)
		}
		vals[i] = m.Value.Str
	}
	if vals[0] != SchemaNote {
		return Note{}, fmt.Errorf("journal note: unsupported schema %q", vals[0])
	}
	n := Note{CorrelationID: vals[1], At: vals[2], Session: vals[3], Kind: NoteKind(vals[4]),
		Path: vals[5], QuarantinePath: vals[6], SHA256: vals[7], NewSHA256: vals[8], Detail: vals[9]}
	if err := CheckNote(n); err != nil {
		return Note{}, err
	}
	return n, nil
}

func indexOf(names []string, key string) int {
	for i, n := range names {
		if n == key {
			return i
		}
	}
	return -1
}
