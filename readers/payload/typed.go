package payload

import (
	"bytes"

	"pisess/writers/wire"
)

// typed is an accepted entry as the reference serializes it, kept in a form
// that is cheap to build and to write both ways (struct order for Typed,
// keys sorted for Canonical): a tree of nodes whose leaves are already
// written JSON in buf. Free-form values are leaves too, written with their
// keys sorted when they are read, since both forms write them so. Nodes
// name their children by index in kids, and hold no pointer but a member's
// key, so an entry is a handful of allocations whatever its size.
type typed struct {
	buf   []byte // the leaves' JSON
	nodes []tnode
	kids  []int // each container's children, a run per container
	root  int
}

type tnodeKind uint8

const (
	tLeaf tnodeKind = iota
	tObject
	tArray
)

type tnode struct {
	kind tnodeKind
	// key is the member name when the node is an object's member; model
	// names are the model's own strings, so this allocates only for the
	// extra members of a bashExecution message.
	key string
	// start and end span a leaf's JSON in buf, or a container's children
	// in kids.
	start, end int
}

func (w *typed) children(n int) []int { return w.kids[w.nodes[n].start:w.nodes[n].end] }

// leaf adds a leaf whose JSON is buf[start:], just written.
func (w *typed) leaf(start int) int {
	w.nodes = append(w.nodes, tnode{kind: tLeaf, start: start, end: len(w.buf)})
	return len(w.nodes) - 1
}

// literal adds a leaf holding s, which is JSON.
func (w *typed) literal(s string) int {
	start := len(w.buf)
	w.buf = append(w.buf, s...)
	return w.leaf(start)
}

// str adds a string leaf.
func (w *typed) str(s string) int {
	start := len(w.buf)
	w.buf = wire.AppendString(w.buf, s)
	return w.leaf(start)
}

// container adds an object or array of the given children (members carry
// their keys).
func (w *typed) container(k tnodeKind, children []int) int {
	start := len(w.kids)
	w.kids = append(w.kids, children...)
	w.nodes = append(w.nodes, tnode{kind: k, start: start, end: len(w.kids)})
	return len(w.nodes) - 1
}

// member names node n as a member called key, and returns it.
func (w *typed) member(key string, n int) int {
	w.nodes[n].key = key
	return n
}

// appendTyped writes node n in struct order; skip names a member of n not
// to write ("" for none).
func (w *typed) appendTyped(dst []byte, n int, skip string) []byte {
	nd := &w.nodes[n]
	switch nd.kind {
	case tLeaf:
		return append(dst, w.buf[nd.start:nd.end]...)
	case tArray:
		dst = append(dst, '[')
		for i, c := range w.children(n) {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = w.appendTyped(dst, c, "")
		}
		return append(dst, ']')
	}
	dst = append(dst, '{')
	first := true
	for _, c := range w.children(n) {
		if skip != "" && w.nodes[c].key == skip {
			continue
		}
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = wire.AppendString(dst, w.nodes[c].key)
		dst = append(dst, ':')
		dst = w.appendTyped(dst, c, "")
	}
	return append(dst, '}')
}

// appendCanonical writes node n with object keys sorted in byte order,
// the last of duplicates winning (the typed model writes none, but this is
// what the reference's Value would hold).
func (w *typed) appendCanonical(dst []byte, n int) []byte {
	nd := &w.nodes[n]
	switch nd.kind {
	case tLeaf:
		return append(dst, w.buf[nd.start:nd.end]...)
	case tArray:
		dst = append(dst, '[')
		for i, c := range w.children(n) {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = w.appendCanonical(dst, c)
		}
		return append(dst, ']')
	}
	var small [16]int
	order := append(small[:0], w.children(n)...)
	w.sortMembers(order)
	dst = append(dst, '{')
	first := true
	for i, c := range order {
		if i+1 < len(order) && w.nodes[order[i+1]].key == w.nodes[c].key {
			continue // a later duplicate wins
		}
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = wire.AppendString(dst, w.nodes[c].key)
		dst = append(dst, ':')
		dst = w.appendCanonical(dst, c)
	}
	return append(dst, '}')
}

// sortMembers sorts member nodes by key, stably: insertion sort, for a
// struct has a dozen members at most (a bashExecution message's extra
// members come sorted already).
func (w *typed) sortMembers(order []int) {
	for i := 1; i < len(order); i++ {
		x := order[i]
		j := i
		for ; j > 0 && w.nodes[order[j-1]].key > w.nodes[x].key; j-- {
			order[j] = order[j-1]
		}
		order[j] = x
	}
}

// size is the length of node n written (either way).
func (w *typed) size(n int) int {
	nd := &w.nodes[n]
	if nd.kind == tLeaf {
		return nd.end - nd.start
	}
	size := 2 + max(nd.end-nd.start-1, 0) // brackets and commas
	for _, c := range w.children(n) {
		size += w.size(c)
		if nd.kind == tObject {
			size += len(w.nodes[c].key) + 3 // quotes and colon, escapes aside
		}
	}
	return size
}

// memberValue returns the member of object n called key, or -1.
func (w *typed) memberValue(n int, key string) int {
	for _, c := range w.children(n) {
		if w.nodes[c].key == key {
			return c
		}
	}
	return -1
}

// leafString returns a string leaf's value; ok is false for any other
// node.
func (w *typed) leafString(n int) (s string, ok bool) {
	nd := &w.nodes[n]
	b := w.buf[nd.start:nd.end]
	if nd.kind != tLeaf || len(b) < 2 || b[0] != '"' {
		return "", false
	}
	if bytes.IndexByte(b, '\\') < 0 {
		return string(b[1 : len(b)-1]), true
	}
	v, err := wire.ParseJSON(b, nil) // written by wire.AppendString: always valid
	return v.Str, err == nil
}

// leafName returns the name of names that string leaf n holds, or "".
// It allocates nothing: the names are the model's.
func (w *typed) leafName(n int, names []variant) string {
	nd := &w.nodes[n]
	b := w.buf[nd.start:nd.end]
	if nd.kind != tLeaf || len(b) < 2 || b[0] != '"' {
		return ""
	}
	for _, v := range names {
		// Variant names hold nothing that is escaped.
		if string(b[1:len(b)-1]) == v.name {
			return v.name
		}
	}
	return ""
}
