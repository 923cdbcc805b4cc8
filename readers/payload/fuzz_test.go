package payload

import (
	"bytes"
	"errors"
	"math"
	"path/filepath"
	"testing"

	"pisess/writers/wire"
)

// maxFuzzLine bounds fuzz inputs, as the JSONL reader bounds lines.
const maxFuzzLine = 1 << 16

// FuzzDecode: Decode never panics, refuses only with a classified *Error,
// and what it accepts is a fixed point: the canonical payload (and the
// typed bytes) read back give the same canonical payload.
func FuzzDecode(f *testing.F) {
	for _, group := range []string{"accept", "edge", "realpi"} {
		files, _ := filepath.Glob(filepath.Join(vectorsDir(f), group, "*", "source.jsonl"))
		for _, file := range files {
			for i, l := range entryLines(f, file) {
				if i >= 40 {
					break
				}
				f.Add(l.text)
			}
		}
	}
	rejects, _ := filepath.Glob(filepath.Join(vectorsDir(f), "reject", "*.jsonl"))
	for _, file := range rejects {
		for _, l := range entryLines(f, file) {
			f.Add(l.text)
		}
	}
	for _, s := range []string{
		`[]`, `["message",1]`, `5`, `{"type":0}`, `{"type":"message","type":"x"}`,
		msg(`["user","hi",5]`),
		msg(`{"role":0,"content":[{"type":0,"text":"x"}]}`),
		msg(assistantHead + `[["text","hello",null]]}`),
		msg(`{"role":"assistant","content":[],"api":"a","provider":"p","model":"m","usage":[1,2,3,4,10,[0,0.1,1e-7,-1,18446744073709551615]],"stopReason":{"stop":null},"timestamp":5}`),
	} {
		f.Add([]byte(s + "\n"))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		if len(line) > maxFuzzLine {
			return
		}
		if _, _, err := RenameHookRole(line); err != nil {
			checkRefusal(t, err)
		}
		e, err := Decode(line)
		if err != nil {
			checkRefusal(t, err)
			return
		}
		if _, err := e.LegacyID(func(string) bool { return false }); err != nil {
			checkRefusal(t, err)
		}
		canon := e.Canonical()
		for _, form := range [][]byte{canon, e.Typed()} {
			again, err := Decode(append(append([]byte{}, form...), '\n'))
			if err != nil {
				t.Fatalf("%s\nreads back as an error: %v", form, err)
			}
			if got := again.Canonical(); !sameModuloFloatParsing(t, got, canon) {
				t.Fatalf("not a fixed point\n first: %s\nsecond: %s", canon, got)
			}
			if again.Type != e.Type || again.ID != e.ID || again.ParentID != e.ParentID || again.Role != e.Role {
				t.Fatalf("fields changed: %+v then %+v", e, again)
			}
		}
	})
}

func checkRefusal(t *testing.T, err error) {
	t.Helper()
	var pe *Error
	if !errors.As(err, &pe) || pe.Class == "" || pe.Detail == "" {
		t.Fatalf("refusal %v (%T) is not a classified *Error", err, err)
	}
}

// sameModuloFloatParsing compares two payloads; floats may differ by a
// couple of units in the last place, because the reference's JSON library
// reads decimal digits with a fast, not always correctly rounded, method
// (serde_json without float_roundtrip): printing the shortest round-trip
// digits and reading them back can move a float, in the reference too.
func sameModuloFloatParsing(tb testing.TB, a, b []byte) bool {
	tb.Helper()
	if bytes.Equal(a, b) {
		return true
	}
	va, err := wire.ParseJSON(a, nil)
	if err != nil {
		tb.Fatal(err)
	}
	vb, err := wire.ParseJSON(b, nil)
	if err != nil {
		tb.Fatal(err)
	}
	return closeValues(va, vb)
}

func closeValues(a, b wire.Value) bool {
	if a.Kind != b.Kind {
		return false
	}
	switch a.Kind {
	case wire.KindNumber:
		if a.Num.Kind != b.Num.Kind {
			return false
		}
		if a.Num.Kind != wire.NumF64 {
			return a.Num == b.Num
		}
		return ulpDistance(a.Num.F, b.Num.F) <= 2
	case wire.KindArray:
		if len(a.Arr) != len(b.Arr) {
			return false
		}
		for i := range a.Arr {
			if !closeValues(a.Arr[i], b.Arr[i]) {
				return false
			}
		}
		return true
	case wire.KindObject:
		if len(a.Obj) != len(b.Obj) {
			return false
		}
		for i := range a.Obj {
			if a.Obj[i].Key != b.Obj[i].Key || !closeValues(a.Obj[i].Value, b.Obj[i].Value) {
				return false
			}
		}
		return true
	}
	return a.Bool == b.Bool && a.Str == b.Str
}

func ulpDistance(x, y float64) uint64 {
	if x == y {
		return 0
	}
	if math.Signbit(x) != math.Signbit(y) {
		return math.MaxUint64
	}
	bx, by := math.Float64bits(x), math.Float64bits(y)
	if bx > by {
		return bx - by
	}
	return by - bx
}
