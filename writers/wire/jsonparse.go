package wire

import (
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
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
)

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
// top-level value (before trailing whitespace).
func ParseJSONEnd(b []byte, hook TopLevelHook) (Value, int, error) {
	return parseJSON(b, hook, false)
}

// ParseJSONShared is ParseJSONEnd for a value that lives no longer than the
// text it came from: its strings are not copied one by one but share a
// single copy of b (only strings with escapes get their own). It is the
// cheaper read when the whole value is dropped at once; the caveat is that
// keeping any one string of it keeps all of b's copy alive, so a caller
// that keeps a string beyond the value should clone it.
func ParseJSONShared(b []byte, hook TopLevelHook) (Value, int, error) {
	return parseJSON(b, hook, true)
}

func parseJSON(b []byte, hook TopLevelHook, share bool) (Value, int, error) {
	p := parser{b: b, depth: recursionLimit, hook: hook}
	if share {
		p.s = string(b)
	}
	v, err := p.value(true)
	if err != nil {
		return Value{}, 0, err
	}
	end := p.i
	p.skipWS()
	if p.i < len(p.b) {
		return Value{}, 0, p.peekErr(msgTrailingChars)
	}
	return v, end, nil
}

type parser struct {
	b     []byte
	s     string // b as a string when strings are shared, else ""
	i     int
	depth int
	hook  TopLevelHook
	esc   []byte // scratch for unescaping a string
}

// smallContainer is how many items a container gathers in its reader's own
// stack frame before they spill to the heap. Items are gathered first and
// copied into a slice of exactly their number once the container is
// closed: one allocation per container, none for growing it, and no spare
// capacity that a caller's append could write into behind another value's
// back. Most objects of a session have fewer members than this.
const smallContainer = 16

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

func (p *parser) value(top bool) (Value, error) {
	p.skipWS()
	if p.i >= len(p.b) {
		return Value{}, p.peekErr(msgEOFValue)
	}
	switch c := p.b[p.i]; {
	case c == 'n':
		p.i++
		if err := p.ident("ull"); err != nil {
			return Value{}, err
		}
		return Null(), nil
	case c == 't':
		p.i++
		if err := p.ident("rue"); err != nil {
			return Value{}, err
		}
		return Bool(true), nil
	case c == 'f':
		p.i++
		if err := p.ident("alse"); err != nil {
			return Value{}, err
		}
		return Bool(false), nil
	case c == '-':
		p.i++
		return p.number(false)
	case c >= '0' && c <= '9':
		return p.number(true)
	case c == '"':
		p.i++
		s, err := p.str()
		if err != nil {
			return Value{}, err
		}
		return String(s), nil
	case c == '[':
		p.depth--
		if p.depth == 0 {
			return Value{}, p.peekErr(msgRecursionLimit)
		}
		p.i++
		v, err := p.array()
		p.depth++
		return v, err
	case c == '{':
		p.depth--
		if p.depth == 0 {
			return Value{}, p.peekErr(msgRecursionLimit)
		}
		p.i++
		v, err := p.object(top)
		p.depth++
		return v, err
	default:
		return Value{}, p.peekErr(msgExpectedValue)
	}
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

func (p *parser) array() (Value, error) {
	var small [smallContainer]Value
	items := small[:0]
	first := true
	for {
		p.skipWS()
		if p.i >= len(p.b) {
			return Value{}, p.peekErr(msgEOFList)
		}
		c := p.b[p.i]
		if c == ']' {
			p.i++
			return Value{Kind: KindArray, Arr: append(make([]Value, 0, len(items)), items...)}, nil
		}
		if c == ',' && !first {
			p.i++
			p.skipWS()
			if p.i >= len(p.b) {
				return Value{}, p.peekErr(msgEOFValue)
			}
			if p.b[p.i] == ']' {
				return Value{}, p.peekErr(msgTrailingComma)
			}
		} else if !first {
			return Value{}, p.peekErr(msgExpectedListEnd)
		}
		first = false
		item, err := p.value(false)
		if err != nil {
			return Value{}, err
		}
		items = append(items, item)
	}
}

func (p *parser) object(top bool) (Value, error) {
	var small [smallContainer]Member
	members := small[:0]
	first := true
	for {
		p.skipWS()
		if p.i >= len(p.b) {
			return Value{}, p.peekErr(msgEOFObject)
		}
		c := p.b[p.i]
		if c == '}' {
			p.i++
			return Value{Kind: KindObject, Obj: append(make([]Member, 0, len(members)), members...)}, nil
		}
		if c == ',' && !first {
			p.i++
			p.skipWS()
			if p.i >= len(p.b) {
				return Value{}, p.peekErr(msgEOFValue)
			}
			c = p.b[p.i]
		} else if !first {
			return Value{}, p.peekErr(msgExpectedObjectEnd)
		}
		first = false
		switch c {
		case '"':
		case '}':
			return Value{}, p.peekErr(msgTrailingComma)
		default:
			return Value{}, p.peekErr(msgKeyMustBeString)
		}
		p.i++
		key, err := p.str()
		if err != nil {
			return Value{}, err
		}
		keyEnd := p.i
		p.skipWS()
		if p.i >= len(p.b) {
			return Value{}, p.peekErr(msgEOFObject)
		}
		if p.b[p.i] != ':' {
			return Value{}, p.peekErr(msgExpectedColon)
		}
		p.i++
		p.skipWS()
		start := p.i
		val, err := p.value(false)
		if err != nil {
			return Value{}, err
		}
		if top && p.hook != nil {
			if err := p.hook(TopMember{Key: key, KeyEnd: keyEnd, Value: val, ValueStart: start, ValueEnd: p.i}); err != nil {
				if he, ok := err.(*HookError); ok {
					return Value{}, p.errAt(he.Msg, he.At)
				}
				return Value{}, err
			}
		}
		members = append(members, Member{Key: key, Value: val})
	}
}

// str reads a string body after its opening quote.
func (p *parser) str() (string, error) {
	start := p.i
	p.i = plainRun(p.b, p.i)
	if p.i < len(p.b) && p.b[p.i] == '"' {
		// No escape: the string is the text itself.
		raw := p.b[start:p.i]
		p.i++
		if !utf8.Valid(raw) {
			return "", p.err(msgInvalidUTF8)
		}
		if p.s != "" {
			return p.s[start : p.i-1], nil
		}
		return string(raw), nil
	}
	buf := p.esc[:0]
	for {
		p.i = plainRun(p.b, p.i)
		if p.i >= len(p.b) {
			return "", p.err(msgEOFString)
		}
		switch c := p.b[p.i]; c {
		case '"':
			buf = append(buf, p.b[start:p.i]...)
			p.esc = buf
			p.i++
			if !utf8.Valid(buf) {
				return "", p.err(msgInvalidUTF8)
			}
			return string(buf), nil
		case '\\':
			buf = append(buf, p.b[start:p.i]...)
			p.i++
			var err error
			if buf, err = p.escape(buf); err != nil {
				return "", err
			}
			start = p.i
		default:
			p.i++
			return "", p.err(msgControlChar)
		}
	}
}

// plainRun returns the index of the first byte at or after i that a JSON
// string cannot hold as it is (the quote, the backslash, a C0 control), or
// len(b). Eight bytes are tested at a time: strings are most of a session's
// bytes, and most of their bytes are plain.
func plainRun(b []byte, i int) int {
	for ; i+8 <= len(b); i += 8 {
		if hasSpecial(binary.LittleEndian.Uint64(b[i:])) {
			break
		}
	}
	for ; i < len(b); i++ {
		if c := b[i]; c == '"' || c == '\\' || c < 0x20 {
			break
		}
	}
	return i
}

const (
	lsbs = 0x0101010101010101
	msbs = 0x8080808080808080
)

// hasSpecial reports whether any of the eight bytes in x is '"', '\\' or
// below 0x20 (the "has a byte less than n" and "has a zero byte" tricks of
// Bit Twiddling Hacks, exact as existence tests).
func hasSpecial(x uint64) bool {
	q := x ^ (lsbs * '"')
	s := x ^ (lsbs * '\\')
	return ((x-lsbs*0x20)&^x|(q-lsbs)&^q|(s-lsbs)&^s)&msbs != 0
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
func (p *parser) number(positive bool) (Value, error) {
	numStart := p.i
	if !positive {
		numStart--
	}
	if p.i >= len(p.b) {
		return Value{}, p.err(msgEOFValue)
	}
	c := p.b[p.i]
	p.i++
	var sig uint64
	switch {
	case c == '0':
		if isDigit(p.peekByte()) {
			return Value{}, p.peekErr(msgInvalidNumber)
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
		return Value{}, p.err(msgInvalidNumber)
	}
	switch p.peekByte() {
	case '.':
		return p.decimal(positive, sig, 0, numStart)
	case 'e', 'E':
		return p.exponent(positive, sig, 0, numStart)
	}
	if positive {
		return U64(sig), nil
	}
	if sig == 0 || sig > 1<<63 {
		return F64(-float64(sig)), nil
	}
	return Value{Kind: KindNumber, Num: Number{Kind: NumI64, I: int64(-sig)}}, nil
}

func overflowU64(sig, d uint64) bool {
	const max = math.MaxUint64
	return sig >= max/10 && (sig > max/10 || d > max%10)
}

func (p *parser) longInteger(positive bool, sig uint64, numStart int) (Value, error) {
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

func (p *parser) decimal(positive bool, sig uint64, expBefore int, numStart int) (Value, error) {
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
			return Value{}, p.peekErr(msgInvalidNumber)
		}
		return Value{}, p.peekErr(msgEOFValue)
	}
	if c := p.peekByte(); c == 'e' || c == 'E' {
		return p.exponent(positive, sig, expBefore+expAfter, numStart)
	}
	return p.float(positive, sig, expBefore+expAfter, numStart)
}

func (p *parser) exponent(positive bool, sig uint64, startExp int, numStart int) (Value, error) {
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
		return Value{}, p.err(msgEOFValue)
	}
	c := p.b[p.i]
	p.i++
	if !isDigit(c) {
		return Value{}, p.err(msgInvalidNumber)
	}
	exp := int32(c - '0')
	for isDigit(p.peekByte()) {
		d := int32(p.peekByte() - '0')
		p.i++
		if exp >= math.MaxInt32/10 && (exp > math.MaxInt32/10 || d > math.MaxInt32%10) {
			if sig != 0 && positiveExp {
				return Value{}, p.err(msgNumberOutOfRange)
			}
			for isDigit(p.peekByte()) {
				p.i++
			}
			if positive {
				return F64(0), nil
			}
			return F64(math.Copysign(0, -1)), nil
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
func (p *parser) float(positive bool, sig uint64, exp int, numStart int) (Value, error) {
	var f float64
	if exactFloatParsing {
		var err error
		f, err = strconv.ParseFloat(string(p.b[numStart:p.i]), 64)
		if err != nil || math.IsInf(f, 0) {
			if math.IsInf(f, 0) {
				return Value{}, p.err(msgNumberOutOfRange)
			}
			return Value{}, p.err(msgInvalidNumber)
		}
		return F64(f), nil
	}
	f, ok := serdeFloatFromParts(sig, exp)
	if !ok {
		return Value{}, p.err(msgNumberOutOfRange)
	}
	if !positive {
		f = -f
	}
	return F64(f), nil
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
