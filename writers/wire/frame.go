package wire

import (
	"strconv"
)

// MaxFrameBytes is the absolute limit of one frame line with its newline
// (100 MiB): the reference refuses to write or read a longer one. Index and
// ledger lines share the limit, which is the reference's line-read bound.
const MaxFrameBytes = 100 << 20

// MaxSegmentBytes is the largest segment pi reads (64 MiB, §2): pi's resume
// and status read stores with this fixed limit.
const MaxSegmentBytes = 64 << 20

// Frame is one segment frame (FORMAT.md §2), members in spec order.
type Frame struct {
	SegmentSeq    uint64
	FrameSeq      uint64
	EntrySeq      uint64
	EntryID       string
	ParentEntryID string // "" when the entry has no parent (member omitted)
	EntryType     EntryType
	Timestamp     string // RFC 3339, as written
	PayloadSHA256 string
	PayloadBytes  uint64
	// Payload is the payload's exact bytes: canonical JSON (§2). ParseFrame
	// returns a sub-slice of the line it was given.
	Payload []byte
}

// SetPayload sets Payload and derives PayloadSHA256 and PayloadBytes.
func (f *Frame) SetPayload(p []byte) {
	f.Payload = p
	f.PayloadSHA256 = PayloadSHA256(p)
	f.PayloadBytes = uint64(len(p))
}

var frameNames = []string{
	"schema", "segmentSeq", "frameSeq", "entrySeq", "entryId", "parentEntryId",
	"entryType", "timestamp", "payloadSha256", "payloadBytes", "payload",
}

const (
	fmSchema = iota
	fmSegmentSeq
	fmFrameSeq
	fmEntrySeq
	fmEntryID
	fmParentEntryID
	fmEntryType
	fmTimestamp
	fmPayloadSHA256
	fmPayloadBytes
	fmPayload
)

// AppendFrame appends f as a compact frame line with its newline. It writes
// the members as they are: SetPayload keeps the digest and size in step.
func AppendFrame(dst []byte, f Frame) []byte {
	dst = append(dst, `{"schema":"`+SchemaFrame+`","segmentSeq":`...)
	dst = strconv.AppendUint(dst, f.SegmentSeq, 10)
	dst = append(dst, `,"frameSeq":`...)
	dst = strconv.AppendUint(dst, f.FrameSeq, 10)
	dst = append(dst, `,"entrySeq":`...)
	dst = strconv.AppendUint(dst, f.EntrySeq, 10)
	dst = append(dst, `,"entryId":`...)
	dst = AppendString(dst, f.EntryID)
	if f.ParentEntryID != "" {
		dst = append(dst, `,"parentEntryId":`...)
		dst = AppendString(dst, f.ParentEntryID)
	}
	dst = append(dst, `,"entryType":`...)
	dst = AppendString(dst, string(f.EntryType))
	dst = append(dst, `,"timestamp":`...)
	dst = AppendString(dst, f.Timestamp)
	dst = append(dst, `,"payloadSha256":`...)
	dst = AppendString(dst, f.PayloadSHA256)
	dst = append(dst, `,"payloadBytes":`...)
	dst = strconv.AppendUint(dst, f.PayloadBytes, 10)
	dst = append(dst, `,"payload":`...)
	dst = append(dst, f.Payload...)
	return append(dst, '}', '\n')
}

// ParseFrame decodes one frame line (with its newline) and checks it as the
// reference does when it reads a frame: schema, positive sequence numbers,
// entry and parent ids, entry type, RFC 3339 timestamp, and payloadBytes
// and payloadSha256 against the payload's exact bytes, whose span is taken
// from the parser (never searched for). A digest or size mismatch matches
// ErrChecksum. The returned Payload aliases line.
func ParseFrame(line []byte) (Frame, error) { return parseFrame(line, true) }

// parseFrame is ParseFrame with the envelope fast path (rawscan.go) on or
// off; the fuzz tests compare the two.
func parseFrame(line []byte, fast bool) (Frame, error) {
	body, err := lineBody(DocFrame, line, MaxFrameBytes)
	if err != nil {
		return Frame{}, err
	}
	var (
		v          Value
		start, end int
	)
	if fast {
		v, start, end, fast = decodeFast(body, frameNames, "payload")
	}
	if !fast {
		v, err = parseDoc(DocFrame, body, func(m TopMember) error {
			if m.Key == "payload" {
				start, end = m.ValueStart, m.ValueEnd
			}
			return nil
		})
		if err != nil {
			return Frame{}, err
		}
	}
	d := decodeObject(DocFrame, "", v, frameNames, false)
	d.check(fmSchema, d.str(fmSchema) == SchemaFrame, "unsupported schema")
	var f Frame
	f.SegmentSeq = d.u64(fmSegmentSeq)
	d.check(fmSegmentSeq, f.SegmentSeq > 0, "must be positive")
	f.FrameSeq = d.u64(fmFrameSeq)
	d.check(fmFrameSeq, f.FrameSeq > 0, "must be positive")
	f.EntrySeq = d.u64(fmEntrySeq)
	d.check(fmEntrySeq, f.EntrySeq > 0, "must be positive")
	f.EntryID = d.str(fmEntryID)
	d.check(fmEntryID, ValidEntryID(f.EntryID), "does not match the V2 entry-id contract")
	if p, ok := d.optStr(fmParentEntryID); ok {
		f.ParentEntryID = p
		d.check(fmParentEntryID, ValidEntryID(p), "does not match the V2 entry-id contract")
	}
	f.EntryType = EntryType(d.str(fmEntryType))
	d.check(fmEntryType, f.EntryType.Valid(), "unsupported entry type")
	f.Timestamp = d.str(fmTimestamp)
	d.check(fmTimestamp, ValidRFC3339(f.Timestamp), "not an RFC 3339 timestamp")
	f.PayloadSHA256 = d.str(fmPayloadSHA256)
	f.PayloadBytes = d.u64(fmPayloadBytes)
	if d.required(fmPayload) && start >= 0 {
		f.Payload = body[start:end:end]
	}
	if err := d.error(); err != nil {
		return Frame{}, err
	}
	if f.PayloadBytes != uint64(len(f.Payload)) {
		return Frame{}, &DocError{Doc: DocFrame, Member: "payloadBytes", Reason: "does not match the payload (" + strconv.Itoa(len(f.Payload)) + " bytes)", Err: ErrChecksum}
	}
	if f.PayloadSHA256 != PayloadSHA256(f.Payload) {
		return Frame{}, &DocError{Doc: DocFrame, Member: "payloadSha256", Reason: "does not match the payload", Err: ErrChecksum}
	}
	return f, nil
}
