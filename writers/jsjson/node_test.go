package jsjson

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// nodeScript prints, for each input line, JSON.stringify(JSON.parse(line))
// or "!ERR" when JSON.parse throws: the oracle of this dialect.
const nodeScript = `
const lines = require("fs").readFileSync(process.argv[2], "utf8").split("\n");
lines.pop();
const out = [];
for (const l of lines) {
  try { out.push(JSON.stringify(JSON.parse(l))); } catch (e) { out.push("!ERR"); }
}
process.stdout.write(out.join("\n") + "\n");
`

// corpus generates JSON lines that exercise every rule of the dialect.
func corpus(n int) []string {
	rng := rand.New(rand.NewSource(7))
	fixed := []string{
		`{"a":0.010665000000000001,"b":0.12910649999999999,"c":0.1}`,
		`{"x":1.50e3,"y":1E21,"z":1e-7,"w":1.5e-7,"v":123456789012345678901234567890}`,
		`{"n":-0,"m":-0.0,"big":9007199254740993,"tiny":5e-324,"under":1e-400,"max":1.7976931348623157e308}`,
		`{"id":"a","id":"b","role":"user","x":1,"role":"assistant"}`,
		`{"b":1,"2":2,"a":3,"1":4,"01":5,"4294967295":6,"4294967294":7,"-1":8}`,
		`{"s":"\ud83d","t":"\ud83d\ude00","u":"\ude00\ud83d","v":"\uD83D\uDE00x\uDBFF"}`,
		`{"c":"\u0000\u0001\u001f\b\f\n\r\t\"\\\/ \u007f\u2028\u2029\u00e9é"}`,
		`  {"ws":true}  `, "\t{\"tab\":null}\r", `[1,2,[3,{"a":[]}],{}]`, `"str"`, `42`, `true`,
		`{"a":1,}`, `{'a':1}`, `[01]`, `{"a":.5}`, `{"a":1.}`, `{"a":+1}`, `{"a":"\x"}`, "{\"a\":\"\x01\"}", `{"a":1}x`,
		`{"__proto__":1,"constructor":2}`, `{"a":{"a":{"a":1,"a":2},"a":3}}`,
		`{"e":1e+2,"f":1E-2,"g":0.000001,"h":0.0000001,"i":123e18,"j":123e19,"k":1.7976931348623157e309}`,
	}
	out := append([]string{}, fixed...)
	num := func() string {
		switch rng.Intn(6) {
		case 0:
			return strconv.FormatInt(rng.Int63n(1<<62)-(1<<61), 10)
		case 1:
			return strconv.FormatFloat(rng.NormFloat64()*math.Pow(10, float64(rng.Intn(40)-20)), 'g', -1, 64)
		case 2:
			return fmt.Sprintf("%d.%de%d", rng.Intn(1000), rng.Intn(100000), rng.Intn(60)-30)
		case 3:
			return strconv.FormatFloat(float64(rng.Intn(100000))*3e-6, 'f', rng.Intn(20), 64)
		case 4:
			return fmt.Sprintf("%d%s", rng.Intn(10), strings.Repeat("0", rng.Intn(25)))
		}
		return fmt.Sprintf("0.%s%d", strings.Repeat("0", rng.Intn(9)), rng.Intn(1000))
	}
	str := func() string {
		parts := []string{"a", "é", "\\u0000", "\\ud83d", "\\ude00", "\\ud83d\\ude00", "\\n", "\\/", "\u2028", "\\u001F", " ", "\\\"", "😀", "\\t"}
		var b strings.Builder
		b.WriteByte('"')
		for k := rng.Intn(5); k > 0; k-- {
			b.WriteString(parts[rng.Intn(len(parts))])
		}
		b.WriteByte('"')
		return b.String()
	}
	keys := []string{"a", "b", "id", "0", "1", "10", "2", "01", "-1", "x y", "4294967294"}
	var value func(d int) string
	value = func(d int) string {
		switch k := rng.Intn(7); {
		case d > 3 || k < 2:
			return num()
		case k == 2:
			return str()
		case k == 3:
			return []string{"true", "false", "null"}[rng.Intn(3)]
		case k == 4:
			var items []string
			for j := rng.Intn(4); j > 0; j-- {
				items = append(items, value(d+1))
			}
			return "[" + strings.Join(items, ",") + "]"
		}
		var ms []string
		for j := rng.Intn(5); j > 0; j-- {
			ms = append(ms, strconv.Quote(keys[rng.Intn(len(keys))])+":"+value(d+1))
		}
		return "{" + strings.Join(ms, ",") + "}"
	}
	for len(out) < n {
		out = append(out, value(0))
	}
	return out
}

func TestMatchesNodeJSONRoundTrip(t *testing.T) {
	// node is a requirement of make test (README), like go itself.
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatal("node is not on PATH: make test needs Node.js")
	}
	lines := corpus(3000)
	dir := t.TempDir()
	in := filepath.Join(dir, "in.txt")
	if err := os.WriteFile(in, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(dir, "oracle.js")
	if err := os.WriteFile(script, []byte(nodeScript), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("node", script, in).Output()
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	i := 0
	for ; sc.Scan(); i++ {
		want := sc.Text()
		v, err := Parse([]byte(lines[i]))
		got := "!ERR"
		if err == nil {
			got = string(Append(nil, v))
		}
		if got != want {
			t.Errorf("line %d %s:\n got %s\nwant %s", i, lines[i], got, want)
		}
	}
	if i != len(lines) {
		t.Fatalf("node answered %d lines of %d", i, len(lines))
	}
}

func TestNumberNotation(t *testing.T) {
	for f, want := range map[float64]string{
		1500: "1500", 1e21: "1e+21", 1e20: "100000000000000000000", 1e-7: "1e-7", 1.5e-7: "1.5e-7",
		0.000001: "0.000001", 0.1: "0.1", -2.5: "-2.5", math.Copysign(0, -1): "0", 123e-20: "1.23e-18",
		0.010665000000000001: "0.010665000000000001", 5e-324: "5e-324", math.Inf(1): "null",
	} {
		if got := string(AppendNumber(nil, f)); got != want {
			t.Errorf("%v: got %s, want %s", f, got, want)
		}
	}
}
