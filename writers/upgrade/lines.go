package upgrade

import (
	"bytes"
	"unicode"
	"unicode/utf8"

	"pisess/readers/normalize"
)

// MaxLineBytes is the longest line read, newline excluded: the reference's
// limit (FORMAT.md §10). pi has none, but a longer line is a damaged file
// rather than a session, and is refused.
const MaxLineBytes = normalize.MaxLineBytes

func hasNewline(line []byte) bool { return len(line) > 0 && line[len(line)-1] == '\n' }

// bom is the UTF-8 byte-order mark.
var bom = []byte{0xEF, 0xBB, 0xBF}

// blank reports whether pi drops line as empty: every character is Unicode
// White_Space (Rust's trim) or U+FEFF (which JavaScript's trim also
// removes). Either way the line holds no data. line must be valid UTF-8.
func blank(line []byte) bool {
	for i := 0; i < len(line); {
		c := line[i]
		if c < utf8.RuneSelf {
			if c != ' ' && (c < '\t' || c > '\r') {
				return false
			}
			i++
			continue
		}
		r, n := utf8.DecodeRune(line[i:])
		// U+0085 is not JavaScript white space, so pi fails to parse a line
		// of it and drops it: the line holds no data either way.
		if !isJSSpace(r) && r != '\u0085' {
			return false
		}
		i += n
	}
	return true
}

// content returns line without its "\n"; crlf tells whether a "\r" came
// before it (the "\r" is kept: it is JSON white space).
func content(line []byte) (text []byte, crlf bool) {
	if hasNewline(line) {
		line = line[:len(line)-1]
		return line, bytes.HasSuffix(line, []byte{'\r'})
	}
	return line, false
}

// isJSSpace reports whether r is white space to JavaScript's trim():
// WhiteSpace (tab, VT, FF, space, U+00A0, U+FEFF, category Zs) or a
// LineTerminator (LF, CR, U+2028, U+2029). Unlike Rust's trim, U+0085 is
// not, and U+FEFF is.
func isJSSpace(r rune) bool {
	switch r {
	case '\t', '\v', '\f', ' ', '\n', '\r', '\u00A0', '\uFEFF', '\u2028', '\u2029':
		return true
	}
	return r > 0x7F && unicode.Is(unicode.Zs, r)
}

func trimJSLeft(b []byte) []byte  { return bytes.TrimLeftFunc(b, isJSSpace) }
func trimJSRight(b []byte) []byte { return bytes.TrimRightFunc(b, isJSSpace) }
