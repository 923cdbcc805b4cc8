package wire

import (
	"bytes"
	"errors"
	"path/filepath"
	"testing"
)

// sampleFromVectors returns the shortest frame of the tricky vector that
// has a parent, with its segment and index row.
func sampleFromVectors(tb testing.TB) (seg []byte, row IndexRow) {
	tb.Helper()
	store := filepath.Join(vectorsDir(tb), "accept", "tricky", "reference.v2")
	segLines := lines(tb, filepath.Join(store, "segments", SegmentFileName(1)))
	seg = bytes.Join(segLines, nil)
	best := IndexRow{}
	for _, l := range lines(tb, filepath.Join(store, "index", "offsets.jsonl")) {
		r, err := ParseIndexRow(l)
		if err != nil {
			tb.Fatal(err)
		}
		f, _ := ParseFrame(seg[r.ByteOffset:r.End()])
		if f.ParentEntryID != "" && (best.ByteLength == 0 || r.ByteLength < best.ByteLength) {
			best = r
		}
	}
	if best.ByteLength > 0 {
		return seg, best
	}
	tb.Fatal("no sample frame")
	return nil, IndexRow{}
}

// verifyRow is what a reader does with a row: bounds, CRC, frame, and the
// frame's coordinates against the row.
func verifyRow(seg []byte, r IndexRow) error {
	if r.End() > uint64(len(seg)) || r.End() < r.ByteOffset {
		return errors.New("out of bounds")
	}
	line := seg[r.ByteOffset:r.End()]
	if CRC32C(line) != r.CRC32C {
		return ErrChecksum
	}
	f, err := ParseFrame(line)
	if err != nil {
		return err
	}
	if f.EntrySeq != r.EntrySeq || f.EntryID != r.EntryID || f.SegmentSeq != r.SegmentSeq || f.FrameSeq != r.FrameSeq {
		return errors.New("coordinates differ")
	}
	return nil
}

// Every change of any single byte of a frame line to any other value is
// detected: by ParseFrame itself (syntax, members, payload digest and size)
// or, where the line still parses (a digit of the timestamp, a letter of an
// id), by the CRC-32C its index row holds.
func TestEverySingleByteChangeOfAFrameIsDetected(t *testing.T) {
	seg, row := sampleFromVectors(t)
	orig := seg[row.ByteOffset:row.End()]
	byParse, byCRC := 0, 0
	for i := range orig {
		for v := 0; v < 256; v++ {
			if byte(v) == orig[i] {
				continue
			}
			line := append([]byte(nil), orig...)
			line[i] = byte(v)
			if _, err := ParseFrame(line); err != nil {
				byParse++
				continue
			}
			if CRC32C(line) == row.CRC32C {
				t.Fatalf("byte %d → %#x undetected: %s", i, v, line)
			}
			byCRC++
		}
	}
	t.Logf("%d-byte frame: %d changes refused by ParseFrame, %d more caught only by the CRC", len(orig), byParse, byCRC)
}

// Every change of any single byte of an index row is detected: by
// ParseIndexRow, or because the row no longer resolves to a frame that
// matches its CRC and coordinates.
func TestEverySingleByteChangeOfARowIsDetected(t *testing.T) {
	seg, row := sampleFromVectors(t)
	orig := AppendIndexRow(nil, row)
	if err := verifyRow(seg, row); err != nil {
		t.Fatal(err)
	}
	byParse, byResolve := 0, 0
	for i := range orig {
		for v := 0; v < 256; v++ {
			if byte(v) == orig[i] {
				continue
			}
			line := append([]byte(nil), orig...)
			line[i] = byte(v)
			r, err := ParseIndexRow(line)
			if err != nil {
				byParse++
				continue
			}
			if r == row {
				// White space or an escape that decodes to the same row:
				// not a change of the row at all.
				continue
			}
			if verifyRow(seg, r) == nil {
				t.Fatalf("byte %d → %#x undetected: %s", i, v, line)
			}
			byResolve++
		}
	}
	t.Logf("%d-byte row: %d changes refused by ParseIndexRow, %d more caught against the segment", len(orig), byParse, byResolve)
}
