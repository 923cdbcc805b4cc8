package wire

import "unicode/utf8"

// A frame's payload is a serde RawValue in the reference: its reader does
// not build the payload, it only checks its syntax (serde_json's
// ignore_value) and that the bytes are UTF-8. Building a Value tree for
// every payload would make verification allocation-bound, so ParseFrame
// first walks the frame with the syntax checker below, takes the payload's
// span from that walk, and gives the parser only the small envelope (the
// frame with its payload replaced by 0). Whenever the walk meets anything
// it does not handle (a syntax error, an escaped member name, a repeated
// payload member) ParseFrame falls back to parsing the whole line, so the
// errors are the parser's and the walk can only ever make acceptance
// faster, never wider, except where serde's ignore_value is itself wider
// than a full parse: a lone surrogate escape, a number beyond f64 (1e700)
// and nesting deeper than the parser's recursion limit are accepted inside
// a payload, as the reference accepts them there. A differential fuzz test keeps the two in step.

// frameEnvelope finds the top-level "payload" member of a frame body and
// returns its value's span, or ok false when the fast path does not apply.
func frameEnvelope(b []byte) (start, end int, ok bool) {
	i := skipWS(b, 0)
	if i >= len(b) || b[i] != '{' {
		return 0, 0, false
	}
	i = skipWS(b, i+1)
	found := false
	for i < len(b) && b[i] != '}' {
		if b[i] != '"' {
			return 0, 0, false
		}
		ks := i + 1
		var good bool
		if i, good = skipString(b, ks); !good {
			return 0, 0, false
		}
		key := b[ks : i-1]
		for _, c := range key {
			if c == '\\' {
				return 0, 0, false
			}
		}
		i = skipWS(b, i)
		if i >= len(b) || b[i] != ':' {
			return 0, 0, false
		}
		i = skipWS(b, i+1)
		vs := i
		if i, good = skipValue(b, i); !good {
			return 0, 0, false
		}
		if string(key) == "payload" {
			if found {
				return 0, 0, false
			}
			found, start, end = true, vs, i
		}
		i = skipWS(b, i)
		switch {
		case i < len(b) && b[i] == ',':
			i = skipWS(b, i+1)
			if i >= len(b) || b[i] != '"' {
				return 0, 0, false
			}
		case i < len(b) && b[i] == '}':
		default:
			return 0, 0, false
		}
	}
	if i >= len(b) || !found {
		return 0, 0, false
	}
	if skipWS(b, i+1) != len(b) || !utf8.Valid(b[start:end]) {
		return 0, 0, false
	}
	return start, end, true
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
