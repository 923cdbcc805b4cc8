package jsonl

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"pisess/readers"
	"pisess/readers/payload"
)

// msg is a v3 user message entry; parent "" writes no parentId, "null"
// writes parentId null.
func msg(id, parent string) string {
	p := ""
	switch parent {
	case "":
	case "null":
		p = `"parentId":null,`
	default:
		p = `"parentId":"` + parent + `",`
	}
	idm := ""
	if id != "" {
		idm = `"id":"` + id + `",`
	}
	return `{"type":"message",` + idm + p + `"timestamp":"2025-06-01T00:00:01.000Z","message":{"role":"user","content":"hi ` + id + `","timestamp":1}}`
}

func session(lines ...string) string {
	return strings.Join(append([]string{testHeader}, lines...), "\n") + "\n"
}

// TestRefusedClasses: one real file per problem, refused with its class at
// its line, with the reference's detail where the reference has one.
func TestRefusedClasses(t *testing.T) {
	hdr := func(body string) string { return body + "\n" + msg("a1", "") + "\n" }
	cases := []struct {
		name    string
		content string
		class   readers.Class
		line    int64
		reason  []string
	}{
		{"empty file", "", readers.ClassEmptyFile, 0, []string{"Empty JSONL session file"}},
		{"blank first line", "\n" + testHeader + "\n", readers.ClassBadHeader, 1, []string{"line 1 is blank"}},
		{"unicode-blank first line", "\u00a0\u3000\n" + testHeader + "\n", readers.ClassBadHeader, 1, []string{"line 1 is blank"}},
		{"byte-order mark", "\ufeff" + session(), readers.ClassBadHeader, 1,
			[]string{"byte-order mark", "Invalid header in JSONL: expected value at line 1 column 1"}},
		{"header not json", hdr(`{"type":"session",`), readers.ClassBadHeader, 1, []string{"Invalid header in JSONL: EOF while parsing a value at line 1 column 18"}},
		{"header missing cwd", hdr(`{"type":"session","version":3,"id":"x","timestamp":"t"}`), readers.ClassBadHeader, 1,
			[]string{"Invalid header in JSONL: missing field `cwd` at line 1 column 55"}},
		{"header id number", hdr(`{"type":"session","version":3,"id":7,"timestamp":"t","cwd":"/"}`), readers.ClassBadHeader, 1,
			[]string{"invalid type: integer `7`, expected a string at line 1 column 36"}},
		{"header id object", hdr(`{"type":"session","version":3,"id":{"a":1},"timestamp":"t","cwd":"/"}`), readers.ClassBadHeader, 1,
			[]string{"invalid type: map, expected a string at line 1 column 35"}},
		{"header version 256", hdr(`{"type":"session","version":256,"id":"x","timestamp":"t","cwd":"/"}`), readers.ClassBadHeader, 1,
			[]string{"invalid value: integer `256`, expected u8 at line 1 column 31"}},
		{"header version float", hdr(`{"type":"session","version":3.0,"id":"x","timestamp":"t","cwd":"/"}`), readers.ClassBadHeader, 1,
			[]string{"invalid type: floating point `3.0`, expected u8 at line 1 column 31"}},
		{"header version string", hdr(`{"type":"session","version":"3","id":"x","timestamp":"t","cwd":"/"}`), readers.ClassBadHeader, 1,
			[]string{`invalid type: string "3", expected u8 at line 1 column 31`}},
		{"header duplicate id", hdr(`{"type":"session","version":3,"id":"x","id":"y","timestamp":"t","cwd":"/"}`), readers.ClassBadHeader, 1,
			[]string{"duplicate field `id` at line 1 column 43"}},
		{"header both parent names", hdr(`{"type":"session","version":3,"id":"x","timestamp":"t","cwd":"/","branchedFrom":"a","parentSession":"b"}`),
			readers.ClassBadHeader, 1, []string{"duplicate field `branchedFrom`"}},
		{"header array", hdr(`["session",3,"x"]`), readers.ClassBadHeader, 1,
			[]string{"invalid length 3, expected struct SessionHeader with 13 elements"}},
		{"header string", hdr(`"session"`), readers.ClassBadHeader, 1,
			[]string{`invalid type: string "session", expected struct SessionHeader at line 1 column 9`}},
		{"header missing field before trailing", hdr(`{"type":"session"} x`), readers.ClassBadHeader, 1,
			[]string{"missing field `id` at line 1 column 18"}},
		{"header trailing", hdr(`{"type":"session","version":3,"id":"x","timestamp":"t","cwd":"/"} x`), readers.ClassBadHeader, 1,
			[]string{"trailing characters at line 1 column 67"}},
		{"header not session", hdr(`{"type":"sessio","version":3,"id":"x","timestamp":"t","cwd":"/"}`), readers.ClassBadHeader, 1,
			[]string{"Invalid session header in JSONL: type must be `session`, got `sessio`"}},
		{"header blank id", hdr(`{"type":"session","version":3,"id":" \u00a0\u3000","timestamp":"t","cwd":"/"}`), readers.ClassBadHeader, 1,
			[]string{"id must be non-empty"}},
		{"header blank cwd", hdr(`{"type":"session","version":3,"id":"x","timestamp":"t","cwd":""}`), readers.ClassBadHeader, 1,
			[]string{"cwd must be non-empty"}},
		{"version 1 header", hdr(`{"type":"session","version":1,"id":"x","timestamp":"t","cwd":"/"}`), readers.ClassUnsupportedVer, 1,
			[]string{"version must be 3, got 1", "pisess upgrade"}},
		{"version 2 header", hdr(`{"type":"session","version":2,"id":"x","timestamp":"t","cwd":"/"}`), readers.ClassUnsupportedVer, 1,
			[]string{"version must be 3, got 2", "pisess upgrade"}},
		{"no version header", hdr(`{"type":"session","id":"x","timestamp":"t","cwd":"/"}`), readers.ClassUnsupportedVer, 1,
			[]string{"version must be 3, got none", "pisess upgrade"}},
		{"version 4 header", hdr(`{"type":"session","version":4,"id":"x","timestamp":"t","cwd":"/"}`), readers.ClassUnsupportedVer, 1,
			[]string{"version must be 3, got 4"}},
		{"malformed json", session(msg("a1", ""), `{"type":"message",}`), readers.ClassMalformedJSON, 3,
			[]string{"Bad JSONL entry: trailing comma at line 1 column 19"}},
		{"invalid utf-8", session(msg("a1", ""), "{\"type\":\"x\xff\"}"), readers.ClassInvalidUTF8, 3,
			[]string{"invalid utf-8 sequence of 1 bytes from index 10"}},
		{"invalid utf-8 in blank line", session(msg("a1", ""), " \xc3 "), readers.ClassInvalidUTF8, 3,
			[]string{"invalid utf-8 sequence of 1 bytes from index 1"}},
		{"encoded surrogate", session("{\"type\":\"\xed\xa0\x80\"}"), readers.ClassInvalidUTF8, 2,
			[]string{"invalid utf-8 sequence of 1 bytes from index 9"}},
		{"lone surrogate", session(`{"type":"message","id":"a1","timestamp":"t","message":{"role":"user","content":"\ud800 x","timestamp":1}}`),
			readers.ClassLoneSurrogate, 2, []string{"unexpected end of hex escape at line 1 column 87"}},
		{"lone surrogate pair", session(`{"type":"message","id":"a1","timestamp":"t","message":{"role":"user","content":"\ud800\u0041","timestamp":1}}`),
			readers.ClassLoneSurrogate, 2, []string{"lone leading surrogate in hex escape"}},
		{"unknown type", session(`{"type":"custom_message","id":"a1","timestamp":"t"}`), readers.ClassUnknownType, 2,
			[]string{"unknown variant `custom_message`", "at line 1 column 24"}},
		{"unknown role", session(`{"type":"message","id":"a1","timestamp":"t","message":{"role":"hookMessage","content":"x","timestamp":1}}`),
			readers.ClassUnknownRole, 2, []string{"unknown variant `hookMessage`"}},
		{"missing member", session(`{"type":"message","id":"a1","message":{"role":"user","content":"x","timestamp":1}}`),
			readers.ClassBadEntry, 2, []string{"missing field `timestamp`"}},
		{"mistyped member", session(`{"type":"model_change","id":"a1","timestamp":"t","provider":1,"modelId":"m"}`),
			readers.ClassBadEntry, 2, []string{"invalid type: integer `1`, expected a string"}},
		{"duplicate id", session(msg("a1", ""), msg("b2", "a1"), msg("a1", "b2")), readers.ClassDuplicateID, 4,
			[]string{"duplicate entry ID a1 (line 2 and line 4)"}},
		{"missing parent", session(msg("a1", ""), msg("b2", "zz")), readers.ClassMissingParent, 3,
			[]string{"session entry b2 references missing parent zz"}},
		{"cycle", session(msg("a1", ""), msg("b2", "c3"), msg("c3", "b2")), readers.ClassParentCycle, 3,
			[]string{"cycle: b2 → c3 → b2", "lines 3, 4"}},
		{"self parent", session(msg("a1", "a1")), readers.ClassParentCycle, 2, []string{"a1 names itself as its parent"}},
		{"self parent among others", session(msg("a1", ""), msg("b2", "b2")), readers.ClassParentCycle, 3, []string{"b2 names itself"}},
		{"bad entry id", session(msg("has space", "")), readers.ClassBadEntryID, 2,
			[]string{`entry id "has space" does not match the V2 entry-id contract ^[A-Za-z0-9_-]{1,128}$`}},
		{"torn last line", session(msg("a1", "")) + `{"type":"message","id":"b2","parentId":"a1","timestamp":"2025`,
			readers.ClassTornLine, 3, []string{"torn write", "EOF while parsing a string at line 1 column 61"}},
		{"torn inside utf-8", session(msg("a1", "")) + "{\"type\":\"message\",\"id\":\"b2\",\"x\":\"\xe6\x97",
			readers.ClassTornLine, 3, []string{"torn write", "incomplete utf-8 byte sequence from index 33"}},
		{"torn header", `{"type":"session","version":3,"id":"x"`, readers.ClassTornLine, 1, []string{"EOF while parsing an object"}},
		{"feff line is not blank", session(msg("a1", ""), "\ufeff"), readers.ClassMalformedJSON, 3, []string{"expected value at line 1 column 1"}},
		{"nondeterministic id", session(`{"type":"message","timestamp":"t","message":{"role":"bashExecution","command":"ls","output":"","cancelled":false,"truncated":false,"timestamp":1,"exitCode":0,"x1":1,"x2":2}}`),
			readers.ClassNondeterministic, 2, []string{"hash-map order"}},
		// The reference parses every line before it looks at ids: the
		// first parse error wins over an earlier duplicate, the duplicate
		// over an earlier missing parent, that over a cycle, that over a bad id.
		{"parse error beats duplicate", session(msg("a1", ""), msg("a1", ""), "{"), readers.ClassMalformedJSON, 4, nil},
		{"duplicate beats missing parent", session(msg("a1", "zz"), msg("b2", ""), msg("b2", "")), readers.ClassDuplicateID, 4, nil},
		{"missing parent beats cycle", session(msg("a1", "b2"), msg("b2", "a1"), msg("c3", "zz")), readers.ClassMissingParent, 4, nil},
		{"cycle beats bad id", session(msg("a b", ""), msg("b2", "c3"), msg("c3", "b2")), readers.ClassParentCycle, 3, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := writeFile(t, "s.jsonl", c.content)
			_, _, err := readAll(t, p, Options{})
			r := mustRefuse(t, err, c.class, c.line, c.reason...)
			if r.Path != p {
				t.Errorf("path %q", r.Path)
			}
			t.Log(r)
		})
	}
}

// TestAccepted: what the reference reads without complaint.
func TestAccepted(t *testing.T) {
	ws := []string{"", "   ", "\t", "\r", "\u00a0", "\u3000", "\u2028", "\u0085", "\v", "\f", " \u2029 \u1680\u205f\u202f\u2000\u200a "}
	var lines []string
	for i, w := range ws {
		lines = append(lines, w, msg(fmt.Sprintf("e%d", i), "")+"\r")
	}
	content := strings.Join(append([]string{testHeader + "\r"}, lines...), "\n") + "\n" + msg("last", "e0") // no final newline
	p := writeFile(t, "s.jsonl", content)
	entries, s, err := readAll(t, p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != len(ws)+1 {
		t.Fatalf("%d entries", len(entries))
	}
	for i, e := range entries[:len(ws)] {
		if e.ID != fmt.Sprintf("e%d", i) || e.Position != int64(2*i+3) || e.Role != "user" || e.Type != "message" {
			t.Fatalf("entry %d: %+v", i, e)
		}
	}
	last := entries[len(ws)]
	if last.ID != "last" || last.ParentID != "e0" {
		t.Fatalf("last: %+v", last)
	}
	if s.Size() != int64(len(content)) || s.BytesRead() != s.Size() {
		t.Fatalf("size %d read %d", s.Size(), s.BytesRead())
	}
	h := s.Header()
	if h.ID != "7c1d2e3f-0000-4000-8000-000000000001" || h.Version != 3 || h.Format != readers.FormatJSONLv3 || string(h.Raw) != testHeader+"\r" {
		t.Fatalf("header %+v", h)
	}
}

// TestHeaderFields: parentSession and its alias branchedFrom; null
// optionals; unknown members ignored.
func TestHeaderFields(t *testing.T) {
	for _, key := range []string{"parentSession", "branchedFrom"} {
		p := writeFile(t, "s.jsonl", `  {"type":"session","version":3,"id":"x","timestamp":"t","cwd":"/","provider":null,"extra":[1,{"a":2}],"`+key+`":"/p.jsonl"}  `+"\n")
		entries, s, err := readAll(t, p, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if len(entries) != 0 || s.Header().ParentSession != "/p.jsonl" {
			t.Fatalf("%s: %+v", key, s.Header())
		}
	}
}

// TestLegacyIDs: entries without ids get the reference's ids; every
// explicit id anywhere in the file is taken, so an id-less entry whose
// first candidate equals a later explicit id takes the next counter.
func TestLegacyIDs(t *testing.T) {
	idless := `{"type":"model_change","timestamp":"2025-06-01T00:00:03.000Z","provider":"anthropic","modelId":"m"}`
	e, err := payload.Decode([]byte(idless + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	first, _ := e.LegacyID(func(string) bool { return false })
	second, _ := e.LegacyID(func(s string) bool { return s == first })
	p := writeFile(t, "s.jsonl", session(idless, msg(first, ""), `{"type":"label","id":"l1","parentId":"`+second+`","timestamp":"t","targetId":"x","label":null}`))
	entries, _, err := readAll(t, p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if entries[0].ID != second || !entries[0].SynthesizedID || entries[1].ID != first || entries[1].SynthesizedID {
		t.Fatalf("ids %s %s, want %s %s", entries[0].ID, entries[1].ID, second, first)
	}
	if !strings.Contains(string(entries[0].Payload), `"id":"`+second+`"`) {
		t.Fatalf("payload without its id: %s", entries[0].Payload)
	}
	if entries[2].ParentID != second {
		t.Fatalf("parent %s", entries[2].ParentID)
	}
}

// TestLegacySessions: version 1 and 2 files read with AllowLegacy.
func TestLegacySessions(t *testing.T) {
	v1 := `{"type":"session","id":"x","timestamp":"t","cwd":"/"}` + "\n" + msg("", "") + "\n" + msg("", "") + "\n"
	p := writeFile(t, "v1.jsonl", v1)
	entries, s, err := readAll(t, p, Options{AllowLegacy: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 2 || !entries[0].SynthesizedID || entries[0].ID == entries[1].ID || s.Header().Version != 0 {
		t.Fatalf("%+v", entries)
	}
}

// TestChangedSource: a file that changes after Open is not read on: the
// error says the source changed (readers.ErrSourceChanged), where, and is
// no refusal (the reference would migrate the file as it is).
func TestChangedSource(t *testing.T) {
	p := writeFile(t, "s.jsonl", session(msg("a1", ""), msg("b2", "a1")))
	s, err := Open(p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	f, _ := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
	f.WriteString(msg("c3", "b2") + "\n")
	f.Close()
	var last error
	for range 5 {
		if _, last = s.Next(); last != nil {
			break
		}
	}
	var sc *readers.SourceChangedError
	if !errors.Is(last, readers.ErrSourceChanged) || !errors.As(last, &sc) || sc.Line != 4 || readers.AsRefused(last) != nil {
		t.Fatalf("want the source changed at line 4, got %v", last)
	}
}

// TestNotRegular: a symlink and a FIFO are refused, not followed or read.
func TestNotRegular(t *testing.T) {
	dir := t.TempDir()
	target := writeFile(t, "s.jsonl", session(msg("a1", "")))
	link := filepath.Join(dir, "link.jsonl")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	_, err := Open(link, Options{})
	mustRefuse(t, err, readers.ClassSymlink, 0)
	fifo := filepath.Join(dir, "fifo.jsonl")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = Open(fifo, Options{})
	mustRefuse(t, err, readers.ClassSpecialFile, 0)
	_, err = Open(filepath.Join(dir, "missing.jsonl"), Options{})
	mustRefuse(t, err, readers.ClassIO, 0)
}

// TestSniff reads only the header.
func TestSniff(t *testing.T) {
	cases := []struct {
		content string
		format  readers.SourceFormat
		version int
		class   readers.Class
	}{
		{session(msg("a1", "")), readers.FormatJSONLv3, 3, ""},
		{`{"type":"session","id":"x","timestamp":"t","cwd":"/"}` + "\n{garbage", readers.FormatJSONLv3, 0, ""},
		{`{"type":"session","version":2,"id":"x","timestamp":"t","cwd":"/"}`, readers.FormatJSONLv3, 2, ""},
		{`{"type":"session","version":9,"id":"x","timestamp":"t","cwd":"/"}`, readers.FormatJSONLv3, 9, readers.ClassUnsupportedVer},
		{"SQLite format 3\x00rest", readers.FormatSQLitev1, 0, ""},
		{"", "", 0, readers.ClassEmptyFile},
		{"\ufeff" + testHeader, "", 0, readers.ClassBadHeader},
	}
	for i, c := range cases {
		p := writeFile(t, "s", c.content)
		f, v, err := Sniff(p)
		if c.class != "" {
			if r := readers.AsRefused(err); r == nil || r.Class != c.class {
				t.Errorf("case %d: want %s, got %v", i, c.class, err)
			}
		} else if err != nil {
			t.Errorf("case %d: %v", i, err)
		}
		if f != c.format || v != c.version {
			t.Errorf("case %d: %s %d, want %s %d", i, f, v, c.format, c.version)
		}
	}
}
