package jsonl

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"pisess/fixtures"
	"pisess/readers"
)

// checkSameAnswer reads path fully with and without Options.Light: the
// entries are the same, or the refusal is (line, class, reason), whether
// the light read meets it in Open or in Next.
func checkSameAnswer(t *testing.T, path string) {
	t.Helper()
	full, _, ferr := readAll(t, path, Options{})
	light, _, lerr := readAll(t, path, Options{Light: true})
	var fr, lr *readers.RefusedError
	switch {
	case ferr == nil && lerr == nil:
		if !reflect.DeepEqual(full, light) {
			t.Fatalf("%s: light read gives other entries", path)
		}
	case errors.As(ferr, &fr) && errors.As(lerr, &lr):
		if fr.Line != lr.Line || fr.Class != lr.Class || fr.Reason != lr.Reason {
			t.Fatalf("%s: refused at line %d (%s) %q, light at line %d (%s) %q", path, fr.Line, fr.Class, fr.Reason, lr.Line, lr.Class, lr.Reason)
		}
		// A light read refuses an entry from Next, after the entries
		// before it: those are the ones the file holds.
		for i, e := range light {
			if e.Position >= lr.Line {
				t.Fatalf("%s: entry %d (line %d) handed out before the refusal at line %d", path, i+1, e.Position, lr.Line)
			}
		}
	default:
		t.Fatalf("%s: full read %v, light read %v", path, ferr, lerr)
	}
}

// TestLightSameAnswer: on every vector and on sessions with problems in
// several places, a light pass 1 gives the full read's answer.
func TestLightSameAnswer(t *testing.T) {
	vectors := fixtures.VectorsDir(t)
	files, _ := filepath.Glob(filepath.Join(vectors, "*", "*", "source.jsonl"))
	rejects, _ := filepath.Glob(filepath.Join(vectors, "reject", "*.jsonl"))
	for _, p := range append(files, rejects...) {
		checkSameAnswer(t, p)
	}
	header := `{"type":"session","version":3,"id":"7e1b6f0e-7a52-4c31-9d7a-2f0f4a1b8c01","timestamp":"2026-01-05T10:00:00.000Z","cwd":"/w"}` + "\n"
	entry := func(id, parent string) string {
		p := `"` + parent + `"`
		if parent == "" {
			p = "null"
		}
		return `{"type":"message","id":"` + id + `","parentId":` + p + `,"timestamp":"2026-01-05T10:00:01.000Z","message":{"role":"user","content":"hi","timestamp":1}}` + "\n"
	}
	bad := `{"type":"message","id":"bad1","parentId":"a2","timestamp":"2026-01-05T10:00:01.000Z","message":{"role":"nobody"}}` + "\n"
	idless := `{"type":"message","timestamp":"2026-01-05T10:00:02.000Z","message":{"role":"user","content":"no id","timestamp":2}}` + "\n"
	cases := map[string]string{
		"a bad entry":                        entry("a1", "") + entry("a2", "a1") + bad + entry("a3", "a2"),
		"a bad entry, then a duplicate id":   entry("a1", "") + entry("a2", "a1") + bad + entry("a1", "a2"),
		"a duplicate id, then a bad entry":   entry("a1", "") + entry("a1", "") + bad,
		"a bad entry, then invalid UTF-8":    entry("a1", "") + entry("a2", "a1") + bad + "{\"x\":\"\xff\"}\n",
		"invalid UTF-8, then a bad entry":    entry("a1", "") + "{\"x\":\"\xff\"}\n" + bad,
		"a missing parent":                   entry("a1", "") + entry("a2", "zz"),
		"a bad entry, then a missing parent": entry("a1", "") + bad + entry("a2", "zz"),
		"a cycle":                            entry("a1", "a2") + entry("a2", "a1"),
		"entries without ids":                entry("a1", "") + idless + idless,
		"a bad entry without id":             entry("a1", "") + strings.Replace(idless, `"user"`, `"nobody"`, 1),
		"a torn last line":                   entry("a1", "") + entry("a2", "a1")[:40],
		"not JSON":                           entry("a1", "") + "hello\n",
		"an escaped id":                      entry("a1", "") + strings.Replace(entry("a2", "a1"), `"a2"`, `"\u0061\u0032"`, 1) + entry("a3", "a2"),
	}
	// Long sessions: a problem deep in them, two in a row, on the last
	// line; blank lines between entries; long lines, and a torn end after
	// them.
	chain := func(n int, at map[int]string) string {
		var b strings.Builder
		for i := 1; i <= n; i++ {
			if line, ok := at[i]; ok {
				b.WriteString(line)
				continue
			}
			parent := ""
			if i > 1 {
				parent = fmt.Sprintf("e%d", i-1)
			}
			b.WriteString(entry(fmt.Sprintf("e%d", i), parent))
		}
		return b.String()
	}
	long := strings.Repeat("long text ", 4000)
	cases["many entries"] = chain(1500, nil)
	cases["many entries, a bad one in the fourth batch"] = chain(1500, map[int]string{900: bad})
	cases["many entries, a bad one at a batch's edge"] = chain(1500, map[int]string{256: bad, 257: bad})
	cases["many entries, the last one bad"] = chain(700, map[int]string{700: bad})
	cases["many entries, a duplicate id late"] = chain(1200, map[int]string{1100: entry("e5", "e1099")})
	cases["many entries, blank lines between"] = strings.ReplaceAll(chain(600, nil), "\n{", "\n\n  \n{")
	cases["long lines"] = chain(200, map[int]string{30: strings.Replace(entry("e30", "e29"), `"hi"`, `"`+long+`"`, 1),
		150: strings.Replace(entry("e150", "e149"), `"hi"`, `"`+long+`"`, 1)})
	cases["long lines, a torn end"] = chain(120, map[int]string{60: strings.Replace(entry("e60", "e59"), `"hi"`, `"`+long+`"`, 1)}) + entry("e121", "e120")[:50]
	for name, body := range cases {
		t.Run(name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "s.jsonl")
			if err := os.WriteFile(p, []byte(header+body), 0o600); err != nil {
				t.Fatal(err)
			}
			checkSameAnswer(t, p)
		})
	}
}
