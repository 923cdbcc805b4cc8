package wire

import (
	"math"
	"sort"
	"strconv"
)

// The writers below produce the bytes the reference's serde_json 1.0.149
// writes (FORMAT.md §2): only `"`, `\` and C0 controls escaped, raw UTF-8
// for everything else, and floats in zmij's shortest round-trip notation.

const hexDigits = "0123456789abcdef"

// AppendString appends s as a JSON string literal.
func AppendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"':
			dst = append(dst, '\\', '"')
		case '\\':
			dst = append(dst, '\\', '\\')
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\f':
			dst = append(dst, '\\', 'f')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
		}
		start = i + 1
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// AppendFloat appends f the way serde_json (zmij) writes a finite f64: the
// shortest digits that round-trip; plain decimal with at least one fraction
// digit when 1e-5 <= |f| < 1e16, else d[.ddd]e±N. Non-finite values, which
// JSON cannot hold, are written as null as serde_json does.
func AppendFloat(dst []byte, f float64) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(dst, "null"...)
	}
	if f == 0 {
		if math.Signbit(f) {
			return append(dst, "-0.0"...)
		}
		return append(dst, "0.0"...)
	}
	// 'e' with precision -1 yields the shortest round-trip digits as
	// d.ddde±XX; re-lay them out in the reference's notation.
	var tmp [32]byte
	e := strconv.AppendFloat(tmp[:0], f, 'e', -1, 64)
	neg := e[0] == '-'
	if neg {
		e = e[1:]
		dst = append(dst, '-')
	}
	ePos := 0
	for ePos < len(e) && e[ePos] != 'e' {
		ePos++
	}
	mant := e[:ePos]
	exp, _ := strconv.Atoi(string(e[ePos+1:]))
	digits := make([]byte, 0, 20)
	for _, c := range mant {
		if c != '.' {
			digits = append(digits, c)
		}
	}
	if exp >= -5 && exp < 16 {
		if exp < 0 {
			dst = append(dst, '0', '.')
			for k := 0; k < -exp-1; k++ {
				dst = append(dst, '0')
			}
			return append(dst, digits...)
		}
		intLen := exp + 1
		if len(digits) <= intLen {
			dst = append(dst, digits...)
			for k := len(digits); k < intLen; k++ {
				dst = append(dst, '0')
			}
			return append(dst, '.', '0')
		}
		dst = append(dst, digits[:intLen]...)
		dst = append(dst, '.')
		return append(dst, digits[intLen:]...)
	}
	dst = append(dst, digits[0])
	if len(digits) > 1 {
		dst = append(dst, '.')
		dst = append(dst, digits[1:]...)
	}
	dst = append(dst, 'e')
	if exp >= 0 {
		dst = append(dst, '+')
	}
	return strconv.AppendInt(dst, int64(exp), 10)
}

// AppendNumber appends n in the reference's form.
func AppendNumber(dst []byte, n Number) []byte {
	switch n.Kind {
	case NumU64:
		return strconv.AppendUint(dst, n.U, 10)
	case NumI64:
		return strconv.AppendInt(dst, n.I, 10)
	}
	return AppendFloat(dst, n.F)
}

// AppendCompact appends v as compact JSON with members in the order given
// (duplicates included: the caller decides what an object holds).
func AppendCompact(dst []byte, v Value) []byte {
	switch v.Kind {
	case KindNull:
		return append(dst, "null"...)
	case KindBool:
		if v.Bool {
			return append(dst, "true"...)
		}
		return append(dst, "false"...)
	case KindNumber:
		return AppendNumber(dst, v.Num)
	case KindString:
		return AppendString(dst, v.Str)
	case KindArray:
		dst = append(dst, '[')
		for i, item := range v.Arr {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = AppendCompact(dst, item)
		}
		return append(dst, ']')
	case KindObject:
		dst = append(dst, '{')
		for i, m := range v.Obj {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = AppendString(dst, m.Key)
			dst = append(dst, ':')
			dst = AppendCompact(dst, m.Value)
		}
		return append(dst, '}')
	}
	return dst
}

// SortKeys returns v with every object's members sorted by key in byte
// order and duplicates resolved last-wins, as serde_json's Value (a
// BTreeMap without preserve_order) holds them.
func SortKeys(v Value) Value {
	switch v.Kind {
	case KindArray:
		out := make([]Value, len(v.Arr))
		for i, item := range v.Arr {
			out[i] = SortKeys(item)
		}
		return Value{Kind: KindArray, Arr: out}
	case KindObject:
		last := make(map[string]int, len(v.Obj))
		for i, m := range v.Obj {
			last[m.Key] = i
		}
		out := make([]Member, 0, len(last))
		for i, m := range v.Obj {
			if last[m.Key] == i {
				out = append(out, Member{Key: m.Key, Value: SortKeys(m.Value)})
			}
		}
		sort.Slice(out, func(a, b int) bool { return out[a].Key < out[b].Key })
		return Value{Kind: KindObject, Obj: out}
	}
	return v
}

// AppendCanonical appends v compact with keys sorted at every depth.
func AppendCanonical(dst []byte, v Value) []byte {
	return AppendCompact(dst, SortKeys(v))
}

// AppendPretty appends v as serde_json's pretty printer writes it: two
// spaces per level, `"key": value`, `{}`/`[]` when empty, no trailing
// newline.
func AppendPretty(dst []byte, v Value) []byte {
	return appendPretty(dst, v, 0)
}

func appendIndent(dst []byte, level int) []byte {
	dst = append(dst, '\n')
	for k := 0; k < level; k++ {
		dst = append(dst, ' ', ' ')
	}
	return dst
}

func appendPretty(dst []byte, v Value, level int) []byte {
	switch v.Kind {
	case KindArray:
		if len(v.Arr) == 0 {
			return append(dst, '[', ']')
		}
		dst = append(dst, '[')
		for i, item := range v.Arr {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendIndent(dst, level+1)
			dst = appendPretty(dst, item, level+1)
		}
		dst = appendIndent(dst, level)
		return append(dst, ']')
	case KindObject:
		if len(v.Obj) == 0 {
			return append(dst, '{', '}')
		}
		dst = append(dst, '{')
		for i, m := range v.Obj {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendIndent(dst, level+1)
			dst = AppendString(dst, m.Key)
			dst = append(dst, ':', ' ')
			dst = appendPretty(dst, m.Value, level+1)
		}
		dst = appendIndent(dst, level)
		return append(dst, '}')
	}
	return AppendCompact(dst, v)
}
