package jsonl

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"pisess/fixtures"
	"pisess/readers/payload"
)

// vectorLines returns every line after the first of every shared vector
// session (accept, edge, realpi, reject).
func vectorLines(tb testing.TB) [][]byte {
	tb.Helper()
	vectors := fixtures.VectorsDir(tb)
	files, _ := filepath.Glob(filepath.Join(vectors, "*", "*", "source.jsonl"))
	rejects, _ := filepath.Glob(filepath.Join(vectors, "reject", "*.jsonl"))
	var out [][]byte
	for _, p := range append(files, rejects...) {
		f, err := os.Open(p)
		if err != nil {
			tb.Fatal(err)
		}
		r := bufio.NewReaderSize(f, 1<<20)
		for n := 0; ; n++ {
			line, err := r.ReadBytes('\n')
			if n > 0 && len(line) > 0 {
				out = append(out, line)
			}
			if err != nil {
				break
			}
		}
		f.Close()
	}
	if len(out) == 0 {
		tb.Fatal("no vector lines")
	}
	return out
}

// checkLinkIDs fails when scanLinkIDs reads an id or parent of a line the
// decoder accepts otherwise than the decoder does.
func checkLinkIDs(t *testing.T, dec *payload.Decoder, line []byte) (read bool) {
	l, ok := scanLinkIDs(line)
	e, err := dec.Decode(line)
	if err != nil || !ok {
		return ok && err == nil
	}
	if l.hasID != e.HasID || l.hasParent != e.HasParent || (e.HasID && string(l.id) != e.ID) || (e.HasParent && string(l.parent) != e.ParentID) {
		t.Fatalf("line %q: scanned id %q (%v) parent %q (%v), decoded id %q (%v) parent %q (%v)",
			line, l.id, l.hasID, l.parent, l.hasParent, e.ID, e.HasID, e.ParentID, e.HasParent)
	}
	return true
}

// TestLinkIDsVectors: on every line of every vector, the scan agrees with
// the decoder, and it reads (does not leave to the decoder) nearly all of
// them.
func TestLinkIDsVectors(t *testing.T) {
	var dec payload.Decoder
	lines := vectorLines(t)
	read := 0
	for _, line := range lines {
		if checkLinkIDs(t, &dec, line) {
			read++
		}
	}
	if read*10 < len(lines)*8 {
		t.Fatalf("the scan read %d of %d lines", read, len(lines))
	}
}

// TestLinkIDsCases: what the scan leaves to the decoder.
func TestLinkIDsCases(t *testing.T) {
	for _, c := range []struct {
		line string
		ok   bool
	}{
		{`{"type":"message","id":"a1","parentId":null,"message":{"role":"user","content":"x"}}` + "\n", true},
		{` {"id":"a1", "parentId" : "b2" , "x":[1,{"y":"}"}],"z":-1.5e3,"t":true} ` + "\n", true},
		{`{}`, true},
		{`{"id":"a\u0031"}`, false},      // an escape in the id
		{`{"i\u0064":"a1"}`, false},      // an escape in a member name
		{`{"id":"a1","id":"a2"}`, false}, // a second id
		{`{"parentId":null,"parentId":"p"}`, false},
		{`{"id":1}`, false},             // not a string
		{`{"id":"a1"`, false},           // torn
		{`[{"id":"a1"}]`, false},        // not an object
		{`{"id":"a1"} x`, false},        // something after it
		{`{"x":"a\"b","id":"c"}`, true}, // an escape elsewhere is skipped
		{`{"x":tru}`, true},             // the decoder refuses it in pass 2
	} {
		l, ok := scanLinkIDs([]byte(c.line))
		if ok != c.ok {
			t.Errorf("%s: ok %v, want %v (%+v)", c.line, ok, c.ok, l)
		}
	}
	l, _ := scanLinkIDs([]byte(`{"x":"a\"b","id":"c","parentId":"p"}`))
	if string(l.id) != "c" || !l.hasID || string(l.parent) != "p" || !l.hasParent {
		t.Fatalf("%+v", l)
	}
}

// FuzzLinkIDs: for any line the decoder accepts, the scan either leaves
// it to the decoder or reads the decoder's id and parent.
func FuzzLinkIDs(f *testing.F) {
	for _, line := range vectorLines(f) {
		if len(line) <= 4096 {
			f.Add(line)
		}
	}
	f.Add([]byte(`{"type":"message","id":"a1","parentId":"b","id":"c"}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		var dec payload.Decoder
		if bytes.Count(line, []byte{'\n'}) > 1 {
			return
		}
		checkLinkIDs(t, &dec, line)
	})
}

// TestQuoteOrBackslash: the word-at-a-time scan finds the first quote or
// backslash wherever it is, whatever bytes surround it (a borrow between
// bytes included), as a byte-by-byte scan does.
func TestQuoteOrBackslash(t *testing.T) {
	naive := func(b []byte, i int) int {
		for ; i < len(b); i++ {
			if b[i] == '"' || b[i] == '\\' {
				return i
			}
		}
		return len(b)
	}
	fillers := []byte{0x00, 0x01, 0x1f, 0x21, 0x22, 0x23, 0x5b, 0x5c, 0x5d, 0x7f, 0x80, 0xa2, 0xdc, 0xff, 'a'}
	b := make([]byte, 19)
	for _, f := range fillers {
		for _, g := range fillers {
			for i := range b {
				if i%2 == 0 {
					b[i] = f
				} else {
					b[i] = g
				}
			}
			for start := 0; start <= len(b); start++ {
				if got, want := quoteOrBackslash(b, start), naive(b, start); got != want {
					t.Fatalf("fill %#x/%#x from %d: %d, want %d", f, g, start, got, want)
				}
			}
			for pos := 0; pos < len(b); pos++ {
				c := append([]byte(nil), b...)
				for k := range c {
					if c[k] == '"' || c[k] == '\\' {
						c[k] = 'a'
					}
				}
				for _, q := range []byte{'"', '\\'} {
					c[pos] = q
					for start := 0; start <= len(c); start++ {
						if got, want := quoteOrBackslash(c, start), naive(c, start); got != want {
							t.Fatalf("%q at %d in fill %#x/%#x from %d: %d, want %d", q, pos, f, g, start, got, want)
						}
					}
				}
			}
		}
	}
}
