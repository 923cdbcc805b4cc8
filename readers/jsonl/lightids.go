package jsonl

import (
	"bytes"
	"encoding/binary"
	"math/bits"
	"unsafe"
)

// linkIDs is what pass 1 needs of an entry line to link the session's
// entries: its "id" and "parentId" members (a null one is absent, as the
// decoder reads it).
type linkIDs struct {
	id, parent       []byte
	hasID, hasParent bool
}

// scanLinkIDs reads a line's top-level "id" and "parentId" without
// decoding the entry (issue 14: pass 1 otherwise decoded every entry that
// pass 2 decodes again). ok is false for anything it does not read exactly
// as the decoder would: not one JSON object, a member name with an escape,
// an id or parent that is neither a string without escapes nor null, a
// second "id" or "parentId". The caller then decodes the line. For a line
// the decoder accepts, an ok answer is the decoder's (FuzzLinkIDs); what
// it says of a line the decoder refuses does not matter, since pass 2
// decodes every line and refuses it there.
func scanLinkIDs(line []byte) (l linkIDs, ok bool) {
	i := skipSpace(line, 0)
	if i >= len(line) || line[i] != '{' {
		return l, false
	}
	i = skipSpace(line, i+1)
	if i < len(line) && line[i] == '}' {
		return l, endOfLine(line, i+1)
	}
	var seenID, seenParent bool
	for {
		key, j, ok := plainString(line, i)
		if !ok {
			return l, false
		}
		i = skipSpace(line, j)
		if i >= len(line) || line[i] != ':' {
			return l, false
		}
		i = skipSpace(line, i+1)
		switch string(key) {
		case "id":
			if seenID {
				return l, false
			}
			seenID = true
			l.id, l.hasID, i, ok = idValue(line, i)
		case "parentId":
			if seenParent {
				return l, false
			}
			seenParent = true
			l.parent, l.hasParent, i, ok = idValue(line, i)
		default:
			i, ok = skipValue(line, i)
		}
		if !ok {
			return l, false
		}
		i = skipSpace(line, i)
		if i >= len(line) {
			return l, false
		}
		switch line[i] {
		case ',':
			i = skipSpace(line, i+1)
		case '}':
			return l, endOfLine(line, i+1)
		default:
			return l, false
		}
	}
}

// idValue reads the value of "id" or "parentId": a string without escapes
// (present) or null (absent).
func idValue(line []byte, i int) (v []byte, present bool, end int, ok bool) {
	if bytes.HasPrefix(line[i:], []byte("null")) {
		return nil, false, i + 4, true
	}
	v, end, ok = plainString(line, i)
	return v, ok, end, ok
}

// plainString reads the string starting at line[i] when it holds no escape
// and no control character (its bytes are then its value).
func plainString(line []byte, i int) (s []byte, end int, ok bool) {
	if i >= len(line) || line[i] != '"' {
		return nil, i, false
	}
	for j := i + 1; j < len(line); j++ {
		switch c := line[j]; {
		case c == '"':
			return line[i+1 : j], j + 1, true
		case c == '\\' || c < 0x20:
			return nil, j, false
		}
	}
	return nil, len(line), false
}

// skipValue steps over one JSON value of any kind starting at line[i],
// checking only its nesting and the extent of its strings: for valid JSON
// that is exact (a number or literal holds no quote, bracket, comma, colon
// or white space).
func skipValue(line []byte, start int) (int, bool) {
	depth := 0
	for i := start; i < len(line); {
		switch c := line[i]; {
		case c == '"':
			end, ok := skipString(line, i)
			if !ok {
				return i, false
			}
			i = end
			if depth == 0 {
				return i, true
			}
		case c == '{' || c == '[':
			depth++
			i++
		case c == '}' || c == ']':
			if depth == 0 {
				return i, i > start // the end of a number or literal
			}
			depth--
			i++
			if depth == 0 {
				return i, true
			}
		case c == ',' || c == ':' || isSpace(c):
			if depth == 0 {
				return i, i > start
			}
			i++
		default:
			i++
		}
	}
	return len(line), false
}

// skipString steps over the string starting at line[i], escapes included.
func skipString(line []byte, i int) (int, bool) {
	for j := i + 1; j < len(line); {
		j = quoteOrBackslash(line, j)
		if j == len(line) {
			return len(line), false
		}
		if line[j] == '"' {
			return j + 1, true
		}
		j += 2 // a backslash and the character it escapes
	}
	return len(line), false
}

// quoteOrBackslash returns the index of the first '"' or '\\' in line at
// or after i, or len(line). Eight bytes are tested at a time (the "has a
// zero byte" test of Bit Twiddling Hacks on the bytes xor-ed with each):
// message text is most of a session, and skipping it was most of the
// light pass. A borrow may flag a byte above the lowest flagged one
// wrongly, never the lowest.
func quoteOrBackslash(line []byte, i int) int {
	const lsbs, msbs = 0x0101010101010101, 0x8080808080808080
	for ; i+8 <= len(line); i += 8 {
		x := binary.LittleEndian.Uint64(line[i:])
		q, b := x^(lsbs*'"'), x^(lsbs*'\\')
		if m := ((q-lsbs)&^q | (b-lsbs)&^b) & msbs; m != 0 {
			return i + bits.TrailingZeros64(m)/8
		}
	}
	for ; i < len(line); i++ {
		if c := line[i]; c == '"' || c == '\\' {
			return i
		}
	}
	return len(line)
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func skipSpace(line []byte, i int) int {
	for i < len(line) && isSpace(line[i]) {
		i++
	}
	return i
}

// endOfLine reports whether only JSON white space follows line[i:].
func endOfLine(line []byte, i int) bool {
	return skipSpace(line, i) == len(line)
}

// bytesString views b as a string without copying it: for a callee that
// keeps nothing of it (normalize.Builder.AddLinks).
func bytesString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}
