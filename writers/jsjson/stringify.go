package jsjson

import (
	"math"
	"strconv"
	"unicode/utf8"

	"pisess/writers/wire"
)

// Append appends JSON.stringify(v) (no indentation) to dst. Numbers are
// read from Num.F whatever their kind (Parse makes every number a NumF64;
// an integer kind is converted, as JavaScript would hold it).
func Append(dst []byte, v wire.Value) []byte {
	switch v.Kind {
	case wire.KindNull:
		return append(dst, "null"...)
	case wire.KindBool:
		if v.Bool {
			return append(dst, "true"...)
		}
		return append(dst, "false"...)
	case wire.KindNumber:
		return AppendNumber(dst, toFloat(v.Num))
	case wire.KindString:
		return AppendString(dst, v.Str)
	case wire.KindArray:
		dst = append(dst, '[')
		for i, x := range v.Arr {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = Append(dst, x)
		}
		return append(dst, ']')
	case wire.KindObject:
		dst = append(dst, '{')
		for i, m := range v.Obj {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = AppendString(dst, m.Key)
			dst = append(dst, ':')
			dst = Append(dst, m.Value)
		}
		return append(dst, '}')
	}
	return append(dst, "null"...)
}

func toFloat(n wire.Number) float64 {
	switch n.Kind {
	case wire.NumU64:
		return float64(n.U)
	case wire.NumI64:
		return float64(n.I)
	}
	return n.F
}

// AppendNumber appends f as JSON.stringify writes a number: Number::toString
// (the shortest digits that read back as f, ECMA-262 §6.1.6.1.20), and
// null for NaN and the infinities.
func AppendNumber(dst []byte, f float64) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(dst, "null"...)
	}
	if f == 0 {
		return append(dst, '0') // -0 too
	}
	if f < 0 {
		dst = append(dst, '-')
		f = -f
	}
	// FormatFloat 'e' with precision -1 gives the shortest digits that
	// round-trip: d.ddddde±x.
	var buf [32]byte
	e := strconv.AppendFloat(buf[:0], f, 'e', -1, 64)
	var digits []byte
	i := 0
	for ; e[i] != 'e'; i++ {
		if e[i] != '.' {
			digits = append(digits, e[i])
		}
	}
	exp, _ := strconv.Atoi(string(e[i+1:]))
	k, n := len(digits), exp+1 // f = 0.digits × 10^n
	switch {
	case k <= n && n <= 21:
		dst = append(dst, digits...)
		for z := 0; z < n-k; z++ {
			dst = append(dst, '0')
		}
	case 0 < n && n <= 21:
		dst = append(dst, digits[:n]...)
		dst = append(dst, '.')
		dst = append(dst, digits[n:]...)
	case -6 < n && n <= 0:
		dst = append(dst, '0', '.')
		for z := 0; z < -n; z++ {
			dst = append(dst, '0')
		}
		dst = append(dst, digits...)
	default:
		dst = append(dst, digits[0])
		if k > 1 {
			dst = append(dst, '.')
			dst = append(dst, digits[1:]...)
		}
		dst = append(dst, 'e')
		if n-1 >= 0 {
			dst = append(dst, '+')
		}
		dst = strconv.AppendInt(dst, int64(n-1), 10)
	}
	return dst
}

const hexDigits = "0123456789abcdef"

// AppendString appends s quoted as JSON.stringify quotes it (well-formed
// JSON.stringify, ES2019): the two-character escapes for \b \t \n \f \r "
// and \, \u00xx for the other control characters, \udxxx for a lone
// surrogate (held in s as WTF-8), everything else as it is.
func AppendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c >= utf8.RuneSelf {
			if c == 0xED && i+2 < len(s) && s[i+1] >= 0xA0 && s[i+1] <= 0xBF {
				// A WTF-8 surrogate: U+D800..U+DFFF.
				r := rune(c&0x0F)<<12 | rune(s[i+1]&0x3F)<<6 | rune(s[i+2]&0x3F)
				dst = append(dst, s[start:i]...)
				dst = append(dst, '\\', 'u', hexDigits[r>>12], hexDigits[r>>8&0xF], hexDigits[r>>4&0xF], hexDigits[r&0xF])
				i += 3
				start = i
				continue
			}
			_, size := utf8.DecodeRuneInString(s[i:])
			i += size
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
		i++
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
