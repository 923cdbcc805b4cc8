package payload

import (
	"bytes"
	"cmp"
	"slices"

	"pisess/writers/wire"
)

// The writing rules below are those of serde's derived Serialize: a struct
// is written in declaration order, tags first, flattened members in place,
// an Option that is None skipped or written as null, a defaulted member
// that was absent written with its default; free-form values are written
// with their keys sorted, as the reference's Value holds them. That is the
// typed serialization; the canonical payload is the same with every
// object's keys sorted (FORMAT.md §2). Both are written straight from the
// tape of an entry that reading accepted: nothing can fail here.

// order is how a writer lays out the members of the objects it writes.
type order uint8

const (
	typedOrder     order = iota // declaration order, as the typed model writes
	canonicalOrder              // keys sorted in byte order
)

// writer writes one accepted entry.
type writer struct {
	reader
	order order
	// outs is a stack of the members of the objects being written: each
	// object gathers its members on top, writes them, and pops them.
	outs []out
	// id and parentID replace the entry's own (Entry.SetID, SetParent);
	// skipID leaves the id out (Entry.LegacyID hashes the entry so).
	id, parentID *string
	skipID       bool
}

// out is one member of an object being written: its key, and its value,
// node read as type t, or else the JSON lit.
type out struct {
	// key is the member's name, a model name; nil for an extra member of
	// a bashExecution message, whose name is the key node before node.
	key  *memberName
	node int
	t    *typ
	lit  string
}

// writeEntry writes the entry at the root of the tape, of variant idx.
func (w *writer) writeEntry(dst []byte, idx int) []byte {
	base := len(w.outs)
	w.variant(sessionEntry, idx, wire.KindObject, w.members(0, &sessionEntry.tagKey), true)
	return w.object(dst, base)
}

// object writes the members gathered since base as an object, in the
// writer's order, and pops them.
func (w *writer) object(dst []byte, base int) []byte {
	end := len(w.outs)
	// The order is of indices, not of the members themselves: moving those
	// (with their pointers) costs more, write barriers included.
	var small [maxFields + 4]int
	order := small[:0]
	for i := base; i < end; i++ {
		order = append(order, i)
	}
	if w.order == canonicalOrder {
		w.sortOuts(order)
	}
	dst = append(dst, '{')
	first := true
	for k, i := range order {
		// Writing a value may grow w.outs, and move it: index it afresh.
		if w.order == canonicalOrder && k+1 < len(order) && w.compare(order[k+1], i) == 0 {
			continue // a later duplicate wins (the typed model writes none)
		}
		if !first {
			dst = append(dst, ',')
		}
		first = false
		if key := w.outs[i].key; key != nil {
			dst = append(dst, key.label...)
		} else {
			dst = append(w.t.AppendString(dst, w.outs[i].node-1), ':')
		}
		if t := w.outs[i].t; t != nil {
			dst = w.value(dst, t, w.outs[i].node)
		} else {
			dst = append(dst, w.outs[i].lit...)
		}
	}
	w.outs = w.outs[:base]
	return append(dst, '}')
}

// sortOuts sorts members (indices in w.outs) by key, stably.
func (w *writer) sortOuts(order []int) {
	if len(order) == 0 {
		return
	}
	// Model names only (always but for a bashExecution message's extra
	// members): sort their ranks, each with its place below it, so that
	// equal ranks stay in order. An object has a dozen members at most.
	for _, i := range order {
		if w.outs[i].key == nil {
			w.sortOutsByName(order)
			return
		}
	}
	base := order[0]
	for k, i := range order {
		order[k] = w.outs[i].key.rank<<16 | (i - base)
	}
	insertionSort(order, func(a, b int) bool { return a < b })
	for k := range order {
		order[k] = base + order[k]&0xffff
	}
}

// sortOutsByName is sortOuts comparing names.
func (w *writer) sortOutsByName(order []int) {
	insertionSort(order, func(a, b int) bool { return w.compare(a, b) < 0 })
}

// insertionSort sorts s stably: short, and quick on the few items here.
func insertionSort(s []int, less func(a, b int) bool) {
	for i := 1; i < len(s); i++ {
		x := s[i]
		j := i
		for ; j > 0 && less(x, s[j-1]); j-- {
			s[j] = s[j-1]
		}
		s[j] = x
	}
}

// compare compares the keys of members a and b (indices in w.outs) in byte
// order: by rank for model names, as strings otherwise.
func (w *writer) compare(a, b int) int {
	ka, kb := w.outs[a].key, w.outs[b].key
	if ka != nil && kb != nil {
		return cmp.Compare(ka.rank, kb.rank)
	}
	return bytes.Compare(w.keyOf(a), w.keyOf(b))
}

func (w *writer) keyOf(i int) []byte {
	if k := w.outs[i].key; k != nil {
		return []byte(k.text)
	}
	return w.key(w.outs[i].node - 1)
}

// value writes node v, read as type t.
func (w *writer) value(dst []byte, t *typ, v int) []byte {
	switch t.kind {
	case kString:
		return w.t.AppendString(dst, v)
	case kBool:
		if w.t.Bool(v) {
			return append(dst, "true"...)
		}
		return append(dst, "false"...)
	case kF64:
		n := w.t.Number(v)
		switch n.Kind {
		case wire.NumU64:
			n.F = float64(n.U)
		case wire.NumI64:
			n.F = float64(n.I)
		}
		return wire.AppendFloat(dst, n.F)
	case kU64, kI64, kI32:
		return wire.AppendNumber(dst, w.t.Number(v))
	case kValue:
		return w.t.AppendCanonical(dst, v)
	case kOption:
		if w.t.Kind(v) == wire.KindNull {
			return append(dst, "null"...) // only an item of a Vec<Option>
		}
		return w.value(dst, t.elem, v)
	case kVec:
		dst = append(dst, '[')
		for j, k, n := v+1, 0, w.t.Len(v); k < n; j, k = w.t.Next(j), k+1 {
			if k > 0 {
				dst = append(dst, ',')
			}
			dst = w.value(dst, t.elem, j)
		}
		return append(dst, ']')
	case kStruct:
		base := len(w.outs)
		k, body, _ := w.body(t.st, v)
		w.structBody(t.st, k, body, false)
		return w.object(dst, base)
	case kTagged:
		base := len(w.outs)
		idx, k, body, _ := w.tagged(t.en, v)
		w.variant(t.en, idx, k, body, false)
		return w.object(dst, base)
	case kUnitEnum:
		i, _ := w.unitVariant(t.en, v)
		return append(dst, t.en.lits[i]...)
	case kUserContent:
		if w.t.Kind(v) == wire.KindString {
			return w.t.AppendString(dst, v)
		}
		return w.value(dst, contentBlocks, v)
	}
	return dst
}

// variant gathers variant idx of e: its tag, then its body's members.
func (w *writer) variant(e *enumDef, idx int, k wire.Kind, body []int, top bool) {
	w.outs = append(w.outs, out{key: &e.tagKey, lit: e.lits[idx]})
	w.structBody(e.variants[idx].body, k, body, top)
}

// structBody gathers the members of struct s read from body (members of an
// object, or items of an array). top is true for the entry's own struct,
// whose flattened EntryBase holds the id and parentId.
func (w *writer) structBody(s *structDef, k wire.Kind, body []int, top bool) {
	var slotBuf [maxFields]int
	slots := slotBuf[:0]
	if len(s.fields) > maxFields {
		slots = make([]int, 0, len(s.fields))
	}
	slots = slots[:len(s.fields)]
	for i := range slots {
		slots[i] = -1
	}
	if k == wire.KindArray {
		for i := range s.fields {
			if i < len(body) {
				slots[i] = body[i]
			}
		}
		w.gather(s, slots, nil, top)
		return
	}
	for _, m := range body {
		if i, own := w.ownedBy(s, m); own {
			slots[i] = m + 1
		}
	}
	w.gather(s, slots, body, top)
}

// gather adds the members of struct s in declaration order: slots holds
// each own member's node (-1 when absent), members the struct's members
// when it was read from a map (for its flattened members).
func (w *writer) gather(s *structDef, slots []int, members []int, top bool) {
	var kept []int
	if s.hasFlatten() {
		kept = w.kept(s, members)
	}
	for i := range s.fields {
		f := &s.fields[i]
		if f.flatten {
			if f.t.kind == kExtra {
				w.extra(kept)
				continue
			}
			var claimed []int
			claimed, kept = w.claim(f.t.st, kept, true)
			w.structBody(f.t.st, wire.KindObject, claimed, top)
			continue
		}
		if top && s == entryBase {
			// The entry's own id and parent, which the caller may replace.
			if set, ok := w.override(f.name); ok {
				if set != nil {
					w.outs = append(w.outs, out{key: &f.key, lit: string(wire.AppendString(nil, *set))})
				}
				continue
			}
		}
		v := slots[i]
		switch {
		case v >= 0 && f.t.kind == kOption && w.t.Kind(v) == wire.KindNull,
			v < 0 && (f.t.kind == kOption || f.dflt && f.t.kind != kBool):
			// None.
			if !f.skipNone {
				w.outs = append(w.outs, out{key: &f.key, lit: "null"})
			}
		case v < 0:
			w.outs = append(w.outs, out{key: &f.key, lit: "false"}) // a defaulted bool
		default:
			w.outs = append(w.outs, out{key: &f.key, t: f.t, node: v})
		}
	}
}

// override tells how the entry's id or parentId member is written when
// the caller replaced or dropped it: set is the value (nil: left out), ok
// false when the member is written as read.
func (w *writer) override(name string) (set *string, ok bool) {
	switch name {
	case "id":
		if w.skipID {
			return nil, true
		}
		return w.id, w.id != nil
	case "parentId":
		return w.parentID, w.parentID != nil
	}
	return nil, false
}

// extra adds the kept members as a map of free-form values: sorted by key,
// the last of duplicates winning. The reference holds them in a HashMap
// and writes them in its unspecified order.
func (w *writer) extra(kept []int) {
	sorted := w.list(kept, func(int) bool { return true })
	slices.SortStableFunc(sorted, func(a, b int) int { return cmp.Compare(string(w.key(a)), string(w.key(b))) })
	for i, m := range sorted {
		if i+1 < len(sorted) && string(w.key(sorted[i+1])) == string(w.key(m)) {
			continue
		}
		w.outs = append(w.outs, out{t: tValue, node: m + 1})
	}
}

// extraMembers returns the names of the extra members the entry's
// bashExecution message keeps (its flattened HashMap), sorted; nil for
// any other entry.
func (e *Entry) extraMembers() []string {
	w := e.writer(typedOrder)
	defer e.done(&w)
	w.variant(sessionEntry, e.variant, wire.KindObject, w.members(0, &sessionEntry.tagKey), true)
	top := len(w.outs)
	for _, m := range w.outs[:top] {
		if m.key == nil || m.key.text != "message" || m.t == nil {
			continue
		}
		idx, k, body, _ := w.tagged(sessionMessage.en, m.node)
		w.structBody(sessionMessage.en.variants[idx].body, k, body, false)
		var names []string
		for _, f := range w.outs[top:] {
			if f.key == nil {
				names = append(names, w.t.Str(f.node-1))
			}
		}
		return names
	}
	return nil
}
