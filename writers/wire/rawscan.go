package wire

import (
	"encoding/binary"
	"unicode/utf8"
)

// A frame's payload is a serde RawValue in the reference: its reader does
// not build the payload, it only checks its syntax (serde_json's
// ignore_value) and that the bytes are UTF-8. Building a Value tree for
// every payload, and a general one for every envelope and index row, would
// make verification allocation-bound, so ParseFrame and ParseIndexRow first
// walk the line with the syntax checker below, take the payload's span from
// that walk, and build the few flat members directly (decodeFast).
// Whenever the walk meets anything it does not handle (a syntax error, an
// escaped member name, a repeated payload member) they fall back to parsing
// the whole line, so the errors are the parser's and the walk can only
// ever make acceptance faster, never wider, except where serde's
// ignore_value is itself wider than a full parse: a lone surrogate escape, a number beyond f64 (1e700)
// and nesting deeper than the parser's recursion limit are accepted inside
// a payload, as the reference accepts them there. A differential fuzz test keeps the two in step.

// rawMember is one member of a top-level object: its key (as written, no
// escapes) and its value's span.
type rawMember struct {
	key        []byte
	start, end int
}

// scanObject walks a top-level object and returns its members' spans, or
// ok false when the fast path does not apply (a syntax error, a key with an
// escape, a value that is not UTF-8).
func scanObject(b []byte, members []rawMember) ([]rawMember, bool) {
	i := skipWS(b, 0)
	if i >= len(b) || b[i] != '{' {
		return nil, false
	}
	i = skipWS(b, i+1)
	for i < len(b) && b[i] != '}' {
		if b[i] != '"' {
			return nil, false
		}
		ks := i + 1
		var good bool
		if i, good = skipString(b, ks); !good {
			return nil, false
		}
		key := b[ks : i-1]
		for _, c := range key {
			if c == '\\' {
				return nil, false
			}
		}
		i = skipWS(b, i)
		if i >= len(b) || b[i] != ':' {
			return nil, false
		}
		i = skipWS(b, i+1)
		vs := i
		if i, good = skipValue(b, i); !good {
			return nil, false
		}
		members = append(members, rawMember{key: key, start: vs, end: i})
		i = skipWS(b, i)
		switch {
		case i < len(b) && b[i] == ',':
			i = skipWS(b, i+1)
			if i >= len(b) || b[i] != '"' {
				return nil, false
			}
		case i < len(b) && b[i] == '}':
		default:
			return nil, false
		}
	}
	if i >= len(b) || skipWS(b, i+1) != len(b) || !utf8.Valid(b) {
		return nil, false
	}
	return members, true
}

// decodeFast builds the Value ParseJSON would build for a flat top-level
// object from scanObject's spans: plain strings, unsigned integers and
// literals directly, anything else (an escape, a sign, a fraction, a
// container) through ParseJSON of that value alone. The member named raw
// is not built: its span is returned (start -1 when absent) and its value
// is a placeholder. ok is false when the fast path does not apply.
func decodeFast(b []byte, names []string, raw string) (v Value, start, end int, ok bool) {
	var buf [12]rawMember
	members, ok := scanObject(b, buf[:0])
	if !ok {
		return Value{}, 0, 0, false
	}
	start, end = -1, -1
	obj := make([]Member, len(members))
	for k, m := range members {
		obj[k].Key = intern(m.key, names)
		if raw != "" && obj[k].Key == raw {
			if start >= 0 {
				return Value{}, 0, 0, false // a repeated raw member: let the full parse refuse it
			}
			start, end = m.start, m.end
			obj[k].Value = U64(0)
			continue
		}
		if obj[k].Value, ok = flatValue(b[m.start:m.end]); !ok {
			return Value{}, 0, 0, false
		}
	}
	return Value{Kind: KindObject, Obj: obj}, start, end, true
}

// intern returns the name in names equal to key, without allocating, or a
// copy of key when there is none (an unknown member, about to be refused).
func intern(key []byte, names []string) string {
	for _, n := range names {
		if string(key) == n {
			return n
		}
	}
	return string(key)
}

// flatValue is ParseJSON of one checked value, short-cut for the common
// shapes.
func flatValue(b []byte) (Value, bool) {
	switch c := b[0]; {
	case c == '"':
		s := b[1 : len(b)-1]
		for _, c := range s {
			if c == '\\' {
				return fullValue(b)
			}
		}
		return String(string(s)), true // UTF-8 checked by scanObject
	case c == 't':
		return Bool(true), true
	case c == 'f':
		return Bool(false), true
	case c == 'n':
		return Null(), true
	case c >= '0' && c <= '9':
		var n uint64
		for _, d := range b {
			if d < '0' || d > '9' || n > (1<<64-1-uint64(d-'0'))/10 {
				return fullValue(b)
			}
			n = n*10 + uint64(d-'0')
		}
		return U64(n), true
	}
	return fullValue(b)
}

func fullValue(b []byte) (Value, bool) {
	v, err := ParseJSON(b, nil)
	return v, err == nil
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

// strPlain marks the bytes a string may hold unescaped; everything else
// (the quote, the backslash, C0 controls) needs a look.
var strPlain = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// skipString checks a string body starting just after its opening quote
// (serde's ignore_str: valid escapes, \u with four hex digits, no control
// character) and returns the index after its closing quote.
func skipString(b []byte, i int) (int, bool) {
	for {
		// Eight bytes at a time while none needs a look (SWAR: no byte
		// below 0x20, none equal to '"' or '\\'), then byte by byte.
		for i+8 <= len(b) {
			x := binary.LittleEndian.Uint64(b[i:])
			if hasLess(x, 0x20)|hasZero(x^(lsb*'"'))|hasZero(x^(lsb*'\\')) != 0 {
				break
			}
			i += 8
		}
		for i < len(b) && strPlain[b[i]] {
			i++
		}
		if i >= len(b) {
			return 0, false
		}
		switch b[i] {
		case '"':
			return i + 1, true
		case '\\':
			if i+1 >= len(b) {
				return 0, false
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(b) || !isHex(b[i+2]) || !isHex(b[i+3]) || !isHex(b[i+4]) || !isHex(b[i+5]) {
					return 0, false
				}
				i += 6
			default:
				return 0, false
			}
		default:
			return 0, false // a control character
		}
	}
}

const (
	lsb = 0x0101010101010101
	msb = 0x8080808080808080
)

// hasZero reports (non-zero) whether a byte of x is zero; hasLess whether a
// byte of x is below n (n <= 128). Both may also flag a byte above one
// that truly matches, never miss one: enough to decide "look closer".
func hasZero(x uint64) uint64    { return (x - lsb) & ^x & msb }
func hasLess(x, n uint64) uint64 { return (x - lsb*n) & ^x & msb }

// skipNumber checks a JSON number (serde's ignore_integer and friends).
func skipNumber(b []byte, i int) (int, bool) {
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i >= len(b):
		return 0, false
	case b[i] == '0':
		i++
		if i < len(b) && b[i] >= '0' && b[i] <= '9' {
			return 0, false
		}
	case b[i] >= '1' && b[i] <= '9':
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	default:
		return 0, false
	}
	if i < len(b) && b[i] == '.' {
		i++
		s := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == s {
			return 0, false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		s := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == s {
			return 0, false
		}
	}
	return i, true
}

// skipValue checks one JSON value starting at b[i] (no leading white space)
// and returns the index just after it. Like serde's ignore_value it keeps
// its own stack rather than recursing, and sets no depth limit.
func skipValue(b []byte, i int) (int, bool) {
	var stack []byte
	ok := true
	for {
		// A value.
		if i >= len(b) {
			return 0, false
		}
		switch c := b[i]; {
		case c == '"':
			i, ok = skipString(b, i+1)
		case c == '-' || c >= '0' && c <= '9':
			i, ok = skipNumber(b, i)
		case c == 'n':
			i, ok = skipLiteral(b, i, "null")
		case c == 't':
			i, ok = skipLiteral(b, i, "true")
		case c == 'f':
			i, ok = skipLiteral(b, i, "false")
		case c == '[' || c == '{':
			stack = append(stack, c)
			i = skipWS(b, i+1)
			if i < len(b) && b[i] == c+2 { // ']' is '['+2, '}' is '{'+2
				stack = stack[:len(stack)-1]
				i++
				break
			}
			if c == '{' {
				if i, ok = skipKey(b, i); !ok {
					return 0, false
				}
			}
			continue
		default:
			return 0, false
		}
		if !ok {
			return 0, false
		}
		// After a value: close containers or move to the next item.
		for {
			if len(stack) == 0 {
				return i, true
			}
			i = skipWS(b, i)
			if i >= len(b) {
				return 0, false
			}
			top := stack[len(stack)-1]
			if b[i] == top+2 {
				stack = stack[:len(stack)-1]
				i++
				continue
			}
			if b[i] != ',' {
				return 0, false
			}
			i = skipWS(b, i+1)
			if top == '{' {
				if i, ok = skipKey(b, i); !ok {
					return 0, false
				}
			}
			break
		}
	}
}

// skipKey checks `"key" :` and the white space after it.
func skipKey(b []byte, i int) (int, bool) {
	if i >= len(b) || b[i] != '"' {
		return 0, false
	}
	i, ok := skipString(b, i+1)
	if !ok {
		return 0, false
	}
	i = skipWS(b, i)
	if i >= len(b) || b[i] != ':' {
		return 0, false
	}
	return skipWS(b, i+1), true
}

func skipLiteral(b []byte, i int, lit string) (int, bool) {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return 0, false
	}
	return i + len(lit), true
}
