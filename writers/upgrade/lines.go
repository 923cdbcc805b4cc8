package upgrade

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"unicode"
	"unicode/utf8"
)

// MaxLineBytes is the longest line read, newline excluded: the reference's
// limit (FORMAT.md §10). pi has none, but a longer line is a damaged file
// rather than a session, and is refused.
const MaxLineBytes = 100 << 20

// readBufferSize is the read buffer; longer lines are gathered in long.
const readBufferSize = 256 << 10

var errLineTooLong = errors.New("line too long")

// lineReader splits a file on "\n" only, as pi's split("\n") does, and
// counts lines and bytes. Whatever it reads from r is also what the
// caller's tee (a hash, the quarantine copy) sees, since it is the only
// reader.
type lineReader struct {
	r    *bufio.Reader
	long []byte
	off  int64 // offset of the next byte
	line int64 // number of the line last returned (1-based)
}

func newLineReader(r io.Reader) *lineReader {
	return &lineReader{r: bufio.NewReaderSize(r, readBufferSize)}
}

// next returns the next line with its "\n" when it has one (only the last
// line can lack it), valid until the next call; io.EOF at the end.
func (lr *lineReader) next() ([]byte, error) {
	if cap(lr.long) > 4*readBufferSize {
		lr.long = nil // do not pin one huge line's memory for the rest of the file
	}
	lr.long = lr.long[:0]
	for {
		chunk, err := lr.r.ReadSlice('\n')
		lr.off += int64(len(chunk))
		switch {
		case err == nil || (errors.Is(err, io.EOF) && len(lr.long)+len(chunk) > 0):
			lr.line++
			if len(lr.long) > 0 {
				lr.long = append(lr.long, chunk...)
				chunk = lr.long
			}
			if len(chunk)-boolInt(hasNewline(chunk)) > MaxLineBytes {
				return nil, errLineTooLong
			}
			return chunk, nil
		case errors.Is(err, bufio.ErrBufferFull):
			if len(lr.long)+len(chunk) > MaxLineBytes {
				lr.line++
				return nil, errLineTooLong
			}
			lr.long = append(lr.long, chunk...)
		default:
			return nil, err // io.EOF at the end, or a read error
		}
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

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
		if r != '\uFEFF' && !unicode.Is(unicode.White_Space, r) {
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
