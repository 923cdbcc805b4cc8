package normalize

import (
	"strconv"
	"unicode"
	"unicode/utf8"
)

// IsRustWhitespace reports whether r has the Unicode White_Space property,
// the set Rust's char::is_whitespace and str::trim use: besides ASCII
// space, \t, \n, \v, \f and \r it holds NEL, NBSP, U+1680, U+2000–U+200A,
// U+2028, U+2029, U+202F, U+205F and U+3000. (U+FEFF, the byte-order mark,
// is not in it.)
func IsRustWhitespace(r rune) bool {
	return unicode.Is(unicode.White_Space, r)
}

// RustTrim returns b without the leading and trailing White_Space
// characters, as Rust's str::trim does. b must be valid UTF-8.
func RustTrim(b []byte) []byte {
	for len(b) > 0 {
		if c := b[0]; c < utf8.RuneSelf {
			if !isASCIISpace(c) {
				break
			}
			b = b[1:]
			continue
		}
		r, n := utf8.DecodeRune(b)
		if !IsRustWhitespace(r) {
			break
		}
		b = b[n:]
	}
	for len(b) > 0 {
		if c := b[len(b)-1]; c < utf8.RuneSelf {
			if !isASCIISpace(c) {
				break
			}
			b = b[:len(b)-1]
			continue
		}
		r, n := utf8.DecodeLastRune(b)
		if !IsRustWhitespace(r) {
			break
		}
		b = b[:len(b)-n]
	}
	return b
}

// RustTrimString is RustTrim for a string.
func RustTrimString(s string) string {
	return string(RustTrim([]byte(s)))
}

// isASCIISpace is the ASCII part of White_Space: \t \n \v \f \r and space.
func isASCIISpace(c byte) bool {
	return c == ' ' || (c >= '\t' && c <= '\r')
}

// UTF8Error describes the first invalid UTF-8 sequence in b as Rust's
// std::str::from_utf8 does (its Utf8Error): valid is the length of the valid
// prefix, invalidLen the length of the invalid sequence (1 to 3), or 0 when
// the input ended inside a sequence that could still have been completed
// ("incomplete"). ok is true when b is valid.
func UTF8Error(b []byte) (valid, invalidLen int, ok bool) {
	if utf8.Valid(b) {
		return 0, 0, true
	}
	i := 0
	for i < len(b) {
		c := b[i]
		if c < utf8.RuneSelf {
			i++
			continue
		}
		n, bad := rustSequence(b[i:])
		if bad >= 0 {
			return i, bad, false
		}
		i += n
	}
	return len(b), 0, true // not reached: utf8.Valid said no
}

// rustSequence checks the multi-byte sequence at the start of b the way
// Rust's run_utf8_validation does. It returns the sequence length, or
// bad >= 0: the error_len (0 meaning the input ended early).
func rustSequence(b []byte) (n, bad int) {
	first := b[0]
	width := 0
	switch {
	case first >= 0xC2 && first <= 0xDF:
		width = 2
	case first >= 0xE0 && first <= 0xEF:
		width = 3
	case first >= 0xF0 && first <= 0xF4:
		width = 4
	default:
		return 0, 1
	}
	next := func(k int) (byte, bool) {
		if k >= len(b) {
			return 0, false
		}
		return b[k], true
	}
	c1, ok := next(1)
	if !ok {
		return 0, 0
	}
	switch width {
	case 2:
		if !isCont(c1) {
			return 0, 1
		}
		return 2, -1
	case 3:
		switch {
		case first == 0xE0 && c1 >= 0xA0 && c1 <= 0xBF,
			first >= 0xE1 && first <= 0xEC && isCont(c1),
			first == 0xED && c1 >= 0x80 && c1 <= 0x9F,
			first >= 0xEE && isCont(c1):
		default:
			return 0, 1
		}
		c2, ok := next(2)
		if !ok {
			return 0, 0
		}
		if !isCont(c2) {
			return 0, 2
		}
		return 3, -1
	default:
		switch {
		case first == 0xF0 && c1 >= 0x90 && c1 <= 0xBF,
			first >= 0xF1 && first <= 0xF3 && isCont(c1),
			first == 0xF4 && c1 >= 0x80 && c1 <= 0x8F:
		default:
			return 0, 1
		}
		c2, ok := next(2)
		if !ok {
			return 0, 0
		}
		if !isCont(c2) {
			return 0, 2
		}
		c3, ok := next(3)
		if !ok {
			return 0, 0
		}
		if !isCont(c3) {
			return 0, 3
		}
		return 4, -1
	}
}

func isCont(c byte) bool { return c&0xC0 == 0x80 }

// UTF8Message is Rust's Display of that Utf8Error.
func UTF8Message(valid, invalidLen int) string {
	if invalidLen == 0 {
		return "incomplete utf-8 byte sequence from index " + strconv.Itoa(valid)
	}
	return "invalid utf-8 sequence of " + strconv.Itoa(invalidLen) + " bytes from index " + strconv.Itoa(valid)
}
