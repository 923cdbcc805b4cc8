package store

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"unicode"
	"unicode/utf8"

	"pisess/writers/wire"
)

// lineReader reads the lines of a JSONL store file (index, ledger) as the
// reference's read_jsonl does: each line at most wire.MaxFrameBytes with
// its newline; a last line without a newline is a torn tail; lines that
// Rust's str::trim empties (Unicode white space) are skipped.
type lineReader struct {
	r    *bufio.Reader
	buf  []byte
	line int64 // 1-based number of the line last returned
	off  int64 // offset of the line last returned
	next int64 // offset of the next line
}

func newLineReader(r io.Reader) *lineReader {
	return &lineReader{r: bufio.NewReaderSize(r, 64<<10)}
}

// Next returns the next non-blank line with its newline, valid until the
// next call; io.EOF at the end. A torn last line yields an error matching
// ErrTornTail, an over-long one wire.ErrTooLarge.
func (l *lineReader) Next() ([]byte, error) {
	for {
		b, err := l.readLine()
		if err != nil {
			return nil, err
		}
		if !isBlank(b) {
			return b, nil
		}
	}
}

func (l *lineReader) readLine() ([]byte, error) {
	l.buf = l.buf[:0]
	l.off = l.next
	for {
		chunk, err := l.r.ReadSlice('\n')
		if len(l.buf)+len(chunk) > wire.MaxFrameBytes {
			l.line++
			return nil, fmt.Errorf("line %d exceeds %d bytes: %w", l.line, wire.MaxFrameBytes, wire.ErrTooLarge)
		}
		l.buf = append(l.buf, chunk...)
		switch {
		case err == nil:
			l.line++
			l.next += int64(len(l.buf))
			return l.buf, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF):
			if len(l.buf) == 0 {
				return nil, io.EOF
			}
			l.line++
			return nil, fmt.Errorf("line %d has no newline: %w", l.line, ErrTornTail)
		default:
			return nil, err
		}
	}
}

// isBlank reports whether b holds only Unicode white space (Rust's
// char::is_whitespace, which Go's unicode.IsSpace matches).
func isBlank(b []byte) bool {
	for len(b) > 0 {
		if b[0] < utf8.RuneSelf {
			switch b[0] {
			case ' ', '\t', '\n', '\v', '\f', '\r':
				b = b[1:]
				continue
			}
			return false
		}
		r, n := utf8.DecodeRune(b)
		if r == utf8.RuneError || !unicode.IsSpace(r) {
			return false
		}
		b = b[n:]
	}
	return true
}

// isZero reports whether b is all zero bytes (a zero-filled tail: space the
// filesystem allocated for a write that never landed).
func isZero(b []byte) bool {
	return len(bytes.Trim(b, "\x00")) == 0
}
