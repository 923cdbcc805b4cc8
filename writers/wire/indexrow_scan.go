package wire

import "bytes"

// Index rows are read back far more often than written (every staging
// check, every refresh's copy, verify, fsck), and nearly every row read is
// in the form AppendIndexRow writes. ScanCanonicalIndexRow reads exactly
// that form without the general JSON decoder, about ten times faster; anything else
// (other key order, spacing, escapes, leading zeros, a number past uint64)
// is left to the general path, which gives the same row or says why not.

const (
	rowKeyEntrySeq   = `{"schema":"` + SchemaIndexRow + `","entrySeq":`
	rowKeyEntryID    = `,"entryId":"`
	rowKeySegmentSeq = `","segmentSeq":`
	rowKeyFrameSeq   = `,"frameSeq":`
	rowKeyByteOffset = `,"byteOffset":`
	rowKeyByteLength = `,"byteLength":`
	rowKeyCRC32C     = `,"crc32c":"`
	rowTail          = `","state":"` + string(RowActive) + "\"}\n"
)

// ScanCanonicalIndexRow returns the row of a line in AppendIndexRow's
// form that passes ParseIndexRow's checks; ok is false for any other line.
// ok is exactly "ParseIndexRow accepts the line and AppendIndexRow writes
// it back unchanged" (fuzzed), without the re-encoding.
func ScanCanonicalIndexRow(line []byte) (r IndexRow, ok bool) {
	s := rowScanner{b: line}
	var id []byte
	r.EntrySeq, id = s.head()
	if !s.lit(rowKeySegmentSeq) {
		return r, false
	}
	r.SegmentSeq = s.uint()
	if !s.lit(rowKeyFrameSeq) {
		return r, false
	}
	r.FrameSeq = s.uint()
	if !s.lit(rowKeyByteOffset) {
		return r, false
	}
	r.ByteOffset = s.uint()
	if !s.lit(rowKeyByteLength) {
		return r, false
	}
	r.ByteLength = s.uint()
	if !s.lit(rowKeyCRC32C) {
		return r, false
	}
	crc := s.until('"')
	if !s.lit(rowTail) || len(s.b) != 0 || s.bad {
		return r, false
	}
	if r.EntrySeq == 0 || r.SegmentSeq == 0 || r.FrameSeq == 0 || r.ByteLength == 0 || r.ByteLength > MaxFrameBytes ||
		!validEntryID(id) || !validCRC32C(crc) {
		return r, false
	}
	r.EntryID, r.CRC32C, r.State = string(id), string(crc), RowActive
	return r, true
}

type rowScanner struct {
	b   []byte
	bad bool
}

// head reads a row's beginning, up to its entryId's closing quote: the
// entrySeq and the id's bytes (unchecked).
func (s *rowScanner) head() (entrySeq uint64, id []byte) {
	if !s.lit(rowKeyEntrySeq) {
		return 0, nil
	}
	entrySeq = s.uint()
	if !s.lit(rowKeyEntryID) {
		return 0, nil
	}
	return entrySeq, s.until('"')
}

func (s *rowScanner) lit(p string) bool {
	if s.bad || len(s.b) < len(p) || string(s.b[:len(p)]) != p {
		s.bad = true
		return false
	}
	s.b = s.b[len(p):]
	return true
}

// uint reads a decimal number as serde_json writes one: no sign, no
// leading zero, no fraction or exponent, at most uint64.
func (s *rowScanner) uint() uint64 {
	var n uint64
	i := 0
	for ; i < len(s.b) && s.b[i] >= '0' && s.b[i] <= '9'; i++ {
		d := uint64(s.b[i] - '0')
		if n > (1<<64-1-d)/10 {
			s.bad = true
			return 0
		}
		n = n*10 + d
	}
	if i == 0 || (i > 1 && s.b[0] == '0') {
		s.bad = true
		return 0
	}
	s.b = s.b[i:]
	return n
}

// until returns the bytes before the next c (c stays), or marks the scan
// bad when there is none.
func (s *rowScanner) until(c byte) []byte {
	if s.bad {
		return nil
	}
	i := bytes.IndexByte(s.b, c)
	if i < 0 {
		s.bad = true
		return nil
	}
	v := s.b[:i]
	s.b = s.b[i:]
	return v
}

// IndexRowEntryID returns the entryId of a line that begins as
// AppendIndexRow writes a row, without scanning the rest of it: for rows
// their reader vouches for (a store continued in place, issue 14), whose
// last row alone is scanned whole. ok is false for any other line.
func IndexRowEntryID(line []byte) (string, bool) {
	s := rowScanner{b: line}
	_, id := s.head()
	if s.bad || !validEntryID(id) {
		return "", false
	}
	return string(id), true
}
