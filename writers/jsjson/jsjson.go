// Package jsjson is the JavaScript dialect of JSON: what pi's own rewrite
// of a session file does, `JSON.stringify(JSON.parse(line))`. It is the
// dialect of `pisess upgrade`, which must write exactly the bytes pi would
// write for the user's own file. V2 frames use the other dialect, the
// reference's serde_json, in package wire; the two differ on purpose and
// must never be mixed:
//
//   - numbers are IEEE doubles, correctly rounded (0.010665000000000001
//     stays itself), written in ECMAScript's Number::toString notation
//     (1500, 1e+21, 1e-7, -0 as 0); serde keeps integers exact and writes
//     floats its own way;
//   - a duplicate member keeps the position of its first occurrence and
//     the value of its last, and integer-like keys ("0", "7") come first in
//     ascending order, as a JavaScript object keeps them;
//   - a lone surrogate escape (\ud83d) is kept and written back as the same
//     escape, since JavaScript strings are UTF-16; in Go strings it is held
//     as its WTF-8 bytes.
//
// Values are wire.Value trees (a shared shape, not a shared dialect): every
// number is a NumF64.
package jsjson

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"unicode/utf8"

	"pisess/writers/wire"
)

// MaxDepth bounds nesting. JSON.parse is bounded only by the engine's
// stack; a deeper document is refused rather than risk running out of it.
const MaxDepth = 10000

// SyntaxError is text JSON.parse throws on; Offset is a byte offset.
type SyntaxError struct {
	Offset int
	Msg    string
}

func (e *SyntaxError) Error() string { return fmt.Sprintf("%s at byte %d", e.Msg, e.Offset) }

// ErrNotFinite is matched when a number overflows a double (1e400):
// JSON.parse reads Infinity, which JSON.stringify writes as null.
var ErrNotFinite = errors.New("number out of range of a double")

// Parse reads text as JSON.parse does (text must be valid UTF-8; only JSON
// white space — space, tab, LF, CR — may surround the value).
func Parse(text []byte) (wire.Value, error) {
	p := parser{b: text}
	p.space()
	v, err := p.value(0)
	if err != nil {
		return wire.Value{}, err
	}
	p.space()
	if p.i != len(p.b) {
		return wire.Value{}, p.fail("unexpected non-whitespace character after JSON")
	}
	return v, nil
}

type parser struct {
	b []byte
	i int
}

func (p *parser) fail(msg string) error { return &SyntaxError{Offset: p.i, Msg: msg} }

func (p *parser) space() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *parser) literal(word string, v wire.Value) (wire.Value, error) {
	if len(p.b)-p.i < len(word) || string(p.b[p.i:p.i+len(word)]) != word {
		return wire.Value{}, p.fail("unexpected token")
	}
	p.i += len(word)
	return v, nil
}

func (p *parser) value(depth int) (wire.Value, error) {
	if depth > MaxDepth {
		return wire.Value{}, p.fail("nesting too deep")
	}
	if p.i >= len(p.b) {
		return wire.Value{}, p.fail("unexpected end of JSON input")
	}
	switch c := p.b[p.i]; {
	case c == '{':
		return p.object(depth)
	case c == '[':
		return p.array(depth)
	case c == '"':
		s, err := p.str()
		return wire.String(s), err
	case c == 't':
		return p.literal("true", wire.Bool(true))
	case c == 'f':
		return p.literal("false", wire.Bool(false))
	case c == 'n':
		return p.literal("null", wire.Null())
	case c == '-' || c >= '0' && c <= '9':
		return p.number()
	}
	return wire.Value{}, p.fail("unexpected token")
}

func (p *parser) digits() int {
	start := p.i
	for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
		p.i++
	}
	return p.i - start
}

func (p *parser) number() (wire.Value, error) {
	start := p.i
	if p.b[p.i] == '-' {
		p.i++
	}
	switch {
	case p.i < len(p.b) && p.b[p.i] == '0':
		p.i++
	case p.digits() == 0:
		return wire.Value{}, p.fail("no number after minus sign")
	}
	if p.i < len(p.b) && p.b[p.i] == '.' {
		p.i++
		if p.digits() == 0 {
			return wire.Value{}, p.fail("unterminated fractional number")
		}
	}
	if p.i < len(p.b) && (p.b[p.i] == 'e' || p.b[p.i] == 'E') {
		p.i++
		if p.i < len(p.b) && (p.b[p.i] == '+' || p.b[p.i] == '-') {
			p.i++
		}
		if p.digits() == 0 {
			return wire.Value{}, p.fail("exponent part is missing a number")
		}
	}
	// ParseFloat is correctly rounded, as ECMAScript's StringToNumber is.
	f, err := strconv.ParseFloat(string(p.b[start:p.i]), 64)
	if err != nil && !math.IsInf(f, 0) {
		return wire.Value{}, p.fail(err.Error())
	}
	return wire.F64(f), nil
}

func hexVal(c byte) (rune, bool) {
	switch {
	case c >= '0' && c <= '9':
		return rune(c - '0'), true
	case c >= 'a' && c <= 'f':
		return rune(c-'a') + 10, true
	case c >= 'A' && c <= 'F':
		return rune(c-'A') + 10, true
	}
	return 0, false
}

func (p *parser) hex4() (rune, error) {
	if len(p.b)-p.i < 4 {
		return 0, p.fail("bad Unicode escape")
	}
	var r rune
	for k := 0; k < 4; k++ {
		d, ok := hexVal(p.b[p.i+k])
		if !ok {
			return 0, p.fail("bad Unicode escape")
		}
		r = r<<4 | d
	}
	p.i += 4
	return r, nil
}

func isHigh(r rune) bool { return r >= 0xD800 && r <= 0xDBFF }
func isLow(r rune) bool  { return r >= 0xDC00 && r <= 0xDFFF }

// appendWTF8 appends r, a lone surrogate included (as its three WTF-8
// bytes, which no valid UTF-8 holds, so nothing else can be mistaken for
// one).
func appendWTF8(dst []byte, r rune) []byte {
	if r >= 0xD800 && r <= 0xDFFF {
		return append(dst, 0xED, byte(0xA0|(r>>6)&0x1F), byte(0x80|r&0x3F))
	}
	return utf8.AppendRune(dst, r)
}

func (p *parser) str() (string, error) {
	p.i++ // opening quote
	var out []byte
	start := p.i
	for {
		if p.i >= len(p.b) {
			return "", p.fail("unterminated string in JSON")
		}
		c := p.b[p.i]
		switch {
		case c == '"':
			out = append(out, p.b[start:p.i]...)
			p.i++
			return string(out), nil
		case c < 0x20:
			return "", p.fail("bad control character in string literal")
		case c != '\\':
			p.i++
			continue
		}
		out = append(out, p.b[start:p.i]...)
		p.i++
		if p.i >= len(p.b) {
			return "", p.fail("unterminated string in JSON")
		}
		e := p.b[p.i]
		p.i++
		switch e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, err := p.hex4()
			if err != nil {
				return "", err
			}
			if isHigh(r) && len(p.b)-p.i >= 6 && p.b[p.i] == '\\' && p.b[p.i+1] == 'u' {
				save := p.i
				p.i += 2
				lo, err := p.hex4()
				if err == nil && isLow(lo) {
					r = 0x10000 + (r-0xD800)<<10 + (lo - 0xDC00)
				} else {
					p.i = save // not a pair: the high surrogate stays alone
				}
			}
			out = appendWTF8(out, r)
		default:
			p.i--
			return "", p.fail("bad escaped character")
		}
		start = p.i
	}
}

func (p *parser) array(depth int) (wire.Value, error) {
	p.i++
	v := wire.Value{Kind: wire.KindArray, Arr: []wire.Value{}}
	p.space()
	if p.i < len(p.b) && p.b[p.i] == ']' {
		p.i++
		return v, nil
	}
	for {
		p.space()
		item, err := p.value(depth + 1)
		if err != nil {
			return wire.Value{}, err
		}
		v.Arr = append(v.Arr, item)
		p.space()
		if p.i >= len(p.b) {
			return wire.Value{}, p.fail("unexpected end of JSON input")
		}
		switch p.b[p.i] {
		case ',':
			p.i++
		case ']':
			p.i++
			return v, nil
		default:
			return wire.Value{}, p.fail("expected ',' or ']' after array element")
		}
	}
}

func (p *parser) object(depth int) (wire.Value, error) {
	p.i++
	v := wire.Value{Kind: wire.KindObject, Obj: []wire.Member{}}
	var index map[string]int // key → position, once the object is not tiny
	find := func(key string) int {
		if index != nil {
			if k, ok := index[key]; ok {
				return k
			}
			return -1
		}
		for k := range v.Obj {
			if v.Obj[k].Key == key {
				return k
			}
		}
		return -1
	}
	p.space()
	if p.i < len(p.b) && p.b[p.i] == '}' {
		p.i++
		return v, nil
	}
	for {
		p.space()
		if p.i >= len(p.b) || p.b[p.i] != '"' {
			return wire.Value{}, p.fail("expected double-quoted property name")
		}
		key, err := p.str()
		if err != nil {
			return wire.Value{}, err
		}
		p.space()
		if p.i >= len(p.b) || p.b[p.i] != ':' {
			return wire.Value{}, p.fail("expected ':' after property name")
		}
		p.i++
		p.space()
		val, err := p.value(depth + 1)
		if err != nil {
			return wire.Value{}, err
		}
		// [[DefineOwnProperty]]: a key seen before keeps its place and
		// takes the new value.
		if k := find(key); k >= 0 {
			v.Obj[k].Value = val
		} else {
			v.Obj = append(v.Obj, wire.Member{Key: key, Value: val})
			if index == nil && len(v.Obj) > 16 {
				index = make(map[string]int, 32)
				for k, m := range v.Obj {
					index[m.Key] = k
				}
			} else if index != nil {
				index[key] = len(v.Obj) - 1
			}
		}
		p.space()
		if p.i >= len(p.b) {
			return wire.Value{}, p.fail("unexpected end of JSON input")
		}
		switch p.b[p.i] {
		case ',':
			p.i++
		case '}':
			p.i++
			orderKeys(v.Obj)
			return v, nil
		default:
			return wire.Value{}, p.fail("expected ',' or '}' after property value")
		}
	}
}

// arrayIndex reports whether key is an array index (ECMAScript: the
// canonical decimal form of a uint32 below 2^32-1), and its value.
func arrayIndex(key string) (uint32, bool) {
	if key == "" || len(key) > 10 || key[0] == '0' && len(key) > 1 {
		return 0, false
	}
	n, err := strconv.ParseUint(key, 10, 32)
	if err != nil || n == math.MaxUint32 {
		return 0, false
	}
	return uint32(n), true
}

// orderKeys puts members in OrdinaryOwnPropertyKeys order: array-index
// keys ascending, then the others in insertion order.
func orderKeys(ms []wire.Member) {
	any := false
	for _, m := range ms {
		if _, ok := arrayIndex(m.Key); ok {
			any = true
			break
		}
	}
	if !any {
		return
	}
	sort.SliceStable(ms, func(a, b int) bool {
		ia, oka := arrayIndex(ms[a].Key)
		ib, okb := arrayIndex(ms[b].Key)
		switch {
		case oka && okb:
			return ia < ib
		case oka != okb:
			return oka
		}
		return false
	})
}

// SetMember sets key as a JavaScript assignment does: in place when the
// object has it, else appended (after the array-index keys, which sort
// first, when key is one).
func SetMember(v *wire.Value, key string, x wire.Value) {
	for k := range v.Obj {
		if v.Obj[k].Key == key {
			v.Obj[k].Value = x
			return
		}
	}
	v.Obj = append(v.Obj, wire.Member{Key: key, Value: x})
	if _, ok := arrayIndex(key); ok {
		orderKeys(v.Obj)
	}
}

// HasNonFinite reports whether v holds a number that overflowed a double
// (JSON.stringify writes it as null: the rewrite would change the value).
func HasNonFinite(v wire.Value) bool {
	switch v.Kind {
	case wire.KindNumber:
		return math.IsInf(v.Num.F, 0) || math.IsNaN(v.Num.F)
	case wire.KindArray:
		for _, x := range v.Arr {
			if HasNonFinite(x) {
				return true
			}
		}
	case wire.KindObject:
		for _, m := range v.Obj {
			if HasNonFinite(m.Value) {
				return true
			}
		}
	}
	return false
}
