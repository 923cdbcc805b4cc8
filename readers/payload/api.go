// Package payload is the reference's typed session-entry model: it accepts or
// refuses one entry line exactly as the reference's serde model does, emits
// the canonical payload bytes (FORMAT.md §2) and synthesizes legacy ids
// (FORMAT.md §10).
//
// The model (model.go) is the reference's SessionEntry and everything it
// reaches, described member by member with their serde attributes; decode.go
// reads and writes it the way serde's derived code does, and top.go reads
// the line the way serde_json streams an internally tagged enum. Refusals
// carry the reference's own wording, so a report can quote it.
package payload

import "pisess/writers/wire"

// Entry is one accepted entry.
type Entry struct {
	Type      string // the entry type tag: message, model_change, ...
	ID        string
	HasID     bool // "id" present and not null
	ParentID  string
	HasParent bool // "parentId" present and not null
	Timestamp string
	Role      string  // the message role; "" for entries that are not messages
	Name      *string // the session_info name, when set

	// typed is the entry as the reference serializes it: tag first, then
	// id, parentId, timestamp, then the other members in declaration order,
	// with free-form values key-sorted.
	typed wire.Value
	// extra lists the extra members a bashExecution message keeps.
	extra []string
}

func newEntry(typed wire.Value, extra []string) *Entry {
	e := &Entry{typed: typed, extra: extra}
	for _, m := range typed.Obj {
		switch m.Key {
		case "type":
			e.Type = m.Value.Str
		case "id":
			e.ID, e.HasID = m.Value.Str, true
		case "parentId":
			e.ParentID, e.HasParent = m.Value.Str, true
		case "timestamp":
			e.Timestamp = m.Value.Str
		case "message":
			if role, ok := m.Value.Get("role"); ok {
				e.Role = role.Str
			}
		case "name":
			name := m.Value.Str
			e.Name = &name
		}
	}
	return e
}

// SetID gives the entry an id (a synthesized one, for an entry that had
// none). It is written where the reference writes it: right after the tag.
func (e *Entry) SetID(id string) {
	e.ID, e.HasID = id, true
	e.set("id", id, 1)
}

// SetParent gives the entry a parent, written after the id (the upgrade of
// an old session chains each entry to the one before it).
func (e *Entry) SetParent(id string) {
	e.ParentID, e.HasParent = id, true
	at := 1
	if e.HasID {
		at = 2
	}
	e.set("parentId", id, at)
}

// set replaces member key, or inserts it at index at.
func (e *Entry) set(key, value string, at int) {
	for i := range e.typed.Obj {
		if e.typed.Obj[i].Key == key {
			e.typed.Obj[i].Value = wire.String(value)
			return
		}
	}
	obj := make([]wire.Member, 0, len(e.typed.Obj)+1)
	obj = append(obj, e.typed.Obj[:at]...)
	obj = append(obj, wire.Member{Key: key, Value: wire.String(value)})
	obj = append(obj, e.typed.Obj[at:]...)
	e.typed.Obj = obj
}

// Canonical returns the payload bytes the reference stores for the entry:
// its typed value with object keys sorted at every depth, compact.
func (e *Entry) Canonical() []byte { return wire.AppendCanonical(nil, e.typed) }

// Typed returns the entry as the reference serializes it, members in struct
// order (see Entry.typed); this is also what an upgraded line holds. The
// reference writes a bashExecution message's extra members in hash-map
// order; they are written here sorted by name.
func (e *Entry) Typed() []byte { return wire.AppendCompact(nil, e.typed) }

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
