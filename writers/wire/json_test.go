package wire

import (
	"bufio"
	"bytes"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"pisess/fixtures"
)

func vectorsDir(tb testing.TB) string {
	tb.Helper()
	return fixtures.VectorsDir(tb)
}

// Every payload the reference wrote is a fixed point of parse → canonical.
func TestCanonicalRoundTripOfReferencePayloads(t *testing.T) {
	segs, _ := filepath.Glob(filepath.Join(vectorsDir(t), "*", "*", "reference.v2", "segments", "*.seg"))
	if len(segs) == 0 {
		t.Fatal("no reference segments found")
	}
	n := 0
	for _, seg := range segs {
		f, err := os.Open(seg)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		for sc.Scan() {
			line := append([]byte(nil), sc.Bytes()...)
			line = append(line, '\n')
			v, err := ParseJSON(line, nil)
			if err != nil {
				t.Fatalf("%s: %v", seg, err)
			}
			if got := AppendCompact(nil, v); !bytes.Equal(got, line[:len(line)-1]) {
				t.Fatalf("%s: compact re-serialization differs:\n got %s\nwant %s", seg, got, line)
			}
			p, ok := v.Get("payload")
			if !ok {
				t.Fatalf("%s: no payload", seg)
			}
			canon := AppendCanonical(nil, p)
			if !bytes.Contains(line, append(append([]byte(`"payload":`), canon...), '}', '\n')) {
				t.Fatalf("%s: canonical payload differs: %s", seg, canon)
			}
			n++
		}
		f.Close()
	}
	t.Logf("%d frames round-tripped", n)
}

func TestSyntaxErrorsMatchReference(t *testing.T) {
	cases := []struct{ in, want string }{
		{`{"type":"custom","id":"e0000017","parentId":null,"timestamp":"t","customType":"x","data":NaN}` + "\n", "expected value at line 1 column 90"},
		{`{"type":"custom","id":"e0000018","parentId":null,"timestamp":"t","customType":"x"} x` + "\n", "trailing characters at line 1 column 84"},
		{`{"a":"bad \ud800 surrogate"}`, "unexpected end of hex escape at line 1 column 17"},
		{`{"a":"\udc00"}`, "lone leading surrogate in hex escape at line 1 column 12"},
		{`{"a":"\ud800\u0041"}`, "lone leading surrogate in hex escape at line 1 column 18"},
		{`{"a":1,}`, "trailing comma at line 1 column 8"},
		{`[1,]`, "trailing comma at line 1 column 4"},
		{`{"a":1` + "\n", "EOF while parsing an object at line 2 column 0"},
		{`{"a":"x`, "EOF while parsing a string at line 1 column 7"},
		{`{"a" 1}`, "expected `:` at line 1 column 6"},
		{`{"a":1 "b":2}`, "expected `,` or `}` at line 1 column 8"},
		{`{1:2}`, "key must be a string at line 1 column 2"},
		{`[01]`, "invalid number at line 1 column 3"},
		{`[1.]`, "invalid number at line 1 column 4"},
		{`[1e]`, "invalid number at line 1 column 4"},
		{`[-]`, "invalid number at line 1 column 3"},
		{`[nul]`, "expected ident at line 1 column 5"},
		{`["a` + "\x01" + `"]`, "control character (\\u0000-\\u001F) found while parsing a string at line 1 column 4"},
		{`["\x"]`, "invalid escape at line 1 column 4"},
		{`[1e400]`, "number out of range at line 1 column 6"},
		{``, "EOF while parsing a value at line 1 column 0"},
		{strings.Repeat("[", 128), "recursion limit exceeded at line 1 column 128"},
	}
	for _, c := range cases {
		_, err := ParseJSON([]byte(c.in), nil)
		if err == nil || err.Error() != c.want {
			t.Errorf("ParseJSON(%q) = %v, want %q", c.in, err, c.want)
		}
	}
	if _, err := ParseJSON([]byte(strings.Repeat("[", 127)+strings.Repeat("]", 127)), nil); err != nil {
		t.Errorf("127 levels: %v", err)
	}
}

func TestNumberClassification(t *testing.T) {
	cases := []struct {
		in   string
		kind NumKind
		out  string
	}{
		{"0", NumU64, "0"},
		{"18446744073709551615", NumU64, "18446744073709551615"},
		{"18446744073709551616", NumF64, "1.8446744073709552e+19"},
		{"-9223372036854775808", NumI64, "-9223372036854775808"},
		{"-9223372036854775809", NumF64, "-9.223372036854776e+18"},
		{"-0", NumF64, "-0.0"},
		{"1.0", NumF64, "1.0"},
		{"1e3", NumF64, "1000.0"},
		{"1e21", NumF64, "1e+21"},
		{"1e-7", NumF64, "1e-7"},
		{"0.000025", NumF64, "0.000025"},
		{"0.00001", NumF64, "0.00001"},
		{"0.0000069", NumF64, "6.9e-6"},
		{"1234567", NumU64, "1234567"},
		{"1234567.0", NumF64, "1234567.0"},
		{"12345678901234566", NumU64, "12345678901234566"},
		{"12345678901234566.0", NumF64, "1.2345678901234566e+16"},
		{"4810007443999662.0", NumF64, "4810007443999662.0"},
		{"5e-324", NumF64, "5e-324"},
		{"1.7976931348623157e308", NumF64, "1.7976931348623157e+308"},
		{"0.1", NumF64, "0.1"},
		{"-2.5", NumF64, "-2.5"},
	}
	for _, c := range cases {
		v, err := ParseJSON([]byte(c.in), nil)
		if err != nil {
			t.Fatalf("%s: %v", c.in, err)
		}
		if v.Num.Kind != c.kind {
			t.Errorf("%s: kind %d, want %d", c.in, v.Num.Kind, c.kind)
		}
		if got := string(AppendCompact(nil, v)); got != c.out {
			t.Errorf("%s: wrote %s, want %s", c.in, got, c.out)
		}
	}
}

func TestAppendFloatNotation(t *testing.T) {
	cases := map[float64]string{
		0.0000198: "0.0000198", 1e16: "1e+16", 9999999999999998: "9999999999999998.0",
		1e15: "1000000000000000.0", 123.456: "123.456", math.MaxFloat64: "1.7976931348623157e+308",
		-1e-7: "-1e-7", 1.5e+20: "1.5e+20", 0.25: "0.25",
	}
	for f, want := range cases {
		if got := string(AppendFloat(nil, f)); got != want {
			t.Errorf("AppendFloat(%v) = %s, want %s", f, got, want)
		}
	}
}

func TestStringEscaping(t *testing.T) {
	in := "a\"b\\c\b\f\n\r\t\x01\x1f\x7f<>&\u2028é😀/"
	want := `"a\"b\\c\b\f\n\r\t\u0001\u001f` + "\x7f<>&\u2028é😀/\""
	if got := string(AppendString(nil, in)); got != want {
		t.Errorf("got %s want %s", got, want)
	}
	v, err := ParseJSON([]byte(`"\u00e9\ud83d\ude00\u2028\u0000\/"`), nil)
	if err != nil || v.Str != "é😀\u2028\x00/" {
		t.Fatalf("unescape: %q %v", v.Str, err)
	}
}

func TestPretty(t *testing.T) {
	v := Object(Member{"a", U64(1)}, Member{"b", Object()}, Member{"c", Array()}, Member{"d", Object(Member{"x", Array(Bool(true), Null())})})
	want := "{\n  \"a\": 1,\n  \"b\": {},\n  \"c\": [],\n  \"d\": {\n    \"x\": [\n      true,\n      null\n    ]\n  }\n}"
	if got := string(AppendPretty(nil, v)); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

func TestSortKeysLastWins(t *testing.T) {
	v, err := ParseJSON([]byte(`{"b":1,"a":{"z":1,"y":2},"b":3}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(AppendCanonical(nil, v)); got != `{"a":{"y":2,"z":1},"b":3}` {
		t.Errorf("got %s", got)
	}
}

func TestHookStopsAtPosition(t *testing.T) {
	line := []byte(`{"type":"custom_message","id":"x"}` + "\n")
	_, err := ParseJSON(line, func(m TopMember) error {
		if m.Key == "type" {
			return &HookError{Msg: "unknown variant", At: m.ValueEnd}
		}
		return nil
	})
	if err == nil || err.Error() != "unknown variant at line 1 column 24" {
		t.Fatalf("got %v", err)
	}
}

// The real pi wrote a lone surrogate; the reference refuses line 8 of that
// session with this exact message (vectors/realpi, REFUSED).
func TestLoneSurrogateInRealPiSession(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(vectorsDir(t), "realpi", "01a20023-733d-7267-a07d-e55142d9bc1b", "source.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.SplitAfter(b, []byte("\n"))
	_, err = ParseJSON(lines[7], nil)
	if err == nil || err.Error() != "unexpected end of hex escape at line 1 column 196" {
		t.Fatalf("got %v", err)
	}
}

// The reference's serde_json is built without float_roundtrip: a 17-digit
// decimal is converted by one rounded multiply or divide, which can land one
// ulp away from the correctly rounded value. realpi's large session holds
// 0.09876599999999999, which the reference writes as 0.098766.
func TestFloatParsingMatchesSerdeFastPath(t *testing.T) {
	for in, want := range map[string]string{
		"0.09876599999999999":     "0.098766",
		"0.09014760000000001":     "0.0901476",
		"0.0003":                  "0.0003",
		"12345678901234567890123": "1.2345678901234568e+22",
	} {
		v, err := ParseJSON([]byte(in), nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := string(AppendCompact(nil, v)); got != want {
			t.Errorf("%s → %s, want %s", in, got, want)
		}
	}
}
