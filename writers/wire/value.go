package wire

import "math"

// Kind is the JSON type of a Value.
type Kind uint8

const (
	KindNull Kind = iota
	KindBool
	KindNumber
	KindString
	KindArray
	KindObject
)

func (k Kind) String() string {
	switch k {
	case KindNull:
		return "null"
	case KindBool:
		return "boolean"
	case KindNumber:
		return "number"
	case KindString:
		return "string"
	case KindArray:
		return "array"
	case KindObject:
		return "object"
	}
	return "invalid"
}

// NumKind tells how the reference's JSON library holds a parsed number:
// a non-negative integer that fits in 64 bits is a u64, a negative one that
// fits is an i64, everything else (fractions, exponents, integers too large,
// and the integer -0) is an f64.
type NumKind uint8

const (
	NumU64 NumKind = iota
	NumI64
	NumF64
)

// Number is a parsed JSON number in the reference's representation.
type Number struct {
	Kind NumKind
	U    uint64
	I    int64
	F    float64
}

// Member is one object member. Objects keep members in source order with
// duplicates, as serde's buffered content does; whoever interprets the
// object decides whether a duplicate is an error (typed structs) or the last
// one wins (free-form values).
type Member struct {
	Key   string
	Value Value
}

// Value is a JSON value as the reference's parser sees it.
type Value struct {
	Kind Kind
	Bool bool
	Num  Number
	Str  string
	Arr  []Value
	Obj  []Member
}

// Convenience constructors.
func Null() Value           { return Value{Kind: KindNull} }
func Bool(b bool) Value     { return Value{Kind: KindBool, Bool: b} }
func String(s string) Value { return Value{Kind: KindString, Str: s} }
func U64(u uint64) Value    { return Value{Kind: KindNumber, Num: Number{Kind: NumU64, U: u}} }
func I64(i int64) Value {
	if i >= 0 {
		return U64(uint64(i))
	}
	return Value{Kind: KindNumber, Num: Number{Kind: NumI64, I: i}}
}
func F64(f float64) Value        { return Value{Kind: KindNumber, Num: Number{Kind: NumF64, F: f}} }
func Array(items ...Value) Value { return Value{Kind: KindArray, Arr: items} }
func Object(members ...Member) Value {
	return Value{Kind: KindObject, Obj: members}
}

// Get returns the last member named key (last wins, as for free-form values).
func (v Value) Get(key string) (Value, bool) {
	for i := len(v.Obj) - 1; i >= 0; i-- {
		if v.Obj[i].Key == key {
			return v.Obj[i].Value, true
		}
	}
	return Value{}, false
}

// Tape is a JSON value read by ParseTape, held as a flat list of nodes in
// document order: a container's node comes first, then its items (for an
// object, each member's key, a string node, then the member's value). A
// node holds no pointer, so a whole document is a couple of allocations
// the garbage collector need not scan, where a Value tree is one per
// container and string. Node 0 is the value read; nodes are named by their
// index.
type Tape struct {
	text  []byte // what was read, in place
	end   int    // just after the value in text
	nodes []node
	unesc []byte // the contents of strings with escapes, unescaped
}

// node is 24 bytes: offsets are 32 bits, which is why ParseTape refuses a
// text of 2 GiB or more (maxTapeText).
type node struct {
	kind Kind
	num  NumKind // numbers: how x holds the number
	esc  bool    // strings: the content is unesc[start:end], else text[start:end]
	// canon says an escaped string's escapes are all the ones AppendString
	// writes: its literal is then text[rawStart:rawEnd] as it stands.
	canon bool
	// next is the node after this value and its items.
	next int32
	// start and end span a string's content.
	start, end int32
	// rawStart and rawEnd span an escaped string's text as written.
	rawStart, rawEnd int32
	// x is a container's number of items, a boolean's 1 or 0, a number's
	// u64, i64 or f64 bits, a string's StrWord.
	x uint64
}

func numberNode(n Number) node {
	x := n.U
	switch n.Kind {
	case NumI64:
		x = uint64(n.I)
	case NumF64:
		x = math.Float64bits(n.F)
	}
	return node{kind: KindNumber, num: n.Kind, x: x}
}

// Nodes is the number of nodes.
func (t *Tape) Nodes() int { return len(t.nodes) }

// End is the index in the text just after the value.
func (t *Tape) End() int { return t.end }

// Kind is node i's JSON type.
func (t *Tape) Kind(i int) Kind { return t.nodes[i].kind }

// Bool is a boolean node's value.
func (t *Tape) Bool(i int) bool { return t.nodes[i].x != 0 }

// Number is a number node's value.
func (t *Tape) Number(i int) Number {
	n := &t.nodes[i]
	switch n.num {
	case NumU64:
		return Number{Kind: NumU64, U: n.x}
	case NumI64:
		return Number{Kind: NumI64, I: int64(n.x)}
	}
	return Number{Kind: NumF64, F: math.Float64frombits(n.x)}
}

// Len is the number of items of an array node, or members of an object
// node.
func (t *Tape) Len(i int) int { return int(t.nodes[i].x) }

// Next is the node after node i's value: an array's items are i+1,
// Next(i+1), ...; an object's members are key i+1 with value i+2, then key
// Next(i+2) with its value after it, ...
func (t *Tape) Next(i int) int { return int(t.nodes[i].next) }

// StrBytes is a string node's content. It is read-only: it may be the
// text the tape was read from.
func (t *Tape) StrBytes(i int) []byte {
	n := &t.nodes[i]
	if n.esc {
		return t.unesc[n.start:n.end:n.end]
	}
	return t.text[n.start:n.end:n.end]
}

// StrWord is StrWord of a string node's content, kept since the string
// was read.
func (t *Tape) StrWord(i int) uint64 { return t.nodes[i].x }

// StrWord packs a string's length (255 for any longer) and its first seven
// bytes into a word: strings whose words differ differ, and strings of up
// to seven bytes are equal exactly when their words are. A reader that
// looks names up can so tell most of them apart without reading them.
func StrWord[S string | []byte](s S) uint64 {
	w := uint64(min(len(s), 0xff))
	for i := 0; i < len(s) && i < 7; i++ {
		w |= uint64(s[i]) << (8 * (i + 1))
	}
	return w
}

// Str is a string node's content as a string of its own.
func (t *Tape) Str(i int) string { return string(t.StrBytes(i)) }

// Value returns node i's value as a Value tree (each string a copy).
func (t *Tape) Value(i int) Value {
	// Count first, so that the containers take one block of members and
	// one of items, each cut to length as it is handed out.
	var members, items int
	for j := i; j < int(t.nodes[i].next); j++ {
		switch n := &t.nodes[j]; n.kind {
		case KindObject:
			members += int(n.x)
		case KindArray:
			items += int(n.x)
		}
	}
	c := valueBuilder{t: t, objs: make([]Member, members), arrs: make([]Value, items)}
	v, _ := c.build(i)
	return v
}

type valueBuilder struct {
	t    *Tape
	objs []Member
	arrs []Value
}

// build returns node i's value and the node after it.
func (c *valueBuilder) build(i int) (Value, int) {
	n := &c.t.nodes[i]
	switch n.kind {
	case KindNull:
		return Value{Kind: KindNull}, i + 1
	case KindBool:
		return Value{Kind: KindBool, Bool: n.x != 0}, i + 1
	case KindNumber:
		return Value{Kind: KindNumber, Num: c.t.Number(i)}, i + 1
	case KindString:
		return Value{Kind: KindString, Str: c.t.Str(i)}, i + 1
	case KindArray:
		k := int(n.x)
		arr := c.arrs[:k:k]
		c.arrs = c.arrs[k:]
		j := i + 1
		for m := range arr {
			arr[m], j = c.build(j)
		}
		return Value{Kind: KindArray, Arr: arr}, j
	}
	k := int(n.x)
	obj := c.objs[:k:k]
	c.objs = c.objs[k:]
	j := i + 1
	for m := range obj {
		obj[m].Key = c.t.Str(j)
		obj[m].Value, j = c.build(j + 1)
	}
	return Value{Kind: KindObject, Obj: obj}, j
}
