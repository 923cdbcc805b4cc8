package wire

import "bytes"

// FrameHead is a frame's members other than its payload.
type FrameHead struct {
	SegmentSeq    uint64
	FrameSeq      uint64
	EntrySeq      uint64
	EntryID       string
	ParentEntryID string
	EntryType     EntryType
	Timestamp     string
	PayloadSHA256 string
	PayloadBytes  uint64
}

// ParseFrameHead reads the members of a frame line (with its newline) that
// is exactly in AppendFrame's form, without parsing or hashing its payload:
// the cheap read a store refresh makes of frames it copies, whose bytes a
// CRC-32C against their index row already vouches for. ok is false for any
// line AppendFrame would not have written with these members (another
// member order, white space, an escape, a non-canonical number, a payload
// whose length differs from payloadBytes or that is not an object): such a
// store was not written by this codec, and its reader must fall back to a
// full parse.
func ParseFrameHead(line []byte) (h FrameHead, ok bool) {
	c := headCursor{b: line}
	c.lit(`{"schema":"` + SchemaFrame + `","segmentSeq":`)
	h.SegmentSeq = c.uint()
	c.lit(`,"frameSeq":`)
	h.FrameSeq = c.uint()
	c.lit(`,"entrySeq":`)
	h.EntrySeq = c.uint()
	c.lit(`,"entryId":`)
	h.EntryID = c.plain()
	if c.has(`,"parentEntryId":`) {
		h.ParentEntryID = c.plain()
		c.check(ValidEntryID(h.ParentEntryID))
	}
	c.lit(`,"entryType":`)
	h.EntryType = EntryType(c.plain())
	c.lit(`,"timestamp":`)
	h.Timestamp = c.plain()
	c.lit(`,"payloadSha256":`)
	h.PayloadSHA256 = c.plain()
	c.lit(`,"payloadBytes":`)
	h.PayloadBytes = c.uint()
	c.lit(`,"payload":`)
	if c.bad {
		return FrameHead{}, false
	}
	payload := line[c.i:]
	n := len(payload) - 2 // the closing brace and the newline
	ok = n >= 2 && bytes.HasSuffix(payload, []byte("}\n")) && uint64(n) == h.PayloadBytes &&
		payload[0] == '{' && payload[n-1] == '}' &&
		h.SegmentSeq > 0 && h.FrameSeq > 0 && h.EntrySeq > 0 &&
		ValidEntryID(h.EntryID) && h.EntryType.Valid() && ValidRFC3339(h.Timestamp) && isLowerHex64(h.PayloadSHA256)
	if !ok {
		return FrameHead{}, false
	}
	return h, true
}

func isLowerHex64(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// headCursor walks a frame line; the first mismatch makes it bad and every
// later step a no-op.
type headCursor struct {
	b   []byte
	i   int
	bad bool
}

func (c *headCursor) check(ok bool) {
	if !ok {
		c.bad = true
	}
}

func (c *headCursor) has(s string) bool {
	if !c.bad && bytes.HasPrefix(c.b[c.i:], []byte(s)) {
		c.i += len(s)
		return true
	}
	return false
}

func (c *headCursor) lit(s string) { c.check(c.has(s)) }

// uint reads a canonical decimal number (no leading zero, no sign).
func (c *headCursor) uint() uint64 {
	if c.bad {
		return 0
	}
	start := c.i
	var v uint64
	for c.i < len(c.b) && c.b[c.i] >= '0' && c.b[c.i] <= '9' {
		d := uint64(c.b[c.i] - '0')
		if v > (1<<64-1-d)/10 {
			c.bad = true
			return 0
		}
		v = v*10 + d
		c.i++
	}
	n := c.i - start
	c.check(n > 0 && (n == 1 || c.b[start] != '0'))
	return v
}

// plain reads a string with no escape and no control character: every
// string member of a frame head (ids, type, timestamp, digest) is one when
// it is valid, and AppendString writes those bytes as they are.
func (c *headCursor) plain() string {
	if c.bad || c.i >= len(c.b) || c.b[c.i] != '"' {
		c.bad = true
		return ""
	}
	start := c.i + 1
	for j := start; j < len(c.b); j++ {
		switch ch := c.b[j]; {
		case ch == '"':
			c.i = j + 1
			return string(c.b[start:j])
		case ch == '\\' || ch < 0x20:
			c.bad = true
			return ""
		}
	}
	c.bad = true
	return ""
}

// ParseFrameFast is ParseFrame for a line in AppendFrame's exact form,
// whose payload's syntax the caller vouches for by other means (a staging
// store's verification compares the hash chain with the one over the
// payloads its writer was given): the members are read as
// ParseFrameHead reads them and the payload is hashed and checked against
// payloadSha256, but not parsed. ok is false for a line ParseFrameHead
// refuses (read it with ParseFrame); err is a payload that does not match
// its hash.
func ParseFrameFast(line []byte) (f Frame, ok bool, err error) {
	h, ok := ParseFrameHead(line)
	if !ok {
		return Frame{}, false, nil
	}
	end := len(line) - 2 // the frame's closing brace and the newline
	payload := line[end-int(h.PayloadBytes) : end : end]
	f = Frame{SegmentSeq: h.SegmentSeq, FrameSeq: h.FrameSeq, EntrySeq: h.EntrySeq, EntryID: h.EntryID,
		ParentEntryID: h.ParentEntryID, EntryType: h.EntryType, Timestamp: h.Timestamp,
		PayloadSHA256: h.PayloadSHA256, PayloadBytes: h.PayloadBytes, Payload: payload}
	if PayloadSHA256(payload) != h.PayloadSHA256 {
		return Frame{}, true, &DocError{Doc: DocFrame, Member: "payloadSha256", Reason: "does not match the payload", Err: ErrChecksum}
	}
	return f, true, nil
}
