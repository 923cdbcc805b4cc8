package normalize

import (
	"bufio"
	"errors"
	"io"

	"pisess/writers/bufpool"
)

// MaxLineBytes is the reference's limit on a JSONL line, newline excluded
// (session.rs MAX_JSONL_LINE_BYTES, FORMAT.md §10).
const MaxLineBytes = 100 << 20

// LineBufferSize is the read buffer a whole file is read with. Lines that
// fit are returned straight from it; longer ones are gathered in a buffer of
// the LineReader's own.
const LineBufferSize = 256 << 10

// ErrLineTooLong is returned by [LineReader.Next] for a line over the limit.
var ErrLineTooLong = errors.New("line too long")

// LineReader splits a file into lines on "\n" only, as the reference's
// read_capped_utf8_line and pi's split("\n") do, keeping the line number,
// the byte offset and, when asked, a SHA-256 of every byte it has consumed.
// It is shared by the JSONL source and the legacy-file upgrader.
type LineReader struct {
	r     *bufio.Reader
	long  []byte
	limit int
	off   int64 // offset of the next byte
	line  int64 // number of the line last returned (1-based)
	sum   *asyncHash
}

// NewLineReader reads r through a buffer of bufSize bytes, refusing lines
// whose content (newline excluded) exceeds limit; hashed keeps a SHA-256 of
// the bytes consumed (on a helper goroutine), for [LineReader.Digest].
func NewLineReader(r io.Reader, bufSize, limit int, hashed bool) *LineReader {
	var br *bufio.Reader
	if bufSize == LineBufferSize {
		br = readerPool.Get()
		br.Reset(r)
	} else {
		br = bufio.NewReaderSize(r, bufSize)
	}
	lr := &LineReader{r: br, limit: limit}
	if hashed {
		lr.sum = newAsyncHash()
	}
	return lr
}

// readerPool holds the read buffers of whole-file LineReaders: a tree of
// thousands of sessions reads each through the same few buffers instead
// of allocating (and the runtime zeroing and returning) 256 KiB per pass.
var readerPool = bufpool.NewReaders(LineBufferSize)

// Restart makes lr read r from its start, as a new LineReader with the
// same limit would, reusing its buffers (a second pass).
func (lr *LineReader) Restart(r io.Reader, hashed bool) {
	lr.r.Reset(r)
	lr.long = lr.long[:0]
	lr.off, lr.line = 0, 0
	switch {
	case !hashed:
		if lr.sum != nil {
			lr.sum.release()
		}
		lr.sum = nil
	case lr.sum != nil:
		lr.sum.reset()
	default:
		lr.sum = newAsyncHash()
	}
}

// Release hands lr's read buffer back for reuse; lr must not be used
// after it.
func (lr *LineReader) Release() {
	readerPool.Put(lr.r)
	lr.r = nil
	if lr.sum != nil {
		lr.sum.release()
		lr.sum = nil
	}
}

// Next returns the next line with its "\n" when it has one (only the last
// line can lack it) and the offset where it starts. The slice is valid
// until the next call. At the end it returns io.EOF; a line whose content
// exceeds the limit gives ErrLineTooLong (the line number is counted).
func (lr *LineReader) Next() (line []byte, start int64, err error) {
	start = lr.off
	if cap(lr.long) > 4*LineBufferSize {
		// Do not let one 100 MiB line pin 100 MiB for the rest of the file.
		lr.long = nil
	}
	lr.long = lr.long[:0]
	for {
		chunk, err := lr.r.ReadSlice('\n')
		if len(chunk) > 0 {
			if lr.sum != nil {
				lr.sum.write(chunk)
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
				return nil, start, ErrLineTooLong
			}
			return chunk, start, nil
		case errors.Is(err, bufio.ErrBufferFull):
			if len(lr.long)+len(chunk) > lr.limit {
				// Whatever follows, the content is already over the limit.
				lr.line++
				return nil, start, ErrLineTooLong
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
				return nil, start, ErrLineTooLong
			}
			return chunk, start, nil
		default:
			return nil, start, err
		}
	}
}

// Offset is the offset of the next byte: the number of bytes consumed.
func (lr *LineReader) Offset() int64 { return lr.off }

// Line is the number of the line last returned or refused (1-based; 0
// before the first).
func (lr *LineReader) Line() int64 { return lr.line }

// Digest returns the SHA-256 of every byte consumed so far (zero unless the
// reader was made hashed).
func (lr *LineReader) Digest() (d [32]byte) {
	if lr.sum != nil {
		d = lr.sum.sum()
	}
	return d
}

// Prefix returns the PrefixHash of every byte consumed so far (zero unless
// the reader was made hashed).
func (lr *LineReader) Prefix() PrefixHash {
	if lr.sum == nil {
		return PrefixHash{}
	}
	return lr.sum.prefix()
}
