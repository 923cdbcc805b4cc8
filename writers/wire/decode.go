package wire

import (
	"math"
)

// fields decodes one JSON object into a fixed list of members the way a
// serde-derived struct reads it: any order, each member at most once,
// unknown members refused unless allowUnknown, and typed accessors that
// check each value. The first problem sticks (as in Prometheus's decoding
// buffers); later calls do nothing and return zero values.
type fields struct {
	doc    DocKind
	prefix string
	names  []string
	obj    []Member // the object's members
	at     []int16  // at[i] is member i's index in obj, -1 when absent
	err    *DocError
}

// val returns member i's value (which must be present).
func (f *fields) val(i int) *Value { return &f.obj[f.at[i]].Value }

// has reports whether member i is present.
func (f *fields) has(i int) bool { return f.at[i] >= 0 }

func decodeObject(doc DocKind, prefix string, v Value, names []string, allowUnknown bool) *fields {
	f := &fields{doc: doc, prefix: prefix, names: names, obj: v.Obj, at: make([]int16, len(names))}
	for i := range f.at {
		f.at[i] = -1
	}
	if v.Kind != KindObject {
		f.err = docErr(doc, trimDot(prefix), "expected an object, found "+v.Kind.String())
		return f
	}
	for k, m := range v.Obj {
		i := indexOf(names, m.Key)
		if i < 0 {
			if allowUnknown {
				continue
			}
			f.err = docErr(doc, prefix+m.Key, "unknown member")
			return f
		}
		if f.at[i] >= 0 {
			f.err = docErr(doc, prefix+m.Key, "duplicate member")
			return f
		}
		if k > 1<<15-1 {
			f.err = docErr(doc, trimDot(prefix), "too many members")
			return f
		}
		f.at[i] = int16(k)
	}
	return f
}

func indexOf(names []string, key string) int {
	for i, n := range names {
		if n == key {
			return i
		}
	}
	return -1
}

func trimDot(prefix string) string {
	if prefix != "" && prefix[len(prefix)-1] == '.' {
		return prefix[:len(prefix)-1]
	}
	return prefix
}

func (f *fields) fail(i int, reason string) {
	if f.err == nil {
		f.err = docErr(f.doc, f.prefix+f.names[i], reason)
	}
}

// required reports whether member i is present, failing when it is not.
func (f *fields) required(i int) bool {
	if f.err != nil {
		return false
	}
	if !f.has(i) {
		f.fail(i, "missing member")
		return false
	}
	return true
}

// optional reports whether member i holds a value: absent and null both
// mean "none", as for a serde Option.
func (f *fields) optional(i int) bool {
	return f.err == nil && f.has(i) && f.val(i).Kind != KindNull
}

func (f *fields) wrongType(i int, want string) {
	f.fail(i, "expected "+want+", found "+f.val(i).Kind.String())
}

func (f *fields) str(i int) string {
	if !f.required(i) {
		return ""
	}
	return f.strValue(i)
}

func (f *fields) optStr(i int) (string, bool) {
	if !f.optional(i) {
		return "", false
	}
	return f.strValue(i), f.err == nil
}

func (f *fields) strValue(i int) string {
	v := f.val(i)
	if v.Kind != KindString {
		f.wrongType(i, "a string")
		return ""
	}
	return v.Str
}

// u64 reads an unsigned integer: serde refuses floats (1.0, 1e3) and
// negative numbers for u64 members.
func (f *fields) u64(i int) uint64 {
	if !f.required(i) {
		return 0
	}
	v := f.val(i)
	if v.Kind != KindNumber {
		f.wrongType(i, "an unsigned integer")
		return 0
	}
	switch v.Num.Kind {
	case NumU64:
		return v.Num.U
	case NumI64:
		f.fail(i, "expected an unsigned integer, found a negative integer")
	default:
		f.fail(i, "expected an unsigned integer, found a floating-point number")
	}
	return 0
}

// i64 reads a signed integer.
func (f *fields) i64(i int) int64 {
	if !f.required(i) {
		return 0
	}
	v := f.val(i)
	if v.Kind != KindNumber {
		f.wrongType(i, "an integer")
		return 0
	}
	switch v.Num.Kind {
	case NumU64:
		if v.Num.U > math.MaxInt64 {
			f.fail(i, "integer out of range for i64")
			return 0
		}
		return int64(v.Num.U)
	case NumI64:
		return v.Num.I
	}
	f.fail(i, "expected an integer, found a floating-point number")
	return 0
}

func (f *fields) boolean(i int) bool {
	if !f.required(i) {
		return false
	}
	v := f.val(i)
	if v.Kind != KindBool {
		f.wrongType(i, "a boolean")
		return false
	}
	return v.Bool
}

// object returns member i for a nested decode, which reports into f.
func (f *fields) object(i int) (Value, bool) {
	if !f.required(i) {
		return Value{}, false
	}
	return *f.val(i), true
}

// nested decodes member i as an object with its own member list.
func (f *fields) nested(i int, names []string, allowUnknown bool) *fields {
	v, _ := f.object(i)
	return f.nestedValue(i, v, names, allowUnknown)
}

func (f *fields) nestedValue(i int, v Value, names []string, allowUnknown bool) *fields {
	if f.err != nil {
		n := &fields{doc: f.doc, names: names, at: make([]int16, len(names)), err: f.err}
		for i := range n.at {
			n.at[i] = -1
		}
		return n
	}
	n := decodeObject(f.doc, f.prefix+f.names[i]+".", v, names, allowUnknown)
	return n
}

// check fails member i with reason unless ok.
func (f *fields) check(i int, ok bool, reason string) {
	if !ok {
		f.fail(i, reason)
	}
}

// join moves a nested decoder's error into its parent.
func (f *fields) join(n *fields) {
	if f.err == nil && n.err != nil {
		f.err = n.err
	}
}

func (f *fields) error() error {
	if f.err == nil {
		return nil
	}
	return f.err
}

// parseDoc parses b as one JSON text and wraps a syntax error.
func parseDoc(doc DocKind, b []byte, hook TopLevelHook) (Value, error) {
	v, err := ParseJSON(b, hook)
	if err != nil {
		if de, ok := err.(*DocError); ok {
			return Value{}, de
		}
		return Value{}, &DocError{Doc: doc, Reason: "invalid JSON", Err: err}
	}
	return v, nil
}

// lineBody checks that line ends with "\n", is at most limit bytes with it,
// and returns it without the newline.
func lineBody(doc DocKind, line []byte, limit int) ([]byte, error) {
	if len(line) > limit {
		return nil, &DocError{Doc: doc, Reason: "line exceeds the size limit", Err: ErrTooLarge}
	}
	if len(line) == 0 || line[len(line)-1] != '\n' {
		return nil, docErr(doc, "", "line is not LF-terminated")
	}
	return line[:len(line)-1], nil
}
