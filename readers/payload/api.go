// Package payload is the reference's typed session-entry model: it accepts or
// refuses one entry line exactly as the reference's serde model does, emits
// the canonical payload bytes (FORMAT.md §2) and synthesizes legacy ids
// (FORMAT.md §10).
//
// The model (model.go) is the reference's SessionEntry and everything it
// reaches, described member by member with their serde attributes; top.go
// reads the line the way serde_json streams an internally tagged enum, into
// a wire.Tape; decode.go checks the entry on the tape the way serde's
// derived Deserialize reads it, and write.go writes it from the tape the way
// the derived Serialize does. Refusals carry the reference's own wording,
// so a report can quote it.
//
// Nothing is built between the line and the bytes written: a tape is a
// flat list of nodes, and the typed and canonical forms are written from it
// on demand. A Decoder reuses its tape and lists from line to line, so that
// reading a whole session allocates little more than its output.
package payload

// Entry is one accepted entry. Its methods work in its decoder's memory:
// an Entry, like a Decoder, is not safe for concurrent use.
type Entry struct {
	Type      string // the entry type tag: message, model_change, ...
	ID        string
	HasID     bool // "id" present and not null
	ParentID  string
	HasParent bool // "parentId" present and not null
	Timestamp string
	Role      string  // the message role; "" for entries that are not messages
	Name      *string // the session_info name, when set

	// dec holds the entry's line as read (and room to work in): the typed
	// and canonical forms are written from it. variant is the entry type's
	// index in sessionEntry.
	dec     *Decoder
	variant int
	// id and parentID replace the entry's own when set (SetID, SetParent).
	id, parentID *string
}

// SetID gives the entry an id (a synthesized one, for an entry that had
// none). It is written where the reference writes it: right after the tag.
func (e *Entry) SetID(id string) {
	e.ID, e.HasID = id, true
	e.id = &id
}

// SetParent gives the entry a parent, written after the id (the upgrade of
// an old session chains each entry to the one before it).
func (e *Entry) SetParent(id string) {
	e.ParentID, e.HasParent = id, true
	e.parentID = &id
}

// Canonical returns the payload bytes the reference stores for the entry:
// its typed value with object keys sorted at every depth, compact.
func (e *Entry) Canonical() []byte { return e.AppendCanonical(nil) }

// AppendCanonical appends Canonical's bytes to dst.
func (e *Entry) AppendCanonical(dst []byte) []byte {
	return e.write(dst, canonicalOrder, false)
}

// Typed returns the entry as the reference serializes it, members in struct
// order: tag first, then id, parentId, timestamp, then the other members in
// declaration order, with free-form values key-sorted. This is also what an
// upgraded line holds. The reference writes a bashExecution message's
// extra members in hash-map order; they are written here sorted by name.
func (e *Entry) Typed() []byte { return e.write(nil, typedOrder, false) }

func (e *Entry) write(dst []byte, o order, skipID bool) []byte {
	if dst == nil {
		// The payload is about as long as the line.
		dst = make([]byte, 0, e.dec.tape.End()+64)
	}
	w := e.writer(o)
	defer e.done(&w)
	w.skipID = skipID
	return w.writeEntry(dst, e.variant)
}

// writer returns a writer of the entry in order o, working in its
// decoder's room (done gives it back).
func (e *Entry) writer(o order) writer {
	return writer{reader: reader{t: &e.dec.tape, lists: e.dec.lists[:0], bound: e.dec.bound}, outs: e.dec.outs[:0],
		order: o, id: e.id, parentID: e.parentID}
}

func (e *Entry) done(w *writer) { e.dec.lists, e.dec.outs = w.lists[:0], w.outs[:0] }

// ValidEntryID reports whether s fits the V2 entry-id contract,
// ^[A-Za-z0-9_-]{1,128}$ (FORMAT.md §2). Decode accepts any id, as the
// reference's typed model does; the reference refuses others when it writes
// or reads a store.
func ValidEntryID(s string) bool {
	if len(s) == 0 || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}
