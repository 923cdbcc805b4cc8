package payload

import (
	"math"
	"sort"
	"strconv"

	"pisess/writers/wire"
)

// The reading rules below are those of serde's derived Deserialize reading
// from its buffered Content (the reference reads the entry line into
// buffered content first, because SessionEntry is internally tagged), and
// the writing rules those of its derived Serialize. Errors raised here carry
// no position, as the reference's do not.
//
// What is decoded is written straight away as a wire.Value in the
// reference's serialization order (struct declaration order, tags first,
// flattened members in place), with free-form values key-sorted: the typed
// serialization. Sorting that value's keys gives the canonical payload.

// decoder carries what decoding learns besides the value itself.
type decoder struct {
	// extraKeys are the member names a flattened HashMap kept (the extra
	// members of a bashExecution message), sorted.
	extraKeys []string
}

// decode reads v as a member of type t. present is false for an Option that
// is None (null).
func (d *decoder) decode(t *typ, v wire.Value) (out wire.Value, present bool, err *Error) {
	switch t.kind {
	case kString:
		if v.Kind != wire.KindString {
			return out, false, badEntry(msgInvalidType(v, "a string"))
		}
		return v, true, nil
	case kBool:
		if v.Kind != wire.KindBool {
			return out, false, badEntry(msgInvalidType(v, "a boolean"))
		}
		return v, true, nil
	case kU64, kI64, kI32, kF64:
		out, err = number(t.kind, v)
		return out, err == nil, err
	case kValue:
		return wire.SortKeys(v), true, nil
	case kOption:
		if v.Kind == wire.KindNull {
			return out, false, nil
		}
		return d.decode(t.elem, v)
	case kVec:
		if v.Kind != wire.KindArray {
			return out, false, badEntry(msgInvalidType(v, "a sequence"))
		}
		items := make([]wire.Value, 0, len(v.Arr))
		for _, item := range v.Arr {
			x, _, err := d.decode(t.elem, item)
			if err != nil {
				return out, false, err
			}
			items = append(items, x)
		}
		return wire.Array(items...), true, nil
	case kStruct:
		out, err = d.structValue(t.st, v)
		return out, err == nil, err
	case kTagged:
		out, err = d.tagged(t.en, v)
		return out, err == nil, err
	case kUnitEnum:
		out, err = unitEnum(t.en, v)
		return out, err == nil, err
	case kUserContent:
		out, err = d.userContent(v)
		return out, err == nil, err
	}
	// kExtra is only ever flattened (structMap handles it).
	return out, false, badEntry("unsupported member type")
}

var numberNames = [...]string{kU64: "u64", kI64: "i64", kI32: "i32", kF64: "f64"}

// number reads an integer- or float-typed member. Integer types take only
// integers (a float such as 1.0 or 1e3 is the wrong type; an integer out of
// range the wrong value); f64 takes any number and is written as a float.
func number(k kind, v wire.Value) (wire.Value, *Error) {
	expected := numberNames[k]
	if v.Kind != wire.KindNumber {
		return wire.Value{}, badEntry(msgInvalidType(v, expected))
	}
	n := v.Num
	if k == kF64 {
		switch n.Kind {
		case wire.NumU64:
			return wire.F64(float64(n.U)), nil
		case wire.NumI64:
			return wire.F64(float64(n.I)), nil
		}
		return v, nil
	}
	switch n.Kind {
	case wire.NumU64:
		if (k == kI64 && n.U > math.MaxInt64) || (k == kI32 && n.U > math.MaxInt32) {
			return wire.Value{}, badEntry(msgInvalidValue(unexpectedUnsigned(n.U), expected))
		}
		return v, nil
	case wire.NumI64:
		if k == kU64 || (k == kI32 && n.I < math.MinInt32) {
			return wire.Value{}, badEntry(msgInvalidValue(unexpectedSigned(n.I), expected))
		}
		return v, nil
	}
	return wire.Value{}, badEntry(msgInvalidType(v, expected))
}

// structValue reads a struct from a map, or, for a struct without flattened
// members, from a sequence of its members in order (serde's visit_seq).
func (d *decoder) structValue(s *structDef, v wire.Value) (wire.Value, *Error) {
	var members []wire.Member
	var err *Error
	switch {
	case v.Kind == wire.KindObject:
		members, err = d.structMap(s, v.Obj)
	case v.Kind == wire.KindArray && !s.hasFlatten():
		members, err = d.structSeq(s, v.Arr)
	default:
		return wire.Value{}, badEntry(msgInvalidType(v, s.expecting))
	}
	if err != nil {
		return wire.Value{}, err
	}
	return wire.Object(members...), nil
}

// slot is one struct member as read.
type slot struct {
	seen    bool
	present bool
	v       wire.Value
}

// structMap walks the members in order: a member of the struct's own is
// read at once (a second occurrence is a duplicate), others are ignored or,
// when the struct flattens something, kept for the flattened members. Then
// missing own members are checked in declaration order, then the flattened
// members are read, in declaration order, from what was kept.
func (d *decoder) structMap(s *structDef, members []wire.Member) ([]wire.Member, *Error) {
	slots := make([]slot, len(s.fields))
	flatten := s.hasFlatten()
	var kept []wire.Member
	for _, m := range members {
		i := s.own(m.Key)
		if i < 0 {
			if flatten {
				kept = append(kept, m)
			}
			continue
		}
		if slots[i].seen {
			return nil, badEntry(msgDuplicateField(m.Key))
		}
		v, present, err := d.decode(s.fields[i].t, m.Value)
		if err != nil {
			return nil, err
		}
		slots[i] = slot{seen: true, present: present, v: v}
	}
	for i, f := range s.fields {
		if f.flatten || slots[i].seen {
			continue
		}
		if err := missing(f, &slots[i]); err != nil {
			return nil, err
		}
	}
	flat := make([][]wire.Member, len(s.fields))
	taken := make([]bool, len(kept))
	for i, f := range s.fields {
		if !f.flatten {
			continue
		}
		if f.t.kind == kExtra {
			flat[i] = d.extra(kept, taken)
			continue
		}
		// A flattened struct claims the kept members it knows, in order;
		// what it claims is no longer there for later flattened members.
		var claimed []wire.Member
		for j, m := range kept {
			if !taken[j] && f.t.st.own(m.Key) >= 0 {
				taken[j] = true
				claimed = append(claimed, m)
			}
		}
		sub, err := d.structMap(f.t.st, claimed)
		if err != nil {
			return nil, err
		}
		flat[i] = sub
	}
	return write(s, slots, flat), nil
}

// missing fills in a member absent from a map (or a short sequence): its
// default, None for an Option, else the member is missing.
func missing(f field, sl *slot) *Error {
	switch {
	case f.dflt && f.t.kind == kBool:
		*sl = slot{seen: true, present: true, v: wire.Bool(false)}
	case f.dflt || f.t.kind == kOption:
		*sl = slot{seen: true}
	default:
		return badEntry(msgMissingField(f.name))
	}
	return nil
}

// structSeq reads a struct from a sequence: its members in declaration
// order, no more and no fewer (a defaulted member may be left out at the
// end).
func (d *decoder) structSeq(s *structDef, items []wire.Value) ([]wire.Member, *Error) {
	slots := make([]slot, len(s.fields))
	n := len(s.fields)
	for i, f := range s.fields {
		if i >= len(items) {
			if !f.dflt {
				return nil, badEntry(msgInvalidLength(i, s.expecting+" with "+plural(n, "element")))
			}
			if err := missing(f, &slots[i]); err != nil {
				return nil, err
			}
			continue
		}
		v, present, err := d.decode(f.t, items[i])
		if err != nil {
			return nil, err
		}
		slots[i] = slot{seen: true, present: present, v: v}
	}
	if len(items) > n {
		return nil, badEntry(msgInvalidLength(len(items), plural(n, "element")+" in sequence"))
	}
	return write(s, slots, nil), nil
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

// write lays out a read struct as the reference serializes it: declaration
// order, flattened members in place, a None skipped or written as null.
func write(s *structDef, slots []slot, flat [][]wire.Member) []wire.Member {
	out := []wire.Member{}
	for i, f := range s.fields {
		switch {
		case f.flatten:
			out = append(out, flat[i]...)
		case slots[i].present:
			out = append(out, wire.Member{Key: f.name, Value: slots[i].v})
		case !f.skipNone:
			out = append(out, wire.Member{Key: f.name, Value: wire.Null()})
		}
	}
	return out
}

// extra reads the kept members no flattened struct claimed into a map of
// free-form values (last duplicate wins). The reference holds them in a
// HashMap and writes them in its unspecified order; they are written here
// sorted by key.
func (d *decoder) extra(kept []wire.Member, taken []bool) []wire.Member {
	last := map[string]wire.Value{}
	for j, m := range kept {
		if !taken[j] {
			last[m.Key] = wire.SortKeys(m.Value)
		}
	}
	keys := make([]string, 0, len(last))
	for k := range last {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]wire.Member, 0, len(keys))
	for _, k := range keys {
		out = append(out, wire.Member{Key: k, Value: last[k]})
	}
	d.extraKeys = keys
	return out
}

// tagged reads an internally tagged enum from buffered content: a map whose
// tag member names the variant (the rest is the variant's body), or a
// sequence whose first element does.
func (d *decoder) tagged(e *enumDef, v wire.Value) (wire.Value, *Error) {
	idx := -1
	var body wire.Value
	switch v.Kind {
	case wire.KindObject:
		rest := []wire.Member{}
		for _, m := range v.Obj {
			if m.Key != e.tag {
				rest = append(rest, m)
				continue
			}
			if idx >= 0 {
				return wire.Value{}, badEntry(msgDuplicateField(e.tag))
			}
			i, err := contentVariant(e, m.Value)
			if err != nil {
				return wire.Value{}, err
			}
			idx = i
		}
		if idx < 0 {
			return wire.Value{}, badEntry(msgMissingField(e.tag))
		}
		body = wire.Object(rest...)
	case wire.KindArray:
		if len(v.Arr) == 0 {
			return wire.Value{}, badEntry(msgMissingField(e.tag))
		}
		i, err := contentVariant(e, v.Arr[0])
		if err != nil {
			return wire.Value{}, err
		}
		idx = i
		body = wire.Array(v.Arr[1:]...)
	default:
		return wire.Value{}, badEntry(msgInvalidType(v, "internally tagged enum "+e.name))
	}
	return d.variantBody(e, idx, body)
}

// variantBody reads variant idx's body and writes the tag first.
func (d *decoder) variantBody(e *enumDef, idx int, body wire.Value) (wire.Value, *Error) {
	st, err := d.structValue(e.variants[idx].body, body)
	if err != nil {
		return wire.Value{}, err
	}
	members := make([]wire.Member, 0, len(st.Obj)+1)
	members = append(members, wire.Member{Key: e.tag, Value: wire.String(e.variants[idx].name)})
	members = append(members, st.Obj...)
	return wire.Object(members...), nil
}

// contentVariant reads a variant name from buffered content, where serde
// also takes a variant's index as an unsigned integer.
func contentVariant(e *enumDef, v wire.Value) (int, *Error) {
	switch {
	case v.Kind == wire.KindString:
		if i := e.lookup(v.Str); i >= 0 {
			return i, nil
		}
		return -1, &Error{Class: e.unknownClass, Detail: msgUnknownVariant(v.Str, e.names())}
	case v.Kind == wire.KindNumber && v.Num.Kind == wire.NumU64:
		if v.Num.U < uint64(len(e.variants)) {
			return int(v.Num.U), nil
		}
		return -1, badEntry(msgInvalidValue(unexpectedUnsigned(v.Num.U),
			"variant index 0 <= i < "+strconv.Itoa(len(e.variants))))
	}
	return -1, badEntry(msgInvalidType(v, "variant identifier"))
}

// unitEnum reads an enum of unit variants (StopReason): a string naming the
// variant, or a map with that single key and a null (or empty map) value.
func unitEnum(e *enumDef, v wire.Value) (wire.Value, *Error) {
	var name string
	switch v.Kind {
	case wire.KindString:
		name = v.Str
	case wire.KindObject:
		if len(v.Obj) != 1 {
			return wire.Value{}, badEntry(msgInvalidValue("map", "map with a single key"))
		}
		name = v.Obj[0].Key
	default:
		return wire.Value{}, badEntry(msgInvalidType(v, "string or map"))
	}
	i := e.lookup(name)
	if i < 0 {
		return wire.Value{}, &Error{Class: e.unknownClass, Detail: msgUnknownVariant(name, e.names())}
	}
	if v.Kind == wire.KindObject {
		u := v.Obj[0].Value
		if u.Kind != wire.KindNull && (u.Kind != wire.KindObject || len(u.Obj) != 0) {
			return wire.Value{}, badEntry(msgInvalidType(u, "unit"))
		}
	}
	return wire.String(e.variants[i].name), nil
}

// userContent reads the untagged enum UserContent: a string, else a
// sequence of content blocks; any failure of both is one message.
func (d *decoder) userContent(v wire.Value) (wire.Value, *Error) {
	if v.Kind == wire.KindString {
		return v, nil
	}
	if out, _, err := d.decode(seqOf(contentBlock), v); err == nil {
		return out, nil
	}
	return wire.Value{}, badEntry("data did not match any variant of untagged enum UserContent")
}
