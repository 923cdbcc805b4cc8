package wire

import "strconv"

// IndexRow is one line of index/offsets.jsonl (FORMAT.md §3).
type IndexRow struct {
	EntrySeq   uint64
	EntryID    string
	SegmentSeq uint64
	FrameSeq   uint64
	ByteOffset uint64 // where the frame line starts in its segment
	ByteLength uint64 // the frame line with its newline
	CRC32C     string // of those bytes, 8 upper-case hex digits
	State      RowState
}

// End returns the offset just after the row's frame line.
func (r IndexRow) End() uint64 { return r.ByteOffset + r.ByteLength }

var indexRowNames = []string{
	"schema", "entrySeq", "entryId", "segmentSeq", "frameSeq", "byteOffset",
	"byteLength", "crc32c", "state",
}

const (
	irSchema = iota
	irEntrySeq
	irEntryID
	irSegmentSeq
	irFrameSeq
	irByteOffset
	irByteLength
	irCRC32C
	irState
)

// AppendIndexRow appends r as a compact line with its newline.
func AppendIndexRow(dst []byte, r IndexRow) []byte {
	dst = append(dst, `{"schema":"`+SchemaIndexRow+`","entrySeq":`...)
	dst = strconv.AppendUint(dst, r.EntrySeq, 10)
	dst = append(dst, `,"entryId":`...)
	dst = AppendString(dst, r.EntryID)
	dst = append(dst, `,"segmentSeq":`...)
	dst = strconv.AppendUint(dst, r.SegmentSeq, 10)
	dst = append(dst, `,"frameSeq":`...)
	dst = strconv.AppendUint(dst, r.FrameSeq, 10)
	dst = append(dst, `,"byteOffset":`...)
	dst = strconv.AppendUint(dst, r.ByteOffset, 10)
	dst = append(dst, `,"byteLength":`...)
	dst = strconv.AppendUint(dst, r.ByteLength, 10)
	dst = append(dst, `,"crc32c":`...)
	dst = AppendString(dst, r.CRC32C)
	dst = append(dst, `,"state":`...)
	dst = AppendString(dst, string(r.State))
	return append(dst, '}', '\n')
}

// ParseIndexRow decodes one index line (with its newline) and checks it as
// the reference's row validation does: schema, state "active", positive
// entrySeq, segmentSeq, frameSeq and byteLength, byteLength within
// MaxFrameBytes, entry-id pattern, upper-case CRC.
func ParseIndexRow(line []byte) (IndexRow, error) {
	if r, ok := ScanCanonicalIndexRow(line); ok {
		return r, nil
	}
	return parseIndexRow(line, true)
}

// parseIndexRow is ParseIndexRow with the fast path (rawscan.go) on or off.
func parseIndexRow(line []byte, fast bool) (IndexRow, error) {
	body, err := lineBody(DocIndexRow, line, MaxFrameBytes)
	if err != nil {
		return IndexRow{}, err
	}
	var v Value
	if fast {
		v, _, _, fast = decodeFast(body, indexRowNames, "")
	}
	if !fast {
		if v, err = parseDoc(DocIndexRow, body, nil); err != nil {
			return IndexRow{}, err
		}
	}
	d := decodeObject(DocIndexRow, "", v, indexRowNames, false)
	d.check(irSchema, d.str(irSchema) == SchemaIndexRow, "unsupported schema")
	var r IndexRow
	r.EntrySeq = d.u64(irEntrySeq)
	d.check(irEntrySeq, r.EntrySeq > 0, "must be positive")
	r.EntryID = d.str(irEntryID)
	d.check(irEntryID, ValidEntryID(r.EntryID), "does not match the V2 entry-id contract")
	r.SegmentSeq = d.u64(irSegmentSeq)
	d.check(irSegmentSeq, r.SegmentSeq > 0, "must be positive")
	r.FrameSeq = d.u64(irFrameSeq)
	d.check(irFrameSeq, r.FrameSeq > 0, "must be positive")
	r.ByteOffset = d.u64(irByteOffset)
	r.ByteLength = d.u64(irByteLength)
	d.check(irByteLength, r.ByteLength > 0, "must be positive")
	d.check(irByteLength, r.ByteLength <= MaxFrameBytes, "exceeds the 100 MiB frame limit")
	r.CRC32C = d.str(irCRC32C)
	d.check(irCRC32C, ValidCRC32C(r.CRC32C), "not 8 upper-case hex digits")
	r.State = RowState(d.str(irState))
	d.check(irState, r.State == RowActive, "unsupported state (the reference accepts only \"active\")")
	if err := d.error(); err != nil {
		return IndexRow{}, err
	}
	return r, nil
}
