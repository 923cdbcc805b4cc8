package jsonl

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"errors"
	"hash"
	"io"
	"unicode/utf8"

	"pisess/readers/normalize"
)

// MaxLineBytes is the reference's limit on a JSONL line, newline excluded
// (session.rs MAX_JSONL_LINE_BYTES).
const MaxLineBytes = 100 << 20

// readBufferSize is the read buffer. Lines that fit are decoded straight
// from it; longer ones are gathered in lineReader.long.
const readBufferSize = 256 << 10

// errLineTooLong is returned by next for a line over the limit.
var errLineTooLong = errors.New("line too long")

// lineReader splits a file into lines on "\n" only, as the reference's
// read_capped_utf8_line does, keeping the line number, the byte offset and
// a SHA-256 of every byte it has consumed.
type lineReader struct {
	r     *bufio.Reader
	long  []byte
	limit int
	off   int64 // offset of the next byte
	line  int64 // number of the line last returned (1-based)
	sum   hash.Hash
}

func newLineReader(r io.Reader, bufSize, limit int, hashed bool) *lineReader {
	lr := &lineReader{r: bufio.NewReaderSize(r, bufSize), limit: limit}
	if hashed {
		lr.sum = sha256.New()
	}
	return lr
}

// next returns the next line with its "\n" when it has one (only the last
// line can lack it) and the offset where it starts. The slice is valid
// until the next call. At the end it returns io.EOF; a line whose content
// exceeds the limit gives errLineTooLong (the line number is counted).
func (lr *lineReader) next() (line []byte, start int64, err error) {
	start = lr.off
	if cap(lr.long) > 4*readBufferSize {
		// Do not let one 100 MiB line pin 100 MiB for the rest of the file.
		lr.long = nil
	}
	lr.long = lr.long[:0]
	for {
		chunk, err := lr.r.ReadSlice('\n')
		if len(chunk) > 0 {
			if lr.sum != nil {
				lr.sum.Write(chunk)
			}
			lr.off += int64(len(chunk))
		}
		switch {
		case err == nil:
			lr.line++
			if len(lr.long) > 0 {
				lr.long = append(lr.long, chunk...)
				chunk = lr.long
			}
			if len(chunk)-1 > lr.limit {
				return nil, start, errLineTooLong
			}
			return chunk, start, nil
		case errors.Is(err, bufio.ErrBufferFull):
			if len(lr.long)+len(chunk) > lr.limit {
				// Whatever follows, the content is already over the limit.
				lr.line++
				return nil, start, errLineTooLong
			}
			lr.long = append(lr.long, chunk...)
		case errors.Is(err, io.EOF):
			if len(lr.long)+len(chunk) == 0 {
				return nil, start, io.EOF
			}
			lr.line++
			if len(lr.long) > 0 {
				lr.long = append(lr.long, chunk...)
				chunk = lr.long
			}
			if len(chunk) > lr.limit {
				return nil, start, errLineTooLong
			}
			return chunk, start, nil
		default:
			return nil, start, err
		}
	}
}

// digest returns the SHA-256 of every byte consumed so far.
func (lr *lineReader) digest() (d [32]byte) {
	if lr.sum != nil {
		lr.sum.Sum(d[:0])
	}
	return d
}

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
