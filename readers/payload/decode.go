package payload

import (
	"math"
	"strconv"

	"pisess/writers/wire"
)

// The reading rules below are those of serde's derived Deserialize reading
// from its buffered Content (the reference reads the entry line into
// buffered content first, because SessionEntry is internally tagged).
// Errors raised here carry no position, as the reference's do not.
//
// Reading only checks: it walks the line's wire.Tape in the order serde
// would, so that the first refusal is the reference's, and builds nothing.
// What the reference writes for an accepted entry is written later, from
// the same tape, by write.go.

// reader holds what reading and writing an entry's tape share.
type reader struct {
	t *wire.Tape
	// lists holds member lists (each member's key node; its value is the
	// node after) and item lists (each item's node). A list is never
	// changed once made, so a slice of it stays valid when lists grows.
	lists []int
	// bound records, by key node, the struct member each member of the
	// entry was read as (binding), so that writing need not look its name
	// up again; 0 for a member read as none.
	bound []uint32
}

// binding names member i of struct s.
func binding(s *structDef, i int) uint32 { return s.id<<8 | uint32(i) }

// ownedBy reports whether member m was read as one of struct s's own,
// and as which.
func (r *reader) ownedBy(s *structDef, m int) (int, bool) {
	b := r.bound[m]
	return int(b & 0xff), b>>8 == s.id
}

// isMember reports whether member m was read as struct s's member called
// name.
func (r *reader) isMember(m int, s *structDef, name string) bool {
	i, own := r.ownedBy(s, m)
	return own && s.fields[i].name == name
}

// list makes a list of the ints of in that keep reports true for.
func (r *reader) list(in []int, keep func(int) bool) []int {
	start := len(r.lists)
	for _, x := range in {
		if keep(x) {
			r.lists = append(r.lists, x)
		}
	}
	return r.lists[start:len(r.lists):len(r.lists)]
}

// members lists the members of object node v, leaving out those called
// skip when skip is not nil.
func (r *reader) members(v int, skip *memberName) []int {
	start := len(r.lists)
	for j, k, n := v+1, 0, r.t.Len(v); k < n; j, k = r.t.Next(j+1), k+1 {
		if skip == nil || !skip.is(r.t, j) {
			r.lists = append(r.lists, j)
		}
	}
	return r.lists[start:len(r.lists):len(r.lists)]
}

// items lists the items of array node v from the first'th on.
func (r *reader) items(v int, first int) []int {
	start := len(r.lists)
	for j, k, n := v+1, 0, r.t.Len(v); k < n; j, k = r.t.Next(j), k+1 {
		if k >= first {
			r.lists = append(r.lists, j)
		}
	}
	return r.lists[start:len(r.lists):len(r.lists)]
}

// key is member m's name.
func (r *reader) key(m int) []byte { return r.t.StrBytes(m) }

// body lists the members of a struct read from object node v, or its items
// when v is an array; ok is false for any other node.
func (r *reader) body(s *structDef, v int) (k wire.Kind, list []int, ok bool) {
	switch k := r.t.Kind(v); {
	case k == wire.KindObject:
		return k, r.members(v, nil), true
	case k == wire.KindArray && !s.hasFlatten():
		return k, r.items(v, 0), true
	}
	return 0, nil, false
}

// kept lists the members that were not read as struct s's own, for its
// flattened members.
func (r *reader) kept(s *structDef, members []int) []int {
	return r.list(members, func(m int) bool { _, own := r.ownedBy(s, m); return !own })
}

// claim splits kept into the members the flattened struct st claims (by
// their names, or by what they were read as when bound is true) and those
// left for later flattened members, both in order.
func (r *reader) claim(st *structDef, kept []int, bound bool) (claimed, rest []int) {
	owns := func(m int) bool { return st.own(r.t, m) >= 0 }
	if bound {
		owns = func(m int) bool { _, own := r.ownedBy(st, m); return own }
	}
	claimed = r.list(kept, owns)
	// The rest is kept without claimed, both in order: no need to ask again.
	next := 0
	rest = r.list(kept, func(m int) bool {
		if next < len(claimed) && claimed[next] == m {
			next++
			return false
		}
		return true
	})
	return claimed, rest
}

// value is node v as a Value, for an error message.
func (r *reader) value(v int) wire.Value { return r.t.Value(v) }

// check reads node v as a member of type t.
func (r *reader) check(t *typ, v int) *Error {
	switch t.kind {
	case kString:
		if r.t.Kind(v) != wire.KindString {
			return badEntry(msgInvalidType(r.value(v), "a string"))
		}
	case kBool:
		if r.t.Kind(v) != wire.KindBool {
			return badEntry(msgInvalidType(r.value(v), "a boolean"))
		}
	case kU64, kI64, kI32, kF64:
		return r.checkNumber(t.kind, v)
	case kValue:
		// Anything.
	case kOption:
		if r.t.Kind(v) != wire.KindNull {
			return r.check(t.elem, v)
		}
	case kVec:
		if r.t.Kind(v) != wire.KindArray {
			return badEntry(msgInvalidType(r.value(v), "a sequence"))
		}
		for j, k, n := v+1, 0, r.t.Len(v); k < n; j, k = r.t.Next(j), k+1 {
			if err := r.check(t.elem, j); err != nil {
				return err
			}
		}
	case kStruct:
		k, body, ok := r.body(t.st, v)
		if !ok {
			return badEntry(msgInvalidType(r.value(v), t.st.expecting))
		}
		return r.checkStruct(t.st, k, body)
	case kTagged:
		_, err := r.checkTagged(t.en, v)
		return err
	case kUnitEnum:
		_, err := r.unitVariant(t.en, v)
		return err
	case kUserContent:
		if r.t.Kind(v) != wire.KindString && r.check(contentBlocks, v) != nil {
			return badEntry("data did not match any variant of untagged enum UserContent")
		}
	default:
		// kExtra is only ever flattened (checkMap handles it).
		return badEntry("unsupported member type")
	}
	return nil
}

var numberNames = [...]string{kU64: "u64", kI64: "i64", kI32: "i32", kF64: "f64"}

// checkNumber reads an integer- or float-typed member. Integer types take
// only integers (a float such as 1.0 or 1e3 is the wrong type; an integer
// out of range the wrong value); f64 takes any number.
func (r *reader) checkNumber(k kind, v int) *Error {
	expected := numberNames[k]
	if r.t.Kind(v) != wire.KindNumber {
		return badEntry(msgInvalidType(r.value(v), expected))
	}
	if k == kF64 {
		return nil
	}
	switch n := r.t.Number(v); n.Kind {
	case wire.NumU64:
		if (k == kI64 && n.U > math.MaxInt64) || (k == kI32 && n.U > math.MaxInt32) {
			return badEntry(msgInvalidValue(unexpectedUnsigned(n.U), expected))
		}
	case wire.NumI64:
		if k == kU64 || (k == kI32 && n.I < math.MinInt32) {
			return badEntry(msgInvalidValue(unexpectedSigned(n.I), expected))
		}
	default:
		return badEntry(msgInvalidType(r.value(v), expected))
	}
	return nil
}

// checkStruct reads a struct from a map's members or, for a struct without
// flattened members, from a sequence's items (serde's visit_seq); k says
// which body is.
func (r *reader) checkStruct(s *structDef, k wire.Kind, body []int) *Error {
	switch {
	case k == wire.KindObject:
		return r.checkMap(s, body)
	case k == wire.KindArray && !s.hasFlatten():
		return r.checkSeq(s, body)
	}
	return badEntry(msgInvalidType(wire.Value{Kind: k}, s.expecting))
}

// maxFields bounds the members of the model's structs, so that reading
// one needs no allocation.
const maxFields = 12

// checkMap walks the members in order: a member of the struct's own is
// read at once (a second occurrence is a duplicate), others are ignored or,
// when the struct flattens something, kept for the flattened members. Then
// missing own members are checked in declaration order, then the flattened
// members are read, in declaration order, from what was kept.
func (r *reader) checkMap(s *structDef, members []int) *Error {
	var seenBuf [maxFields]bool
	seen := seenBuf[:0]
	if len(s.fields) > maxFields {
		seen = make([]bool, 0, len(s.fields))
	}
	seen = seen[:len(s.fields)]
	for _, m := range members {
		i := s.own(r.t, m)
		if i < 0 {
			continue
		}
		if seen[i] {
			return badEntry(msgDuplicateField(string(r.key(m))))
		}
		if err := r.check(s.fields[i].t, m+1); err != nil {
			return err
		}
		seen[i] = true
		r.bound[m] = binding(s, i)
	}
	for i, f := range s.fields {
		if !f.flatten && !seen[i] && !f.dflt && f.t.kind != kOption {
			return badEntry(msgMissingField(f.name))
		}
	}
	if !s.hasFlatten() {
		return nil
	}
	kept := r.kept(s, members)
	for _, f := range s.fields {
		if !f.flatten || f.t.kind == kExtra {
			// Extra members are free-form: any value will do.
			continue
		}
		// A flattened struct claims the kept members it knows, in order;
		// what it claims is no longer there for later flattened members.
		var claimed []int
		claimed, kept = r.claim(f.t.st, kept, false)
		if err := r.checkMap(f.t.st, claimed); err != nil {
			return err
		}
	}
	return nil
}

// checkSeq reads a struct from a sequence: its members in declaration
// order, no more and no fewer (a defaulted member may be left out at the
// end).
func (r *reader) checkSeq(s *structDef, items []int) *Error {
	n := len(s.fields)
	for i, f := range s.fields {
		if i >= len(items) {
			if !f.dflt {
				return badEntry(msgInvalidLength(i, s.expecting+" with "+plural(n, "element")))
			}
			continue
		}
		if err := r.check(f.t, items[i]); err != nil {
			return err
		}
	}
	if len(items) > n {
		return badEntry(msgInvalidLength(len(items), plural(n, "element")+" in sequence"))
	}
	return nil
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

// checkTagged reads an internally tagged enum from buffered content: a map
// whose tag member names the variant (the rest is the variant's body), or
// a sequence whose first element does. It returns the variant.
func (r *reader) checkTagged(e *enumDef, v int) (int, *Error) {
	idx, k, body, err := r.tagged(e, v)
	if err != nil {
		return -1, err
	}
	return idx, r.checkStruct(e.variants[idx].body, k, body)
}

// tagged finds an internally tagged enum's variant and lists its body
// (members of kind object, or items of kind array).
func (r *reader) tagged(e *enumDef, v int) (idx int, k wire.Kind, body []int, err *Error) {
	switch k = r.t.Kind(v); k {
	case wire.KindObject:
		idx = -1
		for j, n, members := v+1, 0, r.t.Len(v); n < members; j, n = r.t.Next(j+1), n+1 {
			if !e.tagKey.is(r.t, j) {
				continue
			}
			if idx >= 0 {
				return -1, 0, nil, badEntry(msgDuplicateField(e.tag))
			}
			i, err := r.contentVariant(e, j+1)
			if err != nil {
				return -1, 0, nil, err
			}
			idx = i
		}
		if idx < 0 {
			return -1, 0, nil, badEntry(msgMissingField(e.tag))
		}
		return idx, k, r.members(v, &e.tagKey), nil
	case wire.KindArray:
		if r.t.Len(v) == 0 {
			return -1, 0, nil, badEntry(msgMissingField(e.tag))
		}
		idx, err := r.contentVariant(e, v+1)
		if err != nil {
			return -1, 0, nil, err
		}
		return idx, k, r.items(v, 1), nil
	}
	return -1, 0, nil, badEntry(msgInvalidType(r.value(v), "internally tagged enum "+e.name))
}

// contentVariant reads a variant name from buffered content, where serde
// also takes a variant's index as an unsigned integer.
func (r *reader) contentVariant(e *enumDef, v int) (int, *Error) {
	switch r.t.Kind(v) {
	case wire.KindString:
		if i := e.lookup(r.t.StrBytes(v)); i >= 0 {
			return i, nil
		}
		return -1, &Error{Class: e.unknownClass, Detail: msgUnknownVariant(r.t.Str(v), e.names())}
	case wire.KindNumber:
		if n := r.t.Number(v); n.Kind == wire.NumU64 {
			if n.U < uint64(len(e.variants)) {
				return int(n.U), nil
			}
			return -1, badEntry(msgInvalidValue(unexpectedUnsigned(n.U),
				"variant index 0 <= i < "+strconv.Itoa(len(e.variants))))
		}
	}
	return -1, badEntry(msgInvalidType(r.value(v), "variant identifier"))
}

// unitVariant reads an enum of unit variants (StopReason): a string naming
// the variant, or a map with that single key and a null (or empty map)
// value.
func (r *reader) unitVariant(e *enumDef, v int) (int, *Error) {
	var name int // the node of the name
	switch r.t.Kind(v) {
	case wire.KindString:
		name = v
	case wire.KindObject:
		if r.t.Len(v) != 1 {
			return -1, badEntry(msgInvalidValue("map", "map with a single key"))
		}
		name = v + 1
	default:
		return -1, badEntry(msgInvalidType(r.value(v), "string or map"))
	}
	i := e.lookup(r.t.StrBytes(name))
	if i < 0 {
		return -1, &Error{Class: e.unknownClass, Detail: msgUnknownVariant(r.t.Str(name), e.names())}
	}
	if name != v {
		u := v + 2
		if k := r.t.Kind(u); k != wire.KindNull && (k != wire.KindObject || r.t.Len(u) != 0) {
			return -1, badEntry(msgInvalidType(r.value(u), "unit"))
		}
	}
	return i, nil
}
