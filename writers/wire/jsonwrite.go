package wire

import (
	"bytes"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"strings"
)

// The writers below produce the bytes the reference's serde_json 1.0.149
// writes (FORMAT.md §2): only `"`, `\` and C0 controls escaped, raw UTF-8
// for everything else, and floats in zmij's shortest round-trip notation.

const hexDigits = "0123456789abcdef"

// AppendString appends s as a JSON string literal.
func AppendString(dst []byte, s string) []byte { return appendString(dst, s) }

func appendString[S string | []byte](dst []byte, s S) []byte {
	dst = append(dst, '"')
	start := 0
	for i := plainRunOf(s, 0); i < len(s); i = plainRunOf(s, i+1) {
		c := s[i]
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

// plainRunOf is plainRun (jsonparse.go) for a string too: the bytes it
// skips are exactly those written unescaped.
func plainRunOf[S string | []byte](s S, i int) int {
	for ; i+8 <= len(s); i += 8 {
		x := uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
			uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
		if m := specialBytes(x); m != 0 {
			return i + bits.TrailingZeros64(m)/8
		}
	}
	for ; i < len(s); i++ {
		if c := s[i]; c == '"' || c == '\\' || c < 0x20 {
			break
		}
	}
	return i
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
// BTreeMap without preserve_order) holds them. v is left as it was.
func SortKeys(v Value) Value {
	v = deepCopy(v)
	sortKeysInPlace(&v)
	return v
}

func deepCopy(v Value) Value {
	switch v.Kind {
	case KindArray:
		out := make([]Value, len(v.Arr))
		for i := range v.Arr {
			out[i] = deepCopy(v.Arr[i])
		}
		v.Arr = out
	case KindObject:
		out := make([]Member, len(v.Obj))
		for i, m := range v.Obj {
			out[i] = Member{Key: m.Key, Value: deepCopy(m.Value)}
		}
		v.Obj = out
	}
	return v
}

// sortKeysInPlace is SortKeys on v's own storage: each object's members
// are sorted where they are and its duplicates dropped (v.Obj is
// shortened).
func sortKeysInPlace(v *Value) {
	switch v.Kind {
	case KindArray:
		for i := range v.Arr {
			sortKeysInPlace(&v.Arr[i])
		}
	case KindObject:
		for i := range v.Obj {
			sortKeysInPlace(&v.Obj[i].Value)
		}
		if !keysAscending(v.Obj) {
			v.Obj = dedupSorted(sortMembers(v.Obj))
		}
	}
}

// keysAscending reports whether the keys are strictly increasing: sorted,
// and so without duplicates. What the reference wrote is always so.
func keysAscending(obj []Member) bool {
	for i := 1; i < len(obj); i++ {
		if obj[i-1].Key >= obj[i].Key {
			return false
		}
	}
	return true
}

// sortMembers sorts obj by key, stably: of equal keys, the last in the
// source stays last, which is the one that wins.
func sortMembers(obj []Member) []Member {
	slices.SortStableFunc(obj, func(a, b Member) int { return strings.Compare(a.Key, b.Key) })
	return obj
}

// dedupSorted keeps the last of each run of equal keys.
func dedupSorted(obj []Member) []Member {
	out := obj[:0]
	for i := range obj {
		if i+1 < len(obj) && obj[i+1].Key == obj[i].Key {
			continue
		}
		out = append(out, obj[i])
	}
	clear(obj[len(out):]) // drop what the shortened slice no longer shows
	return out
}

// AppendCanonical appends v compact with keys sorted at every depth (the
// bytes of AppendCompact(dst, SortKeys(v))). It copies nothing: an object
// whose keys are already in order is written as it is, any other through a
// sorted list of its members' indices.
func AppendCanonical(dst []byte, v Value) []byte {
	return appendCanonical(dst, &v)
}

func appendCanonical(dst []byte, v *Value) []byte {
	switch v.Kind {
	case KindArray:
		dst = append(dst, '[')
		for i := range v.Arr {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendCanonical(dst, &v.Arr[i])
		}
		return append(dst, ']')
	case KindObject:
		return appendCanonicalObject(dst, v.Obj)
	}
	return AppendCompact(dst, *v)
}

func appendCanonicalObject(dst []byte, obj []Member) []byte {
	dst = append(dst, '{')
	if keysAscending(obj) {
		for i := range obj {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendCanonicalMember(dst, &obj[i])
		}
		return append(dst, '}')
	}
	var small [32]int32
	order := small[:0]
	if len(obj) > len(small) {
		order = make([]int32, 0, len(obj))
	}
	for i := range obj {
		order = append(order, int32(i))
	}
	sortOrder(order, obj)
	first := true
	for k, i := range order {
		if k+1 < len(order) && obj[order[k+1]].Key == obj[i].Key {
			continue // a later duplicate wins
		}
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = appendCanonicalMember(dst, &obj[i])
	}
	return append(dst, '}')
}

func appendCanonicalMember(dst []byte, m *Member) []byte {
	dst = AppendString(dst, m.Key)
	dst = append(dst, ':')
	return appendCanonical(dst, &m.Value)
}

// sortOrder sorts member indices by key, stably (see sortMembers).
func sortOrder(order []int32, obj []Member) {
	slices.SortStableFunc(order, func(a, b int32) int { return strings.Compare(obj[a].Key, obj[b].Key) })
}

// AppendCanonical appends node i's value as AppendCanonical appends a
// Value: compact, keys sorted at every depth, the last of duplicate keys
// winning. A string without escapes is copied as it was read: it holds no
// byte that needs escaping.
func (t *Tape) AppendCanonical(dst []byte, i int) []byte {
	n := &t.nodes[i]
	switch n.kind {
	case KindNull:
		return append(dst, "null"...)
	case KindBool:
		if n.x != 0 {
			return append(dst, "true"...)
		}
		return append(dst, "false"...)
	case KindNumber:
		return AppendNumber(dst, t.Number(i))
	case KindString:
		return t.AppendString(dst, i)
	case KindArray:
		dst = append(dst, '[')
		for j, k := i+1, 0; k < int(n.x); j, k = int(t.nodes[j].next), k+1 {
			if k > 0 {
				dst = append(dst, ',')
			}
			dst = t.AppendCanonical(dst, j)
		}
		return append(dst, ']')
	}
	return t.appendCanonicalObject(dst, i)
}

// AppendString appends string node i as a JSON string literal.
func (t *Tape) AppendString(dst []byte, i int) []byte {
	n := &t.nodes[i]
	start, end := n.start, n.end
	switch {
	case n.esc && n.canon:
		start, end = n.rawStart, n.rawEnd
	case n.esc:
		return appendString(dst, t.unesc[n.start:n.end])
	}
	dst = append(dst, '"')
	dst = append(dst, t.text[start:end]...)
	return append(dst, '"')
}

func (t *Tape) appendCanonicalObject(dst []byte, i int) []byte {
	var small [32]int
	keys := small[:0]
	if n := t.Len(i); n > len(small) {
		keys = make([]int, 0, n)
	}
	sorted := true
	for j, k, n := i+1, 0, t.Len(i); k < n; j, k = int(t.nodes[j+1].next), k+1 {
		if len(keys) > 0 && string(t.StrBytes(keys[len(keys)-1])) >= string(t.StrBytes(j)) {
			sorted = false
		}
		keys = append(keys, j)
	}
	if !sorted {
		t.sortKeys(keys)
	}
	dst = append(dst, '{')
	first := true
	for k, j := range keys {
		if k+1 < len(keys) && string(t.StrBytes(keys[k+1])) == string(t.StrBytes(j)) {
			continue // a later duplicate wins
		}
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = t.AppendString(dst, j)
		dst = append(dst, ':')
		dst = t.AppendCanonical(dst, j+1)
	}
	return append(dst, '}')
}

// sortKeys sorts key nodes by their strings, stably (see sortMembers).
func (t *Tape) sortKeys(keys []int) {
	less := func(a, b int) bool { return string(t.StrBytes(a)) < string(t.StrBytes(b)) }
	if len(keys) > 32 {
		slices.SortStableFunc(keys, func(a, b int) int { return bytes.Compare(t.StrBytes(a), t.StrBytes(b)) })
		return
	}
	for i := 1; i < len(keys); i++ {
		x := keys[i]
		j := i
		for ; j > 0 && less(x, keys[j-1]); j-- {
			keys[j] = keys[j-1]
		}
		keys[j] = x
	}
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
