package payload

import (
	"errors"
	"slices"
	"strconv"
	"strings"

	"pisess/readers"
	"pisess/writers/wire"
)

// The reference reads an entry line with serde_json::from_str::<SessionEntry>.
// SessionEntry is internally tagged, so serde reads the top-level object as
// a stream: the `type` member is turned into a variant the moment it is
// read (an unknown or mistyped tag, or a second `type`, stops the read
// there, with serde_json's position), every other member is buffered. Only
// once the object is complete is the variant read from the buffer (those
// errors have no position), and only after that does serde_json look for
// trailing characters.

// Decode reads one entry line, with its trailing newline if it had one, and
// accepts or refuses it as the reference does. A refusal is an *Error. The
// entry keeps a copy of line, which the caller may reuse.
func Decode(line []byte) (*Entry, error) {
	// A decoder of its own, which the entry keeps, reading a copy.
	return new(Decoder).Decode(append([]byte(nil), line...))
}

// Decoder is Decode for a reader that decodes many lines: it keeps its
// working memory (the parsed line, member lists) from one line to the next
// instead of allocating it again, and copies nothing. The price is a
// shorter life for what it returns: an entry's exported fields are its
// own, but its Canonical, AppendCanonical, Typed and LegacyID read the
// line, and work only until the next Decode and while line is unchanged.
// The zero Decoder is ready to use; it is not safe for concurrent use, and
// must not be copied once used.
type Decoder struct {
	// ValidUTF8 says every line given to Decode has been checked to be
	// valid UTF-8 as a whole (the JSONL reader's first pass does): its
	// strings are then not checked again.
	ValidUTF8 bool

	tape  wire.Tape
	lists []int
	bound []uint32
	outs  []out
	top   topTag
	hook  wire.TapeHook // top.hook, made once
}

// Decode reads one entry line as the package's Decode does, but see
// Decoder for how long the entry's methods may be used.
func (dec *Decoder) Decode(line []byte) (*Entry, error) {
	e, err := dec.decode(line)
	if err != nil {
		return nil, err
	}
	return e, nil
}

func (dec *Decoder) decode(line []byte) (*Entry, *Error) {
	if i := skipWS(line, 0); i < len(line) && line[i] == '[' {
		return nil, decodeTopArray(line, i)
	}
	if dec.hook == nil {
		dec.hook = dec.top.hook
	}
	dec.top = topTag{idx: -1, line: line}
	t := &dec.tape
	parse := t.Parse
	if dec.ValidUTF8 {
		parse = t.ParseValidUTF8
	}
	if err := parse(line, dec.hook); err != nil {
		if dec.top.err != nil {
			// The hook stopped the read; the JSON layer positioned it.
			return nil, &Error{Class: dec.top.err.Class, Detail: err.Error()}
		}
		return nil, fromSyntax(err)
	}
	// The reference looks for trailing characters only once it has read
	// the entry: a refused entry is reported before trailing garbage.
	trailing := t.Trailing()
	if t.Kind(0) != wire.KindObject {
		return nil, positioned(readers.ClassBadEntry,
			msgInvalidType(t.Value(0), "internally tagged enum "+sessionEntry.name), line, t.End())
	}
	idx := dec.top.idx
	if idx < 0 {
		return nil, positioned(readers.ClassBadEntry, msgMissingField(sessionEntry.tag), line, t.End())
	}
	n := t.Nodes()
	if dec.lists == nil {
		// What a line needs, so that a first line needs no more.
		dec.lists, dec.outs = make([]int, 0, 2*n), make([]out, 0, 24)
	}
	r := reader{t: t, lists: dec.lists[:0], bound: slices.Grow(dec.bound[:0], n)[:n]}
	clear(r.bound)
	defer func() { dec.lists, dec.bound = r.lists[:0], r.bound }()
	members := r.members(0, &sessionEntry.tagKey)
	if err := r.checkStruct(sessionEntry.variants[idx].body, wire.KindObject, members); err != nil {
		return nil, err
	}
	if trailing != nil {
		return nil, fromSyntax(trailing)
	}
	e := &Entry{dec: dec, variant: idx}
	e.fill(&r, members)
	return e, nil
}

// fill sets the entry's exported fields from the members the reference
// writes at its top level (and the role of its message), found by what
// reading bound them to.
func (e *Entry) fill(r *reader, members []int) {
	e.Type = sessionEntry.variants[e.variant].name
	body := sessionEntry.variants[e.variant].body
	id, parent, timestamp := -1, -1, -1
	for _, m := range members {
		v := m + 1
		if r.t.Kind(v) == wire.KindNull {
			continue // None, for every member below that can be null
		}
		switch {
		case r.isMember(m, entryBase, "id"):
			id = v
		case r.isMember(m, entryBase, "parentId"):
			parent = v
		case r.isMember(m, entryBase, "timestamp"):
			timestamp = v
		case r.isMember(m, body, "message"):
			if idx, _, _, err := r.tagged(sessionMessage.en, v); err == nil {
				e.Role = sessionMessage.en.variants[idx].name
			}
		case r.isMember(m, body, "name"):
			name := r.t.Str(v)
			e.Name = &name
		}
	}
	// One allocation for the three strings every entry has.
	strs := [...]int{id, parent, timestamp}
	size := 0
	for _, n := range strs {
		if n >= 0 {
			size += len(r.t.StrBytes(n))
		}
	}
	var b strings.Builder
	b.Grow(size)
	for _, n := range strs {
		if n >= 0 {
			b.Write(r.t.StrBytes(n))
		}
	}
	all := b.String()
	cut := func(n int) (string, bool) {
		if n < 0 {
			return "", false
		}
		s := all[:len(r.t.StrBytes(n))]
		all = all[len(s):]
		return s, true
	}
	e.ID, e.HasID = cut(id)
	e.ParentID, e.HasParent = cut(parent)
	e.Timestamp, _ = cut(timestamp)
}

// topTag follows the `type` members of the top-level object as the parser
// completes them.
type topTag struct {
	line []byte
	idx  int    // the variant, -1 until a tag was read
	err  *Error // the refusal the hook stopped the parse with
}

func (t *topTag) hook(tape *wire.Tape, m wire.TapeMember) error {
	if !sessionEntry.tagKey.is(tape, m.Key) {
		return nil
	}
	if t.idx >= 0 {
		// serde refuses the second tag as soon as it has read its key.
		// The error has no position yet; serde_json gives it one after it
		// has looked for the object's end, which skips white space.
		t.err = badEntry(msgDuplicateField(sessionEntry.tag))
		return &wire.HookError{Msg: t.err.Detail, At: skipWS(t.line, m.KeyEnd)}
	}
	var idx int
	var err *Error
	if tape.Kind(m.Value) == wire.KindString {
		idx, err = variantNamed(tape.StrBytes(m.Value))
	} else {
		idx, err = topVariant(tape.Value(m.Value))
	}
	if err != nil {
		t.err = err
		at := m.ValueEnd
		if k := tape.Kind(m.Value); k == wire.KindArray || k == wire.KindObject {
			// serde_json refuses a container before reading into it.
			at = m.ValueStart
		}
		return &wire.HookError{Msg: err.Detail, At: at}
	}
	t.idx = idx
	return nil
}

// topVariant reads the entry type as serde_json reads a variant name: only
// from a string (no variant index, unlike buffered content).
func topVariant(v wire.Value) (int, *Error) {
	if v.Kind != wire.KindString {
		return -1, &Error{Class: readers.ClassUnknownType, Detail: msgInvalidType(v, "variant identifier")}
	}
	return variantNamed([]byte(v.Str))
}

func variantNamed(name []byte) (int, *Error) {
	if i := sessionEntry.lookup(name); i >= 0 {
		return i, nil
	}
	return -1, &Error{Class: readers.ClassUnknownType, Detail: msgUnknownVariant(string(name), sessionEntry.names())}
}

// decodeTopArray handles a line holding an array: serde takes its first
// element as the tag (read before the rest), then cannot read any entry
// struct from the remaining sequence. Such a line is always refused; this
// only finds the reference's reason.
func decodeTopArray(line []byte, open int) *Error {
	j := skipWS(line, open+1)
	idx := -1
	if j < len(line) {
		switch c := line[j]; c {
		case ']':
			return positioned(readers.ClassBadEntry, msgMissingField(sessionEntry.tag), line, j+1)
		case '[', '{':
			what := "sequence"
			if c == '{' {
				what = "map"
			}
			return positioned(readers.ClassUnknownType,
				"invalid type: "+what+", expected variant identifier", line, j)
		case ',':
			// Not a value: the full parse below reports it.
		default:
			elem, end, _, err := wire.ParseJSONSplitTrailing(line[j:], nil)
			if err != nil {
				return syntaxAt(err, line, j)
			}
			i, terr := topVariant(elem)
			if terr != nil {
				return positioned(terr.Class, terr.Detail, line, j+end)
			}
			idx = i
		}
	}
	// The rest of the array is read (syntax errors stop it) before the
	// variant is refused; trailing characters would only be seen after.
	if _, _, _, err := wire.ParseJSONSplitTrailing(line, nil); err != nil {
		return fromSyntax(err)
	}
	if idx < 0 {
		// Unreachable: a line that does not start a first element is not
		// valid JSON. Keep a reason anyway.
		return positioned(readers.ClassMalformedJSON, "expected value", line, j+1)
	}
	return badEntry(msgInvalidType(wire.Array(), sessionEntry.variants[idx].body.expecting))
}

// syntaxAt reports a syntax error found in b[base:] at its place in b.
func syntaxAt(err error, b []byte, base int) *Error {
	var se *wire.SyntaxError
	if !errors.As(err, &se) {
		return fromSyntax(err)
	}
	e := fromSyntax(err)
	l, c := wire.Position(b, base+se.Offset)
	e.Detail = se.Msg + " at line " + strconv.Itoa(l) + " column " + strconv.Itoa(c)
	return e
}

func skipWS(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\n', '\t', '\r':
			i++
		default:
			return i
		}
	}
	return i
}
