package wire

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
