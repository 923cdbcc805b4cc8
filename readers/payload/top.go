package payload

import (
	"errors"
	"strconv"

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
// accepts or refuses it as the reference does. A refusal is an *Error.
func Decode(line []byte) (*Entry, error) {
	e, err := decodeLine(line)
	if err != nil {
		return nil, err
	}
	return e, nil
}

func decodeLine(line []byte) (*Entry, *Error) {
	if i := skipWS(line, 0); i < len(line) && line[i] == '[' {
		return nil, decodeTopArray(line, i)
	}
	top := topTag{idx: -1, line: line}
	v, end, trailing, err := parse(line, top.hook)
	if err != nil {
		if top.err != nil {
			// The hook stopped the read; the JSON layer positioned it.
			return nil, &Error{Class: top.err.Class, Detail: err.Error()}
		}
		return nil, fromSyntax(err)
	}
	if v.Kind != wire.KindObject {
		return nil, positioned(readers.ClassBadEntry,
			msgInvalidType(v, "internally tagged enum "+sessionEntry.name), line, end)
	}
	if top.idx < 0 {
		return nil, positioned(readers.ClassBadEntry, msgMissingField(sessionEntry.tag), line, end)
	}
	rest := make([]wire.Member, 0, len(v.Obj))
	for _, m := range v.Obj {
		if m.Key != sessionEntry.tag {
			rest = append(rest, m)
		}
	}
	var d decoder
	typed, derr := d.variantBody(sessionEntry, top.idx, wire.Object(rest...))
	if derr != nil {
		return nil, derr
	}
	if trailing != nil {
		return nil, fromSyntax(trailing)
	}
	return newEntry(typed, d.extraKeys), nil
}

// topTag follows the `type` members of the top-level object as the parser
// completes them.
type topTag struct {
	line []byte
	idx  int    // the variant, -1 until a tag was read
	err  *Error // the refusal the hook stopped the parse with
}

func (t *topTag) hook(m wire.TopMember) error {
	if m.Key != sessionEntry.tag {
		return nil
	}
	if t.idx >= 0 {
		// serde refuses the second tag as soon as it has read its key.
		// The error has no position yet; serde_json gives it one after it
		// has looked for the object's end, which skips white space.
		t.err = badEntry(msgDuplicateField(sessionEntry.tag))
		return &wire.HookError{Msg: t.err.Detail, At: skipWS(t.line, m.KeyEnd)}
	}
	idx, err := topVariant(m.Value)
	if err != nil {
		t.err = err
		at := m.ValueEnd
		if m.Value.Kind == wire.KindArray || m.Value.Kind == wire.KindObject {
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
	if i := sessionEntry.lookup(v.Str); i >= 0 {
		return i, nil
	}
	return -1, &Error{Class: readers.ClassUnknownType, Detail: msgUnknownVariant(v.Str, sessionEntry.names())}
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
			elem, end, _, err := parse(line[j:], nil)
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
	if _, _, _, err := parse(line, nil); err != nil {
		return fromSyntax(err)
	}
	if idx < 0 {
		// Unreachable: a line that does not start a first element is not
		// valid JSON. Keep a reason anyway.
		return positioned(readers.ClassMalformedJSON, "expected value", line, j+1)
	}
	return badEntry(msgInvalidType(wire.Array(), sessionEntry.variants[idx].body.expecting))
}

// parse reads b as serde_json does (a value, then only white space) but
// returns "trailing characters" apart, with the value before them: the
// reference looks for trailing characters only after it has deserialized
// the value, so a refused entry is reported before trailing garbage.
func parse(b []byte, hook wire.TopLevelHook) (v wire.Value, end int, trailing, err error) {
	v, end, err = wire.ParseJSONEnd(b, hook)
	var se *wire.SyntaxError
	if err == nil || !errors.As(err, &se) || se.Msg != "trailing characters" {
		return v, end, nil, err
	}
	cut := se.Offset - 1 // the error sits one past the first trailing byte
	if cut < 0 || cut > len(b) {
		return v, end, nil, err
	}
	v, end, err2 := wire.ParseJSONEnd(b[:cut], nil)
	if err2 != nil {
		return v, end, nil, err
	}
	return v, end, se, nil
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
