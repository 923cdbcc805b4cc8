package jsonl

import (
	"bytes"
	"unicode/utf8"

	"pisess/readers/normalize"
)

// MaxLineBytes is the reference's limit on a JSONL line, newline excluded
// (session.rs MAX_JSONL_LINE_BYTES).
const MaxLineBytes = normalize.MaxLineBytes

// rustTrimEmpty reports whether Rust's str::trim() leaves nothing of line:
// every character is Unicode White_Space (FORMAT.md §10). line must be
// valid UTF-8.
func rustTrimEmpty(line []byte) bool {
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
		if !normalize.IsRustWhitespace(r) {
			return false
		}
		i += n
	}
	return true
}

// hasNewline reports whether line ends with "\n".
func hasNewline(line []byte) bool { return len(line) > 0 && line[len(line)-1] == '\n' }

// bom is the UTF-8 byte-order mark.
var bom = []byte{0xEF, 0xBB, 0xBF}

func startsWithBOM(b []byte) bool { return bytes.HasPrefix(b, bom) }
