package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The parser below reproduces serde_json 1.0.149's reading of a line into
// buffered content (what `serde_json::from_str` feeds a derived type): the
// same accepted language, the same number classification, the same error
// messages and the same line/column positions. The reference's refusals are
// serde_json's messages, and pisess reports them word for word.

// Syntax error messages, spelled as serde_json spells them.
const (
	msgEOFList           = "EOF while parsing a list"
	msgEOFObject         = "EOF while parsing an object"
	msgEOFString         = "EOF while parsing a string"
	msgEOFValue          = "EOF while parsing a value"
	msgExpectedColon     = "expected `:`"
	msgExpectedListEnd   = "expected `,` or `]`"
	msgExpectedObjectEnd = "expected `,` or `}`"
	msgExpectedIdent     = "expected ident"
	msgExpectedValue     = "expected value"
	msgInvalidEscape     = "invalid escape"
	msgInvalidNumber     = "invalid number"
	msgNumberOutOfRange  = "number out of range"
	msgControlChar       = "control character (\\u0000-\\u001F) found while parsing a string"
	msgKeyMustBeString   = "key must be a string"
	msgLoneSurrogate     = "lone leading surrogate in hex escape"
	msgTrailingComma     = "trailing comma"
	msgTrailingChars     = "trailing characters"
	msgUnexpectedEndHex  = "unexpected end of hex escape"
	msgRecursionLimit    = "recursion limit exceeded"
	msgInvalidUTF8       = "invalid UTF-8"
	// Not serde_json's: see maxTapeText.
	msgTextTooLong = "JSON text of 2 GiB or more"
)

// maxTapeText is the longest text a Tape reads: its nodes hold 32-bit
// offsets. No reader of pisess gets near it: lines and frames stop at 100
// MiB, SQLite values at 1 GB.
const maxTapeText = math.MaxInt32

// recursionLimit is serde_json's default nesting budget: the 128th nested
// container is refused.
const recursionLimit = 128

// SyntaxError is a JSON error positioned the way serde_json positions it:
// Line is 1-based, Column counts bytes since the start of the line (0 when
// the error sits just after a newline).
type SyntaxError struct {
	Msg    string
	Line   int
	Column int
	Offset int // byte index the position was computed from
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("%s at line %d column %d", e.Msg, e.Line, e.Column)
}

// IsEOF reports whether the error is one of serde_json's "EOF while parsing"
// errors: the input ended inside a value (a torn write, for a last line).
func (e *SyntaxError) IsEOF() bool {
	switch e.Msg {
	case msgEOFList, msgEOFObject, msgEOFString, msgEOFValue:
		return true
	}
	return false
}

// IsSurrogate reports whether the error concerns a \u escape that does not
// form a valid UTF-16 pair (a lone surrogate).
func (e *SyntaxError) IsSurrogate() bool {
	return e.Msg == msgLoneSurrogate || e.Msg == msgUnexpectedEndHex
}

// HookError is returned by a TopLevelHook to stop parsing with a message
// positioned at byte index At.
type HookError struct {
	Msg string
	At  int
}

func (e *HookError) Error() string { return e.Msg }

// TopMember is one completed member of the top-level object.
type TopMember struct {
	Key        string
	KeyEnd     int // just after the key's closing quote
	Value      Value
	ValueStart int
	ValueEnd   int // just after the value
}

// TopLevelHook sees each top-level member as soon as it has been read, so a
// caller can refuse at the point the reference's streaming deserializer
// would (the entry's `type` tag is checked before the rest is read).
type TopLevelHook func(m TopMember) error

// Position returns serde_json's (line, column) for byte index i of b.
func Position(b []byte, i int) (line, column int) {
	if i > len(b) {
		i = len(b)
	}
	line = 1
	start := 0
	for j := 0; j < i; j++ {
		if b[j] == '\n' {
			line++
			start = j + 1
		}
	}
	return line, i - start
}

// ParseJSON parses one JSON text as serde_json::from_str does (trailing
// whitespace allowed, anything else after the value refused).
func ParseJSON(b []byte, hook TopLevelHook) (Value, error) {
	v, _, err := ParseJSONEnd(b, hook)
	return v, err
}

// ParseJSONEnd is ParseJSON that also returns the byte index just after the
// top-level value (before trailing whitespace). The containers of the value
// share two blocks (one of members, one of items), each slice cut to its
// length: keeping any one of them keeps the blocks.
func ParseJSONEnd(b []byte, hook TopLevelHook) (Value, int, error) {
	var th TapeHook
	if hook != nil {
		th = func(t *Tape, m TapeMember) error {
			return hook(TopMember{Key: t.Str(m.Key), KeyEnd: m.KeyEnd, Value: t.Value(m.Value),
				ValueStart: m.ValueStart, ValueEnd: m.ValueEnd})
		}
	}
	t, err := ParseTape(b, th)
	if err == nil {
		err = t.Trailing()
	}
	if err != nil {
		return Value{}, 0, err
	}
	return t.Value(0), t.End(), nil
}

// ParseJSONSplitTrailing is ParseJSONEnd except that "trailing characters"
// is not an error but returned apart, with the value before them: the
// reference's serde_json looks for trailing characters only after it has
// deserialized the value, so a value it refuses is reported first.
func ParseJSONSplitTrailing(b []byte, hook TopLevelHook) (v Value, end int, trailing, err error) {
	v, end, err = ParseJSONEnd(b, hook)
	var se *SyntaxError
	if err == nil || !errors.As(err, &se) || se.Msg != msgTrailingChars {
		return v, end, nil, err
	}
	cut := se.Offset - 1 // the error sits one past the first trailing byte
	if cut < 0 || cut > len(b) {
		return v, end, nil, err
	}
	v, end, err2 := ParseJSONEnd(b[:cut], nil)
	if err2 != nil {
		return v, end, nil, err
	}
	return v, end, se, nil
}

// TapeMember is one completed member of the top-level object of a tape
// being read: the nodes of its key and value, and where they end and start.
type TapeMember struct {
	Key        int
	KeyEnd     int // just after the key's closing quote
	Value      int
	ValueStart int
	ValueEnd   int // just after the value
}

// TapeHook is TopLevelHook for ParseTape: it sees each top-level member as
// soon as it has been read, and an error (a *HookError to position it)
// stops the read.
type TapeHook func(t *Tape, m TapeMember) error

// ParseTape reads the JSON value at the start of b as ParseJSON does, with
// the same errors, into a new Tape (see Tape.Parse).
func ParseTape(b []byte, hook TapeHook) (*Tape, error) {
	t := new(Tape)
	if err := t.Parse(b, hook); err != nil {
		return nil, err
	}
	return t, nil
}

// Parse reads the JSON value at the start of b into t, reusing t's
// storage (what t held before is gone). It does not look at what follows
// the value: the reference looks for trailing characters only after it has
// used the value, so that check is Trailing, a separate step. t reads b in
// place: b must not change while t is in use.
func (t *Tape) Parse(b []byte, hook TapeHook) error {
	return t.parse(b, hook, false)
}

// ParseValidUTF8 is Parse for a text its caller has already checked is
// valid UTF-8 as a whole (a JSONL line, in the reader's first pass): its
// strings are not checked again. Every other check is Parse's.
func (t *Tape) ParseValidUTF8(b []byte, hook TapeHook) error {
	return t.parse(b, hook, true)
}

func (t *Tape) parse(b []byte, hook TapeHook, validUTF8 bool) error {
	if len(b) > maxTapeText {
		return &SyntaxError{Msg: msgTextTooLong, Line: 1, Offset: 0}
	}
	*t = Tape{text: b, nodes: t.nodes[:0], unesc: t.unesc[:0]}
	if t.nodes == nil {
		// A session line has a node per 13 bytes or so (one per 9 at
		// most); a long one is mostly text.
		t.nodes = make([]node, 0, min(len(b)/10+8, 128))
	}
	p := parser{b: b, depth: recursionLimit, t: t, hook: hook, validUTF8: validUTF8}
	if err := p.value(true); err != nil {
		return err
	}
	t.end = p.i
	return nil
}

// Trailing returns serde_json's "trailing characters" error when anything
// but white space follows the value, else nil.
func (t *Tape) Trailing() error {
	p := parser{b: t.text, i: t.end}
	p.skipWS()
	if p.i < len(p.b) {
		return p.peekErr(msgTrailingChars)
	}
	return nil
}

type parser struct {
	b     []byte
	i     int
	depth int
	t     *Tape
	hook  TapeHook
	// validUTF8: b is known to be valid UTF-8, so its strings are too
	// (an escape only ever appends a whole valid sequence, and a string
	// is split around ASCII bytes only).
	validUTF8 bool
}

func (p *parser) errAt(msg string, i int) *SyntaxError {
	line, col := Position(p.b, i)
	return &SyntaxError{Msg: msg, Line: line, Column: col, Offset: i}
}

// err positions at the current index; peekErr one past it (serde_json's
// error and peek_error).
func (p *parser) err(msg string) *SyntaxError { return p.errAt(msg, p.i) }

func (p *parser) peekErr(msg string) *SyntaxError {
	i := p.i + 1
	if i > len(p.b) {
		i = len(p.b)
	}
	return p.errAt(msg, i)
}

func (p *parser) skipWS() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\n', '\t', '\r':
			p.i++
		default:
			return
		}
	}
}

// leaf appends a node that has no items.
func (p *parser) leaf(n node) {
	n.next = int32(len(p.t.nodes) + 1)
	p.t.nodes = append(p.t.nodes, n)
}

func (p *parser) value(top bool) error {
	p.skipWS()
	if p.i >= len(p.b) {
		return p.peekErr(msgEOFValue)
	}
	switch c := p.b[p.i]; {
	case c == 'n':
		p.i++
		if err := p.ident("ull"); err != nil {
			return err
		}
		p.leaf(node{kind: KindNull})
	case c == 't':
		p.i++
		if err := p.ident("rue"); err != nil {
			return err
		}
		p.leaf(node{kind: KindBool, x: 1})
	case c == 'f':
		p.i++
		if err := p.ident("alse"); err != nil {
			return err
		}
		p.leaf(node{kind: KindBool})
	case c == '-' || c >= '0' && c <= '9':
		positive := c != '-'
		if !positive {
			p.i++
		}
		n, err := p.number(positive)
		if err != nil {
			return err
		}
		p.leaf(numberNode(n))
	case c == '"':
		p.i++
		return p.str()
	case c == '[':
		p.depth--
		if p.depth == 0 {
			return p.peekErr(msgRecursionLimit)
		}
		p.i++
		err := p.array()
		p.depth++
		return err
	case c == '{':
		p.depth--
		if p.depth == 0 {
			return p.peekErr(msgRecursionLimit)
		}
		p.i++
		err := p.object(top)
		p.depth++
		return err
	default:
		return p.peekErr(msgExpectedValue)
	}
	return nil
}

func (p *parser) ident(rest string) error {
	for k := 0; k < len(rest); k++ {
		if p.i >= len(p.b) {
			return p.err(msgEOFValue)
		}
		c := p.b[p.i]
		p.i++
		if c != rest[k] {
			return p.err(msgExpectedIdent)
		}
	}
	return nil
}

// open appends a container's node; closeAt completes it once its items
// follow it.
func (p *parser) open(k Kind) int {
	p.t.nodes = append(p.t.nodes, node{kind: k})
	return len(p.t.nodes) - 1
}

func (p *parser) closeAt(at int, items int) {
	n := &p.t.nodes[at]
	n.x = uint64(items)
	n.next = int32(len(p.t.nodes))
}

func (p *parser) array() error {
	at := p.open(KindArray)
	items := 0
	for {
		p.skipWS()
		if p.i >= len(p.b) {
			return p.peekErr(msgEOFList)
		}
		c := p.b[p.i]
		if c == ']' {
			p.i++
			p.closeAt(at, items)
			return nil
		}
		if c == ',' && items > 0 {
			p.i++
			p.skipWS()
			if p.i >= len(p.b) {
				return p.peekErr(msgEOFValue)
			}
			if p.b[p.i] == ']' {
				return p.peekErr(msgTrailingComma)
			}
		} else if items > 0 {
			return p.peekErr(msgExpectedListEnd)
		}
		if err := p.value(false); err != nil {
			return err
		}
		items++
	}
}

func (p *parser) object(top bool) error {
	at := p.open(KindObject)
	members := 0
	for {
		p.skipWS()
		if p.i >= len(p.b) {
			return p.peekErr(msgEOFObject)
		}
		c := p.b[p.i]
		if c == '}' {
			p.i++
			p.closeAt(at, members)
			return nil
		}
		if c == ',' && members > 0 {
			p.i++
			p.skipWS()
			if p.i >= len(p.b) {
				return p.peekErr(msgEOFValue)
			}
			c = p.b[p.i]
		} else if members > 0 {
			return p.peekErr(msgExpectedObjectEnd)
		}
		switch c {
		case '"':
		case '}':
			return p.peekErr(msgTrailingComma)
		default:
			return p.peekErr(msgKeyMustBeString)
		}
		p.i++
		key := len(p.t.nodes)
		if err := p.str(); err != nil {
			return err
		}
		keyEnd := p.i
		p.skipWS()
		if p.i >= len(p.b) {
			return p.peekErr(msgEOFObject)
		}
		if p.b[p.i] != ':' {
			return p.peekErr(msgExpectedColon)
		}
		p.i++
		p.skipWS()
		start := p.i
		if err := p.value(false); err != nil {
			return err
		}
		members++
		if top && p.hook != nil {
			m := TapeMember{Key: key, KeyEnd: keyEnd, Value: key + 1, ValueStart: start, ValueEnd: p.i}
			if err := p.hook(p.t, m); err != nil {
				if he, ok := err.(*HookError); ok {
					return p.errAt(he.Msg, he.At)
				}
				return err
			}
		}
	}
}

// str reads a string body after its opening quote and appends its node.
// A string without escapes is its text; one with escapes is unescaped into
// the tape's own buffer.
func (p *parser) str() error {
	start := p.i
	var wide bool
	p.i, wide = plainRun(p.b, p.i)
	if p.i < len(p.b) && p.b[p.i] == '"' {
		p.i++
		// Only a string with a byte of 0x80 or more can be invalid.
		if wide && !p.validUTF8 && !utf8.Valid(p.b[start:p.i-1]) {
			return p.err(msgInvalidUTF8)
		}
		p.leaf(node{kind: KindString, start: int32(start), end: int32(p.i - 1), x: strWordAt(p.b, start, p.i-1-start)})
		return nil
	}
	buf := p.t.unesc
	ustart, rawStart, canon := len(buf), start, true
	for {
		p.i, _ = plainRun(p.b, p.i)
		if p.i >= len(p.b) {
			return p.err(msgEOFString)
		}
		switch c := p.b[p.i]; c {
		case '"':
			buf = append(buf, p.b[start:p.i]...)
			p.t.unesc = buf
			p.i++
			if !p.validUTF8 && !utf8.Valid(buf[ustart:]) {
				return p.err(msgInvalidUTF8)
			}
			p.leaf(node{kind: KindString, esc: true, canon: canon, start: int32(ustart), end: int32(len(buf)),
				rawStart: int32(rawStart), rawEnd: int32(p.i - 1), x: StrWord(buf[ustart:])})
			return nil
		case '\\':
			buf = append(buf, p.b[start:p.i]...)
			p.i++
			canon = canon && canonicalEscape(p.b, p.i)
			var err error
			if buf, err = p.escape(buf); err != nil {
				return err
			}
			start = p.i
		default:
			p.i++
			return p.err(msgControlChar)
		}
	}
}

// plainRun returns the index of the first byte at or after i that a JSON
// string cannot hold as it is (the quote, the backslash, a C0 control), or
// len(b), and whether a byte it skipped is 0x80 or more. Eight bytes are
// tested at a time: strings are most of a session's bytes, and most of
// their bytes are plain.
func plainRun(b []byte, i int) (int, bool) {
	var seen uint64 // the bytes skipped, or-ed together
	for ; i+8 <= len(b); i += 8 {
		x := binary.LittleEndian.Uint64(b[i:])
		if m := specialBytes(x); m != 0 {
			n := bits.TrailingZeros64(m) / 8
			seen |= x & (1<<(8*n) - 1)
			return i + n, seen&msbs != 0
		}
		seen |= x
	}
	for ; i < len(b); i++ {
		c := b[i]
		if c == '"' || c == '\\' || c < 0x20 {
			break
		}
		seen |= uint64(c)
	}
	return i, seen&msbs != 0
}

// strWordAt is StrWord of b[start:start+n], loading the bytes at once
// when b has eight from start.
func strWordAt(b []byte, start, n int) uint64 {
	if start+8 > len(b) {
		return StrWord(b[start : start+n])
	}
	x := binary.LittleEndian.Uint64(b[start:]) & (1<<56 - 1)
	if n < 7 {
		x &= 1<<(8*n) - 1
	}
	return x<<8 | uint64(min(n, 0xff))
}

const (
	lsbs = 0x0101010101010101
	msbs = 0x8080808080808080
)

// specialBytes flags, in the top bit of each, the bytes of x that are
// '"', '\\' or below 0x20 ("has a byte less than n" and "has a zero byte"
// of Bit Twiddling Hacks). A byte above a flagged one may be flagged
// wrongly (a borrow), but the lowest flagged byte is always right: its
// place is where the run of plain bytes ends.
func specialBytes(x uint64) uint64 {
	q := x ^ (lsbs * '"')
	s := x ^ (lsbs * '\\')
	return ((x-lsbs*0x20)&^x | (q-lsbs)&^q | (s-lsbs)&^s) & msbs
}

// canonicalEscape reports whether the escape whose letter is at b[i] is
// the one appendString writes for the character it stands for: \" \\ \b
// \f \n \r \t, or \u00xx (lower-case hex) for another C0 control. Pi's
// JSON.stringify writes exactly these, so most escaped strings are copied
// as they stand into a canonical payload instead of being escaped again.
func canonicalEscape(b []byte, i int) bool {
	if i >= len(b) {
		return false
	}
	switch b[i] {
	case '"', '\\', 'b', 'f', 'n', 'r', 't':
		return true
	case 'u':
		if len(b)-i < 5 || b[i+1] != '0' || b[i+2] != '0' || (b[i+3] != '0' && b[i+3] != '1') {
			return false
		}
		lo := strings.IndexByte(hexDigits, b[i+4]) // lower-case only
		if lo < 0 {
			return false
		}
		c := (b[i+3]-'0')<<4 | byte(lo)
		return c != '\b' && c != '\f' && c != '\n' && c != '\r' && c != '\t'
	}
	return false
}

func (p *parser) escape(buf []byte) ([]byte, error) {
	if p.i >= len(p.b) {
		return nil, p.err(msgEOFString)
	}
	c := p.b[p.i]
	p.i++
	switch c {
	case '"':
		return append(buf, '"'), nil
	case '\\':
		return append(buf, '\\'), nil
	case '/':
		return append(buf, '/'), nil
	case 'b':
		return append(buf, '\b'), nil
	case 'f':
		return append(buf, '\f'), nil
	case 'n':
		return append(buf, '\n'), nil
	case 'r':
		return append(buf, '\r'), nil
	case 't':
		return append(buf, '\t'), nil
	case 'u':
		return p.unicodeEscape(buf)
	}
	return nil, p.err(msgInvalidEscape)
}

func (p *parser) hex4() (rune, error) {
	if len(p.b)-p.i < 4 {
		p.i = len(p.b)
		return 0, p.err(msgEOFString)
	}
	var n rune
	for _, c := range p.b[p.i : p.i+4] {
		var d byte
		switch {
		case c >= '0' && c <= '9':
			d = c - '0'
		case c >= 'a' && c <= 'f':
			d = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			d = c - 'A' + 10
		default:
			p.i += 4
			return 0, p.err(msgInvalidEscape)
		}
		n = n<<4 | rune(d)
	}
	p.i += 4
	return n, nil
}

func (p *parser) unicodeEscape(buf []byte) ([]byte, error) {
	n, err := p.hex4()
	if err != nil {
		return nil, err
	}
	if n >= 0xDC00 && n <= 0xDFFF {
		return nil, p.err(msgLoneSurrogate)
	}
	if n < 0xD800 || n > 0xDBFF {
		return utf8.AppendRune(buf, n), nil
	}
	// A leading surrogate must be followed by an escaped trailing one.
	for _, want := range []byte{'\\', 'u'} {
		if p.i >= len(p.b) {
			return nil, p.err(msgEOFString)
		}
		got := p.b[p.i]
		p.i++
		if got != want {
			return nil, p.err(msgUnexpectedEndHex)
		}
	}
	n2, err := p.hex4()
	if err != nil {
		return nil, err
	}
	if n2 < 0xDC00 || n2 > 0xDFFF {
		return nil, p.err(msgLoneSurrogate)
	}
	r := ((n - 0xD800) << 10) | (n2 - 0xDC00) + 0x10000
	return utf8.AppendRune(buf, r), nil
}

func (p *parser) peekByte() byte {
	if p.i < len(p.b) {
		return p.b[p.i]
	}
	return 0
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// number parses after an optional '-' (positive false when it was there).
func (p *parser) number(positive bool) (Number, error) {
	numStart := p.i
	if !positive {
		numStart--
	}
	if p.i >= len(p.b) {
		return Number{}, p.err(msgEOFValue)
	}
	c := p.b[p.i]
	p.i++
	var sig uint64
	switch {
	case c == '0':
		if isDigit(p.peekByte()) {
			return Number{}, p.peekErr(msgInvalidNumber)
		}
	case c >= '1' && c <= '9':
		sig = uint64(c - '0')
		for isDigit(p.peekByte()) {
			d := uint64(p.peekByte() - '0')
			if overflowU64(sig, d) {
				return p.longInteger(positive, sig, numStart)
			}
			p.i++
			sig = sig*10 + d
		}
	default:
		return Number{}, p.err(msgInvalidNumber)
	}
	switch p.peekByte() {
	case '.':
		return p.decimal(positive, sig, 0, numStart)
	case 'e', 'E':
		return p.exponent(positive, sig, 0, numStart)
	}
	if positive {
		return Number{Kind: NumU64, U: sig}, nil
	}
	if sig == 0 || sig > 1<<63 {
		return f64(-float64(sig)), nil
	}
	return Number{Kind: NumI64, I: int64(-sig)}, nil
}

func overflowU64(sig, d uint64) bool {
	const max = math.MaxUint64
	return sig >= max/10 && (sig > max/10 || d > max%10)
}

func (p *parser) longInteger(positive bool, sig uint64, numStart int) (Number, error) {
	exp := 0
	for isDigit(p.peekByte()) {
		p.i++
		exp++
	}
	switch p.peekByte() {
	case '.':
		return p.decimal(positive, sig, exp, numStart)
	case 'e', 'E':
		return p.exponent(positive, sig, exp, numStart)
	}
	return p.float(positive, sig, exp, numStart)
}

func (p *parser) decimal(positive bool, sig uint64, expBefore int, numStart int) (Number, error) {
	p.i++ // '.'
	expAfter := 0
	for isDigit(p.peekByte()) {
		d := uint64(p.peekByte() - '0')
		if overflowU64(sig, d) {
			// Further digits cannot change the significand: skip them.
			for isDigit(p.peekByte()) {
				p.i++
			}
			if c := p.peekByte(); c == 'e' || c == 'E' {
				return p.exponent(positive, sig, expBefore+expAfter, numStart)
			}
			return p.float(positive, sig, expBefore+expAfter, numStart)
		}
		p.i++
		sig = sig*10 + d
		expAfter--
	}
	if expAfter == 0 {
		if p.i < len(p.b) {
			return Number{}, p.peekErr(msgInvalidNumber)
		}
		return Number{}, p.peekErr(msgEOFValue)
	}
	if c := p.peekByte(); c == 'e' || c == 'E' {
		return p.exponent(positive, sig, expBefore+expAfter, numStart)
	}
	return p.float(positive, sig, expBefore+expAfter, numStart)
}

func (p *parser) exponent(positive bool, sig uint64, startExp int, numStart int) (Number, error) {
	p.i++ // 'e'
	positiveExp := true
	switch p.peekByte() {
	case '+':
		p.i++
	case '-':
		p.i++
		positiveExp = false
	}
	if p.i >= len(p.b) {
		return Number{}, p.err(msgEOFValue)
	}
	c := p.b[p.i]
	p.i++
	if !isDigit(c) {
		return Number{}, p.err(msgInvalidNumber)
	}
	exp := int32(c - '0')
	for isDigit(p.peekByte()) {
		d := int32(p.peekByte() - '0')
		p.i++
		if exp >= math.MaxInt32/10 && (exp > math.MaxInt32/10 || d > math.MaxInt32%10) {
			if sig != 0 && positiveExp {
				return Number{}, p.err(msgNumberOutOfRange)
			}
			for isDigit(p.peekByte()) {
				p.i++
			}
			if positive {
				return f64(0), nil
			}
			return f64(math.Copysign(0, -1)), nil
		}
		exp = exp*10 + d
	}
	final := int64(startExp)
	if positiveExp {
		final += int64(exp)
	} else {
		final -= int64(exp)
	}
	if final > math.MaxInt32 {
		final = math.MaxInt32
	} else if final < math.MinInt32 {
		final = math.MinInt32
	}
	return p.float(positive, sig, int(final), numStart)
}

// float builds the f64 the reference gets for digits b[numStart:p.i].
func (p *parser) float(positive bool, sig uint64, exp int, numStart int) (Number, error) {
	var f float64
	if exactFloatParsing {
		var err error
		f, err = strconv.ParseFloat(string(p.b[numStart:p.i]), 64)
		if err != nil || math.IsInf(f, 0) {
			if math.IsInf(f, 0) {
				return Number{}, p.err(msgNumberOutOfRange)
			}
			return Number{}, p.err(msgInvalidNumber)
		}
		return f64(f), nil
	}
	f, ok := serdeFloatFromParts(sig, exp)
	if !ok {
		return Number{}, p.err(msgNumberOutOfRange)
	}
	if !positive {
		f = -f
	}
	return f64(f), nil
}

// exactFloatParsing selects correctly rounded decimal → binary conversion
// (serde_json's float_roundtrip feature) instead of its default fast path.
const exactFloatParsing = false

var pow10tab = func() [309]float64 {
	var t [309]float64
	for i := range t {
		// strconv gives the correctly rounded literal 1e<i>, as Rust's
		// compiler does for serde_json's POW10 table.
		t[i], _ = strconv.ParseFloat("1e"+strconv.Itoa(i), 64)
	}
	return t
}()

// serdeFloatFromParts is serde_json's default (not float_roundtrip)
// f64_from_parts: the significand rounded to f64, then one multiplication or
// division by a power of ten.
func serdeFloatFromParts(sig uint64, exp int) (float64, bool) {
	f := float64(sig)
	for {
		a := exp
		if a < 0 {
			a = -a
		}
		if a < len(pow10tab) {
			if exp >= 0 {
				f *= pow10tab[a]
				if math.IsInf(f, 0) {
					return 0, false
				}
			} else {
				f /= pow10tab[a]
			}
			return f, true
		}
		if f == 0 {
			return f, true
		}
		if exp >= 0 {
			return 0, false
		}
		f /= 1e308
		exp += 308
	}
}

func f64(f float64) Number { return Number{Kind: NumF64, F: f} }
