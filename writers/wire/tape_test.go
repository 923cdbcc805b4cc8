package wire

import (
	"bytes"
	"errors"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"unicode/utf8"
)

// naiveCanonical is the canonical form spelled out the slow, obvious way:
// a map per object (the last duplicate wins), keys sorted with sort.Strings.
// AppendCanonical and Tape.AppendCanonical must agree with it.
func naiveCanonical(dst []byte, v Value) []byte {
	switch v.Kind {
	case KindArray:
		dst = append(dst, '[')
		for i, item := range v.Arr {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = naiveCanonical(dst, item)
		}
		return append(dst, ']')
	case KindObject:
		last := map[string]Value{}
		for _, m := range v.Obj {
			last[m.Key] = m.Value
		}
		keys := make([]string, 0, len(last))
		for k := range last {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		dst = append(dst, '{')
		for i, k := range keys {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = AppendString(dst, k)
			dst = append(dst, ':')
			dst = naiveCanonical(dst, last[k])
		}
		return append(dst, '}')
	}
	return AppendCompact(dst, v)
}

// checkTape checks everything a tape of b must agree on with ParseJSON.
func checkTape(t *testing.T, b []byte) {
	t.Helper()
	v, end, err := ParseJSONEnd(b, nil)
	var tp Tape
	terr := tp.Parse(b, nil)
	if terr == nil {
		terr = tp.Trailing()
	}
	if (err == nil) != (terr == nil) || err != nil && err.Error() != terr.Error() {
		t.Fatalf("%q: ParseJSON %v, tape %v", b, err, terr)
	}
	if utf8.Valid(b) {
		// A text known to be valid UTF-8 parses as Parse reads it.
		var vp Tape
		verr := vp.ParseValidUTF8(b, nil)
		if verr == nil {
			verr = vp.Trailing()
		}
		if (verr == nil) != (terr == nil) || verr != nil && verr.Error() != terr.Error() {
			t.Fatalf("%q: Parse %v, ParseValidUTF8 %v", b, terr, verr)
		}
		if verr == nil && !bytes.Equal(vp.AppendCanonical(nil, 0), tp.AppendCanonical(nil, 0)) {
			t.Fatalf("%q: ParseValidUTF8's tape writes another canonical text", b)
		}
	}
	if err != nil {
		return
	}
	if tp.End() != end {
		t.Fatalf("%q: end %d, tape %d", b, end, tp.End())
	}
	want := naiveCanonical(nil, v)
	if got := AppendCanonical(nil, v); !bytes.Equal(got, want) {
		t.Fatalf("%q: AppendCanonical\n got %s\nwant %s", b, got, want)
	}
	if got := tp.AppendCanonical(nil, 0); !bytes.Equal(got, want) {
		t.Fatalf("%q: Tape.AppendCanonical\n got %s\nwant %s", b, got, want)
	}
	if got := AppendCompact(nil, SortKeys(v)); !bytes.Equal(got, want) {
		t.Fatalf("%q: SortKeys\n got %s\nwant %s", b, got, want)
	}
	compact := string(AppendCompact(nil, v))
	SortKeys(v)
	if string(AppendCompact(nil, v)) != compact {
		t.Fatalf("%q: SortKeys changed its argument", b)
	}
	if got := AppendCompact(nil, tp.Value(0)); string(got) != compact {
		t.Fatalf("%q: Tape.Value\n got %s\nwant %s", b, got, compact)
	}
}

func TestTapeAgreesWithParseJSON(t *testing.T) {
	for _, s := range []string{
		`null`, `true`, ` false `, `0`, `-0`, `1e400`, `-12.5e-3`, `18446744073709551616`, `"a\"b\\c\u00e9\ud83d\ude00/"`,
		`[]`, `{}`, `[1,[2,[3]],{"a":[]}]`, `{"b":1,"a":{"z":1,"y":2},"b":3}`, `{"":1," ":2,"\u0000":3}`,
		`{"a":1}x`, `{"a":1} `, `{"a":`, `[1,]`, `{"a" 1}`, `"\ud800"`, "\"\x01\"", `{"é":1,"e":2,"z":3}`,
		strings.Repeat(`[`, 200), `{"k":"` + strings.Repeat("x", 100) + `\n"}`,
	} {
		checkTape(t, []byte(s))
	}
	// Every line of every vector session, as written and as stored.
	for _, glob := range []string{"*/*/source.jsonl", "*/*/reference.v2/segments/*.seg"} {
		paths, _ := filepath.Glob(filepath.Join(vectorsDir(t), glob))
		for _, p := range paths {
			for _, l := range lines(t, p) {
				checkTape(t, l)
			}
		}
	}
}

func TestTapeIsReused(t *testing.T) {
	var tp Tape
	if err := tp.Parse([]byte(`{"b":[1,2,3,{"x":"\n"}],"a":"\u00e9"}`), nil); err != nil {
		t.Fatal(err)
	}
	if err := tp.Parse([]byte(`{"y":"\t","x":[]}`), nil); err != nil {
		t.Fatal(err)
	}
	if got := string(tp.AppendCanonical(nil, 0)); got != `{"x":[],"y":"\t"}` {
		t.Fatalf("got %s", got)
	}
	if tp.Parse([]byte(`{"a":`), nil) == nil {
		t.Fatal("a torn text parsed")
	}
}

func TestTapeHookSeesMembers(t *testing.T) {
	line := []byte(`{"type":"custom_message","id":"x"}` + "\n")
	var keys []string
	_, err := ParseTape(line, func(tp *Tape, m TapeMember) error {
		keys = append(keys, tp.Str(m.Key))
		if tp.Str(m.Key) == "type" && tp.Str(m.Value) == "custom_message" {
			return &HookError{Msg: "unknown variant", At: m.ValueEnd}
		}
		return nil
	})
	var se *SyntaxError
	if !errors.As(err, &se) || err.Error() != "unknown variant at line 1 column 24" || len(keys) != 1 {
		t.Fatalf("got %v after %v", err, keys)
	}
}

// FuzzTape: the tape, ParseJSON, AppendCanonical and SortKeys agree on
// every text.
func FuzzTape(f *testing.F) {
	seedLines(f, "segments/*.seg", 100)
	paths, _ := filepath.Glob(filepath.Join(vectorsDir(f), "*", "*", "source.jsonl"))
	for _, p := range paths {
		for i, l := range lines(f, p) {
			if i < 20 {
				f.Add(l)
			}
		}
	}
	f.Add([]byte(`{"b":1,"a":{"z":1,"y":2},"b":3}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > maxFuzzInput {
			return
		}
		checkTape(t, b)
	})
}

func TestStrWord(t *testing.T) {
	long := strings.Repeat("x", 263)
	for _, c := range []struct {
		a, b  string
		equal bool // words equal
	}{
		{"", "", true}, {"id", "id", true}, {"id", "ie", false}, {"type", "types", false},
		{"content", "content", true}, {"xxxxxxx", long, false}, {long, long + "y", true},
		{"abcdefgh", "abcdefgi", true}, {"a\x00", "a", false},
	} {
		if got := StrWord(c.a) == StrWord(c.b); got != c.equal {
			t.Errorf("StrWord(%q) == StrWord(%q): %v", c.a, c.b, got)
		}
	}
	tp, err := ParseTape([]byte(`["content","a\u0062c"]`), nil)
	if err != nil {
		t.Fatal(err)
	}
	if tp.StrWord(1) != StrWord("content") || tp.StrWord(2) != StrWord("abc") {
		t.Error("a tape's words are not its strings'")
	}
}

// plainRun and plainRunOf find the first byte a string cannot hold as it
// is, whatever the bytes around it (borrows between the bytes of a word
// included).
func TestPlainRun(t *testing.T) {
	naive := func(b []byte, i int) (int, bool) {
		wide := false
		for ; i < len(b); i++ {
			if c := b[i]; c == '"' || c == '\\' || c < 0x20 {
				break
			} else if c >= 0x80 {
				wide = true
			}
		}
		return i, wide
	}
	fillers := []byte{0x00, 0x1f, 0x20, 0x21, 0x22, 0x23, 0x5b, 0x5c, 0x5d, 0x7f, 0x80, 0xa2, 0xdc, 0xff}
	b := make([]byte, 19)
	for _, fill := range fillers {
		for _, c := range fillers {
			for at := range b {
				for k := range b {
					b[k] = fill
				}
				b[at] = c
				for from := 0; from < 10; from++ {
					wi, ww := naive(b, from)
					if gi, gw := plainRun(b, from); gi != wi || gw != ww {
						t.Fatalf("plainRun(% x, %d) = %d %v, want %d %v", b, from, gi, gw, wi, ww)
					}
					if gi := plainRunOf(string(b), from); gi != wi {
						t.Fatalf("plainRunOf(% x, %d) = %d, want %d", b, from, gi, wi)
					}
				}
			}
		}
	}
}

// TestTapeStringLiterals: a string literal written from the tape is the
// one appendString writes for its content, whether its escapes are the
// canonical ones (copied as written) or not (escaped again).
func TestTapeStringLiterals(t *testing.T) {
	for _, lit := range []string{
		`"plain"`, `"a\nb"`, `"q\"\\\b\f\n\r\t"`, `"\u0000\u001f\u0001\u007f"`, `"\u001F"`, `"\u0008"`,
		`"\u0009\u000a\u000c\u000d"`, `"\/"`, `"\u00e9"`, `"\u20ac"`, `"\ud83d\ude00"`, `"é\n€"`,
		`"\u0010x"`, `"\u001a"`, `"\u0020"`, `"\u002f"`, `"tail\\"`, `"\\u0041"`,
	} {
		tp, err := ParseTape([]byte(lit), nil)
		if err != nil {
			t.Fatalf("%s: %v", lit, err)
		}
		got := string(tp.AppendString(nil, 0))
		if want := string(AppendString(nil, tp.Str(0))); got != want {
			t.Errorf("%s: tape writes %s, want %s", lit, got, want)
		}
	}
}
