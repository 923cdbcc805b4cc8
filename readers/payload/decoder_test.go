package payload

import (
	"bytes"
	"fmt"
	"path/filepath"
	"testing"
)

// script runs what callers do with an entry and returns what they see.
func script(t *testing.T, e *Entry) []string {
	t.Helper()
	fields := func() string {
		name := "<nil>"
		if e.Name != nil {
			name = *e.Name
		}
		return fmt.Sprintf("%s %q %v %q %v %q %q %q", e.Type, e.ID, e.HasID, e.ParentID, e.HasParent, e.Timestamp, e.Role, name)
	}
	legacy := func() string {
		id, err := e.LegacyID(func(string) bool { return false })
		return fmt.Sprintf("%s %v", id, err)
	}
	out := []string{fields(), string(e.Canonical()), string(e.Typed()), legacy(),
		string(e.AppendCanonical([]byte("prefix")))}
	e.SetParent("p1")
	e.SetID("i1")
	return append(out, fields(), string(e.Canonical()), string(e.Typed()), legacy())
}

// A Decoder, reused line after line over one buffer, sees what Decode sees;
// an entry from Decode does not depend on its line.
func TestDecoderAgreesWithDecode(t *testing.T) {
	var lines []sourceLine
	for _, group := range []string{"accept", "edge", "realpi"} {
		files, _ := filepath.Glob(filepath.Join(vectorsDir(t), group, "*", "source.jsonl"))
		for _, f := range files {
			lines = append(lines, entryLines(t, f)...)
		}
	}
	var dec Decoder
	var buf []byte
	n := 0
	for _, l := range lines {
		buf = append(buf[:0], l.text...)
		e, err := Decode(buf)
		re, rerr := dec.Decode(buf)
		if fmt.Sprint(err) != fmt.Sprint(rerr) {
			t.Fatalf("line %d: Decode %v, Decoder %v", l.num, err, rerr)
		}
		if err != nil {
			continue
		}
		want := script(t, e)
		got := script(t, re)
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("line %d, step %d:\nDecoder %s\n Decode %s", l.num, i, got[i], want[i])
			}
		}
		copy(buf, bytes.Repeat([]byte{'x'}, len(buf)))
		if got := string(e.Canonical()); got != want[len(want)-3] {
			t.Fatalf("line %d: the entry changed with its line: %s", l.num, got)
		}
		n++
	}
	if n < 1000 {
		t.Fatalf("only %d entries", n)
	}
}

// FuzzDecoder: a Decoder that has read another line first agrees with
// Decode, refusals included.
func FuzzDecoder(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join(vectorsDir(f), "*", "*", "source.jsonl"))
	for _, file := range files {
		for i, l := range entryLines(f, file) {
			if i < 20 {
				f.Add(l.text)
			}
		}
	}
	var dec Decoder
	f.Fuzz(func(t *testing.T, line []byte) {
		if len(line) > maxFuzzLine {
			return
		}
		e, err := Decode(line)
		re, rerr := dec.Decode(line)
		if fmt.Sprint(err) != fmt.Sprint(rerr) {
			t.Fatalf("Decode %v, Decoder %v", err, rerr)
		}
		if err != nil {
			checkRefusal(t, err)
			return
		}
		want, got := script(t, e), script(t, re)
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("step %d:\nDecoder %s\n Decode %s", i, got[i], want[i])
			}
		}
	})
}

// Names that only a look at every byte tells apart: the empty name (whose
// wire.StrWord is 0), names of eight bytes or more that share their first
// seven, names that differ only in length.
func TestDecodeTellsNamesApart(t *testing.T) {
	tests := []struct {
		line, want string
	}{
		{`{"type":"message","":0}`, "missing field `message`"},
		{`{"type":"message","base":{"id":"x"},"timestamp":"t"}`, "missing field `message`"},
		{`{"type":"compaction","timestamp":"t","summary":"s","firstKeptEntryIdX":"f","tokensBefore":1}`,
			"missing field `firstKeptEntryId`"},
		{`{"type":"compaction","timestamp":"t","summary":"s","firstKeptEntryId":"f","tokensBefor":1}`,
			"missing field `tokensBefore`"},
		{`{"type":"model_change","timestamp":"t","provider":"p","modelI":"m"}`, "missing field `modelId`"},
		{`{"type":"model_change","timestamp":"t","provider":"p","modelId":"m","":1}`,
			`{"modelId":"m","provider":"p","timestamp":"t","type":"model_change"}`},
		{msg(`{"role":"bashExecution","command":"c","output":"o","exitCode":0,"":1,"cancelle":true}`),
			`{"id":"e1","message":{"":1,"cancelle":true,"command":"c","exitCode":0,"output":"o","role":"bashExecution"},"parentId":"e0","timestamp":"t","type":"message"}`},
	}
	for _, tt := range tests {
		e, err := Decode([]byte(tt.line))
		got := ""
		if err != nil {
			got = err.Error()
		} else {
			got = string(e.Canonical())
		}
		if got != tt.want {
			t.Errorf("%s\n got %s\nwant %s", tt.line, got, tt.want)
		}
	}
}
