package payload

import (
	"errors"
	"strconv"
	"strings"
	"unicode"

	"pisess/readers"
	"pisess/writers/wire"
)

// Error is an entry the reference's typed model refuses. Detail is the
// reference's own message, word for word (serde's text, with serde_json's
// "at line L column C" when the reference positions it); callers branch on
// Class.
type Error struct {
	Class  readers.Class
	Detail string
}

func (e *Error) Error() string { return e.Detail }

func badEntry(detail string) *Error { return &Error{Class: readers.ClassBadEntry, Detail: detail} }

// Messages as serde spells them (serde_core de::Error defaults; serde_json
// overrides only invalid_type and invalid_value, for "null" and floats).

func msgInvalidType(v wire.Value, expected string) string {
	return "invalid type: " + unexpected(v) + ", expected " + expected
}

func msgInvalidValue(unexp, expected string) string {
	return "invalid value: " + unexp + ", expected " + expected
}

func msgMissingField(name string) string   { return "missing field `" + name + "`" }
func msgDuplicateField(name string) string { return "duplicate field `" + name + "`" }

func msgInvalidLength(n int, expected string) string {
	return "invalid length " + strconv.Itoa(n) + ", expected " + expected
}

// msgUnknownVariant is serde's unknown_variant with its OneOf list.
func msgUnknownVariant(name string, expected []string) string {
	var b strings.Builder
	b.WriteString("unknown variant `")
	b.WriteString(name)
	b.WriteString("`, ")
	switch len(expected) {
	case 0:
		b.WriteString("there are no variants")
		return b.String()
	case 1:
		b.WriteString("expected `" + expected[0] + "`")
	case 2:
		b.WriteString("expected `" + expected[0] + "` or `" + expected[1] + "`")
	default:
		b.WriteString("expected one of ")
		for i, n := range expected {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString("`" + n + "`")
		}
	}
	return b.String()
}

// unexpected describes a value the way serde_json's errors do.
func unexpected(v wire.Value) string {
	switch v.Kind {
	case wire.KindNull:
		return "null"
	case wire.KindBool:
		return "boolean `" + strconv.FormatBool(v.Bool) + "`"
	case wire.KindNumber:
		switch v.Num.Kind {
		case wire.NumU64:
			return unexpectedUnsigned(v.Num.U)
		case wire.NumI64:
			return unexpectedSigned(v.Num.I)
		default:
			return "floating point `" + string(wire.AppendFloat(nil, v.Num.F)) + "`"
		}
	case wire.KindString:
		return "string " + RustDebugString(v.Str)
	case wire.KindArray:
		return "sequence"
	case wire.KindObject:
		return "map"
	}
	return "unknown value"
}

func unexpectedUnsigned(u uint64) string { return "integer `" + strconv.FormatUint(u, 10) + "`" }
func unexpectedSigned(i int64) string    { return "integer `" + strconv.FormatInt(i, 10) + "`" }

// RustDebugString quotes s as Rust's `<str as Debug>::fmt` does: the short
// escapes \0 \t \r \n \\ \", and \u{hex} for grapheme extenders and for
// characters Rust does not consider printable (categories Cc, Cf, Cs, Co,
// Cn, Zl, Zp and Zs other than the space). Go's Unicode tables stand in for
// Rust's; they can differ for characters assigned in a newer Unicode version.
func RustDebugString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case 0:
			b.WriteString(`\0`)
		case '\t':
			b.WriteString(`\t`)
		case '\r':
			b.WriteString(`\r`)
		case '\n':
			b.WriteString(`\n`)
		case '\\':
			b.WriteString(`\\`)
		case '"':
			b.WriteString(`\"`)
		default:
			if isGraphemeExtend(r) || !rustPrintable(r) {
				b.WriteString(`\u{`)
				b.WriteString(strconv.FormatInt(int64(r), 16))
				b.WriteByte('}')
			} else {
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}

func isGraphemeExtend(r rune) bool {
	return unicode.In(r, unicode.Mn, unicode.Me, unicode.Other_Grapheme_Extend)
}

func rustPrintable(r rune) bool {
	switch {
	case r < 0x20:
		return false
	case r < 0x7f:
		return true
	}
	if unicode.In(r, unicode.Cc, unicode.Cf, unicode.Cs, unicode.Co, unicode.Zl, unicode.Zp, unicode.Zs) {
		return false
	}
	// Unassigned code points (Cn) are not printable either.
	return unicode.In(r, unicode.L, unicode.M, unicode.N, unicode.P, unicode.S)
}

// fromSyntax turns the JSON layer's error into an Error, classified.
func fromSyntax(err error) *Error {
	var se *wire.SyntaxError
	if errors.As(err, &se) {
		class := readers.ClassMalformedJSON
		switch {
		case se.IsSurrogate():
			class = readers.ClassLoneSurrogate
		case se.Msg == "invalid UTF-8":
			class = readers.ClassInvalidUTF8
		}
		return &Error{Class: class, Detail: se.Error()}
	}
	return &Error{Class: readers.ClassMalformedJSON, Detail: err.Error()}
}

// positioned appends serde_json's position of byte index at, for errors the
// reference raises while it still reads the line.
func positioned(class readers.Class, msg string, line []byte, at int) *Error {
	l, c := wire.Position(line, at)
	return &Error{Class: class, Detail: msg + " at line " + strconv.Itoa(l) + " column " + strconv.Itoa(c)}
}
