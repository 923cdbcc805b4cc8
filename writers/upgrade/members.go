package upgrade

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"math"
	"strconv"

	"pisess/writers/jsjson"
	"pisess/writers/wire"
)

// The object operations below are JavaScript's on a JSON.parse result, done
// on wire's member lists, which keep duplicates: a property is read from
// its last occurrence (JSON.parse keeps the last value), and set by
// overwriting every occurrence in place (JavaScript keeps the first
// position, and whichever occurrence pi reads back, it sees the new value)
// or, when there is none, by adding it last.

// get returns the last member named key.
func get(v wire.Value, key string) (wire.Value, bool) {
	if v.Kind != wire.KindObject {
		return wire.Value{}, false
	}
	return v.Get(key)
}

// getString returns the last member named key when it is a string.
func getString(v wire.Value, key string) (string, bool) {
	m, ok := get(v, key)
	if !ok || m.Kind != wire.KindString {
		return "", false
	}
	return m.Str, true
}

// set gives every member named key the value x, or adds key last.
func set(v *wire.Value, key string, x wire.Value) {
	found := false
	for i := range v.Obj {
		if v.Obj[i].Key == key {
			v.Obj[i].Value = x
			found = true
		}
	}
	if !found {
		v.Obj = append(v.Obj, wire.Member{Key: key, Value: x})
	}
}

// remove deletes every member named key (JavaScript's delete, or an
// assignment of undefined, which JSON.stringify omits).
func remove(v *wire.Value, key string) {
	out := v.Obj[:0]
	for _, m := range v.Obj {
		if m.Key != key {
			out = append(out, m)
		}
	}
	v.Obj = out
}

// renameHookRole applies pi's migrateV2ToV3 to one entry: a "message"
// entry whose message is an object with role "hookMessage" gets role
// "custom". It reports whether it renamed.
func renameHookRole(v *wire.Value) bool {
	if t, _ := getString(*v, "type"); t != "message" {
		return false
	}
	// The last message member is the one JavaScript holds; earlier
	// duplicates are kept as they are (pi never reads them).
	for i := len(v.Obj) - 1; i >= 0; i-- {
		if v.Obj[i].Key != "message" {
			continue
		}
		msg := &v.Obj[i].Value
		if role, _ := getString(*msg, "role"); msg.Kind != wire.KindObject || role != "hookMessage" {
			return false
		}
		set(msg, "role", wire.String("custom"))
		return true
	}
	return false
}

// jsIndex returns the array index JavaScript's entries[x] reads for the
// number x, when x names an element of an array of n: a whole number from
// 0 to n-1 (-0 is "0"). Anything else reads undefined.
func jsIndex(x wire.Number, n int) (int, bool) {
	switch x.Kind {
	case wire.NumU64:
		if x.U < uint64(n) {
			return int(x.U), true
		}
	case wire.NumF64:
		if x.F == math.Trunc(x.F) && x.F > -1 && x.F < float64(n) {
			return int(x.F), true
		}
	}
	return 0, false // negative integers
}

// untypedDomain prefixes the hash of an id pisess gives an entry the
// reference's typed model cannot read (see doc.go).
const untypedDomain = "pisess.upgrade.untyped-entry-id.v1\x00"

// untypedID is LegacyID's construction (FORMAT.md §10) over the entry's
// own compact form, without its id members, under pisess's domain: 8 hex
// of SHA-256(domain ‖ entry ‖ counter), counting up while taken, then
// "<prefix of counter 100>-<n in hex>".
func untypedID(v wire.Value, taken func(string) bool) string {
	stripped := v
	stripped.Obj = make([]wire.Member, 0, len(v.Obj))
	for _, m := range v.Obj {
		if m.Key != "id" {
			stripped.Obj = append(stripped.Obj, m)
		}
	}
	enc := jsjson.Append(nil, stripped)
	candidate := func(c uint32) string {
		h := sha256.New()
		h.Write([]byte(untypedDomain))
		h.Write(enc)
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], c)
		h.Write(b[:])
		return hex.EncodeToString(h.Sum(nil))[:8]
	}
	for c := uint32(0); c < 100; c++ {
		if id := candidate(c); !taken(id) {
			return id
		}
	}
	prefix := candidate(100)
	for n := uint64(0); ; n++ {
		if id := prefix + "-" + strconv.FormatUint(n, 16); !taken(id) {
			return id
		}
	}
}
