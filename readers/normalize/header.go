package normalize

import (
	"errors"
	"strconv"

	"pisess/readers"
	"pisess/readers/payload"
	"pisess/writers/wire"
)

// Header is a session header as the reference's SessionHeader holds it.
type Header struct {
	Type             string
	Version          int // meaningful when HasVersion
	HasVersion       bool
	ID               string
	Timestamp        string
	Cwd              string
	ParentSession    string // `branchedFrom`, alias `parentSession`
	HasParentSession bool
}

// Readers returns h in the normalized model; raw is the header text as
// stored.
func (h Header) Readers(format readers.SourceFormat, raw []byte) readers.Header {
	v := 0
	if h.HasVersion {
		v = h.Version
	}
	return readers.Header{
		ID:            h.ID,
		Timestamp:     h.Timestamp,
		Cwd:           h.Cwd,
		Version:       v,
		ParentSession: h.ParentSession,
		Format:        format,
		Raw:           append([]byte(nil), raw...),
	}
}

// HeaderError is a header the reference's typed model refuses; Detail is
// serde's message with serde_json's position, as the reference prints it.
type HeaderError struct {
	Detail string
	// Syntax is set when the text is not JSON at all (as opposed to JSON of
	// the wrong shape).
	Syntax *wire.SyntaxError
}

func (e *HeaderError) Error() string { return e.Detail }

// The SessionHeader fields in declaration order (serde derive, camelCase;
// the struct has no deny_unknown_fields, so other members are ignored).
type headerKind uint8

const (
	hString    headerKind = iota // String: required
	hOptU8                       // Option<u8>
	hOptString                   // Option<String>
)

var headerFields = []struct {
	name string
	kind headerKind
}{
	{"type", hString},
	{"version", hOptU8},
	{"id", hString},
	{"timestamp", hString},
	{"cwd", hString},
	{"provider", hOptString},
	{"modelId", hOptString},
	{"thinkingLevel", hOptString},
	{"fallbackProvider", hOptString},
	{"fallbackModelId", hOptString},
	{"fallbackThinkingLevel", hOptString},
	{"leafId", hOptString},
	{"branchedFrom", hOptString},
}

const headerStructName = "struct SessionHeader"

func headerFieldIndex(key string) int {
	if key == "parentSession" { // #[serde(alias = "parentSession")]
		key = "branchedFrom"
	}
	for i, f := range headerFields {
		if f.name == key {
			return i
		}
	}
	return -1
}

// ParseHeader reads text as serde_json::from_str::<SessionHeader> does. The
// JSONL reader passes line 1 after Rust's trim(), as the reference does; the
// SQLite reader passes the json column as stored. A refusal is a
// *HeaderError.
func ParseHeader(text []byte) (Header, error) {
	var (
		h    Header
		seen [13]bool
		vals [13]wire.Value
	)
	hook := func(m wire.TopMember) error {
		i := headerFieldIndex(m.Key)
		if i < 0 {
			return nil
		}
		if seen[i] {
			// serde raises this as soon as the key is read; the position is
			// where serde_json stands then (after the key and any blanks).
			return &wire.HookError{Msg: "duplicate field `" + headerFields[i].name + "`", At: skipJSONSpace(text, m.KeyEnd)}
		}
		seen[i] = true
		at := m.ValueEnd
		if m.Value.Kind == wire.KindArray || m.Value.Kind == wire.KindObject {
			at = m.ValueStart // serde_json refuses on seeing `[` or `{`
		}
		if msg := checkHeaderValue(headerFields[i].kind, m.Value); msg != "" {
			return &wire.HookError{Msg: msg, At: at}
		}
		vals[i] = m.Value
		return nil
	}
	v, end, trailing, err := wire.ParseJSONSplitTrailing(text, hook)
	if err != nil {
		return h, headerSyntax(err)
	}
	switch v.Kind {
	case wire.KindObject:
		for i, f := range headerFields {
			if !seen[i] && f.kind == hString {
				return h, positionedHeader("missing field `"+f.name+"`", text, end)
			}
		}
	case wire.KindArray:
		// serde derive also reads a struct from a sequence, positionally.
		if msg := headerFromSeq(v.Arr, &seen, &vals); msg != "" {
			return h, positionedHeader(msg, text, end)
		}
	default:
		msg := "invalid type: " + unexpected(v) + ", expected " + headerStructName
		return h, positionedHeader(msg, text, end)
	}
	if trailing != nil {
		return h, headerSyntax(trailing)
	}
	h.Type = vals[0].Str
	if seen[1] && vals[1].Kind == wire.KindNumber {
		h.Version, h.HasVersion = int(vals[1].Num.U), true
	}
	h.ID, h.Timestamp, h.Cwd = vals[2].Str, vals[3].Str, vals[4].Str
	if seen[12] && vals[12].Kind == wire.KindString {
		h.ParentSession, h.HasParentSession = vals[12].Str, true
	}
	return h, nil
}

// headerFromSeq is serde derive's visit_seq: the 13 fields in order, none
// defaulted. Positions are not reproduced for element errors (no real
// session has an array header); the message is.
func headerFromSeq(items []wire.Value, seen *[13]bool, vals *[13]wire.Value) string {
	for i, f := range headerFields {
		if i >= len(items) {
			return "invalid length " + strconv.Itoa(i) + ", expected " + headerStructName + " with 13 elements"
		}
		if msg := checkHeaderValue(f.kind, items[i]); msg != "" {
			return msg
		}
		seen[i], vals[i] = true, items[i]
	}
	if len(items) > len(headerFields) {
		return "trailing characters"
	}
	return ""
}

// checkHeaderValue returns serde's message when v cannot be read as kind.
func checkHeaderValue(kind headerKind, v wire.Value) string {
	switch kind {
	case hString:
		if v.Kind != wire.KindString {
			return "invalid type: " + unexpected(v) + ", expected a string"
		}
	case hOptString:
		if v.Kind != wire.KindString && v.Kind != wire.KindNull {
			return "invalid type: " + unexpected(v) + ", expected a string"
		}
	case hOptU8:
		switch {
		case v.Kind == wire.KindNull:
		case v.Kind != wire.KindNumber || v.Num.Kind == wire.NumF64:
			return "invalid type: " + unexpected(v) + ", expected u8"
		case v.Num.Kind == wire.NumI64 || v.Num.U > 255:
			return "invalid value: " + unexpected(v) + ", expected u8"
		}
	}
	return ""
}

// unexpected describes a value the way serde_json's errors do (its
// JsonUnexpected: null for unit, zmij's float notation).
func unexpected(v wire.Value) string {
	switch v.Kind {
	case wire.KindNull:
		return "null"
	case wire.KindBool:
		return "boolean `" + strconv.FormatBool(v.Bool) + "`"
	case wire.KindNumber:
		switch v.Num.Kind {
		case wire.NumU64:
			return "integer `" + strconv.FormatUint(v.Num.U, 10) + "`"
		case wire.NumI64:
			return "integer `" + strconv.FormatInt(v.Num.I, 10) + "`"
		}
		return "floating point `" + string(wire.AppendFloat(nil, v.Num.F)) + "`"
	case wire.KindString:
		return "string " + payload.RustDebugString(v.Str)
	case wire.KindArray:
		return "sequence"
	}
	return "map"
}

func headerSyntax(err error) *HeaderError {
	var se *wire.SyntaxError
	if errors.As(err, &se) {
		return &HeaderError{Detail: se.Error(), Syntax: se}
	}
	return &HeaderError{Detail: err.Error()}
}

func positionedHeader(msg string, text []byte, at int) *HeaderError {
	l, c := wire.Position(text, at)
	return &HeaderError{Detail: msg + " at line " + strconv.Itoa(l) + " column " + strconv.Itoa(c)}
}

func skipJSONSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\n' || b[i] == '\t' || b[i] == '\r') {
		i++
	}
	return i
}

// HeaderProblem is a header that parsed but that the reader will not read.
type HeaderProblem struct {
	Class  readers.Class
	Reason string
	// Legacy is set when the header is version 1 or 2, which a reader with
	// allowLegacy would have read (and an upgrade can convert).
	Legacy bool
}

// MigratableVersion is the only header version the reference migrates.
const MigratableVersion = 3

// CheckHeader applies SessionHeader::validate: type "session", version 3,
// and id, timestamp and cwd non-empty after Rust's trim(), checked in that
// order. With allowLegacy, versions 1 and 2 (and a header without version,
// which is version 1) pass the version check. Reasons start with the
// reference's own words.
func CheckHeader(h Header, allowLegacy bool) *HeaderProblem {
	if h.Type != "session" {
		return &HeaderProblem{Class: readers.ClassBadHeader, Reason: "type must be `session`, got `" + h.Type + "`"}
	}
	if !h.HasVersion || h.Version != MigratableVersion {
		got := "none"
		if h.HasVersion {
			got = strconv.Itoa(h.Version)
		}
		legacy := !h.HasVersion || h.Version == 1 || h.Version == 2
		reason := "version must be " + strconv.Itoa(MigratableVersion) + ", got " + got
		switch {
		case legacy && allowLegacy:
		case legacy:
			name := "version 1 (no version member)"
			if h.HasVersion {
				name = "version " + got
			}
			return &HeaderProblem{Class: readers.ClassUnsupportedVer, Legacy: true,
				Reason: reason + ": this is a " + name + " session and the reference migrates only version 3"}
		default:
			return &HeaderProblem{Class: readers.ClassUnsupportedVer,
				Reason: reason + ": pisess knows session versions 1 to 3 only"}
		}
	}
	for _, f := range []struct{ name, v string }{{"id", h.ID}, {"timestamp", h.Timestamp}, {"cwd", h.Cwd}} {
		if len(RustTrimString(f.v)) == 0 {
			return &HeaderProblem{Class: readers.ClassBadHeader, Reason: f.name + " must be non-empty"}
		}
	}
	return nil
}
