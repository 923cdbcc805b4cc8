package payload

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"pisess/fixtures"
	"strings"
	"testing"
	"unicode"

	"pisess/readers"
)

// vectorsDir is where the reference vectors live (fixtures/vectors). They
// are read in place and never written.
func vectorsDir(tb testing.TB) string {
	tb.Helper()
	return fixtures.VectorsDir(tb)
}

// sourceLine is one entry line of a session file: its 1-based number and
// its bytes with the trailing newline, if it had one.
type sourceLine struct {
	num  int
	text []byte
}

// entryLines returns a session file's entry lines: the header (line 1) and
// lines that Rust's trim() empties are skipped, as the reference skips them.
func entryLines(tb testing.TB, path string) []sourceLine {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	var out []sourceLine
	for i, l := range bytes.SplitAfter(b, []byte("\n")) {
		if i == 0 || len(bytes.TrimFunc(l, unicode.IsSpace)) == 0 {
			continue
		}
		out = append(out, sourceLine{num: i + 1, text: l})
	}
	return out
}

// vectorCases lists the vector folders under the given groups that hold
// marker (a file or directory name).
func vectorCases(tb testing.TB, marker string, groups ...string) []string {
	tb.Helper()
	var out []string
	for _, g := range groups {
		dirs, err := filepath.Glob(filepath.Join(vectorsDir(tb), g, "*"))
		if err != nil {
			tb.Fatal(err)
		}
		for _, d := range dirs {
			if _, err := os.Stat(filepath.Join(d, marker)); err == nil {
				out = append(out, d)
			}
		}
	}
	if len(out) == 0 {
		tb.Fatalf("no vectors with %s under %v", marker, groups)
	}
	return out
}

func caseName(dir string) string {
	return filepath.Base(filepath.Dir(dir)) + "/" + filepath.Base(dir)
}

// synthesize decodes every entry and gives id-less ones the reference's
// legacy id; taken starts with every explicit id in the file.
func synthesize(tb testing.TB, lines []sourceLine) []*Entry {
	tb.Helper()
	entries := make([]*Entry, len(lines))
	taken := map[string]bool{}
	for i, l := range lines {
		e, err := Decode(l.text)
		if err != nil {
			tb.Fatalf("line %d: %v", l.num, err)
		}
		entries[i] = e
		if e.HasID {
			taken[e.ID] = true
		}
	}
	for i, e := range entries {
		if e.HasID {
			continue
		}
		id, err := e.LegacyID(func(s string) bool { return taken[s] })
		if err != nil {
			tb.Fatalf("line %d: %v", lines[i].num, err)
		}
		e.SetID(id)
		taken[id] = true
	}
	return entries
}

func TestVectorsAccepted(t *testing.T) {
	for _, dir := range vectorCases(t, "reference.v2", "accept", "edge", "realpi") {
		t.Run(caseName(dir), func(t *testing.T) {
			lines := entryLines(t, filepath.Join(dir, "source.jsonl"))
			entries := synthesize(t, lines)
			frames := fixtures.ReferenceFrames(t, filepath.Join(dir, "reference.v2"))
			if len(frames) != len(entries) {
				t.Fatalf("%d entries, reference has %d frames", len(entries), len(frames))
			}
			for i, e := range entries {
				if e.ID != frames[i].EntryID {
					t.Errorf("line %d: id %q, reference %q", lines[i].num, e.ID, frames[i].EntryID)
				}
				if got := e.Canonical(); !bytes.Equal(got, frames[i].Payload) {
					t.Errorf("line %d: payload differs\n got: %s\nwant: %s", lines[i].num, got, frames[i].Payload)
				}
			}
		})
	}
}

// refused is a vector's REFUSED file.
type refused struct {
	Error  string `json:"error"`
	Line   int    `json:"line"`
	Detail string `json:"detail"`
}

func TestVectorsRefused(t *testing.T) {
	for _, dir := range vectorCases(t, "REFUSED", "edge", "realpi") {
		t.Run(caseName(dir), func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join(dir, "REFUSED"))
			if err != nil {
				t.Fatal(err)
			}
			var want refused
			if err := json.Unmarshal(raw, &want); err != nil {
				t.Fatal(err)
			}
			lines := entryLines(t, filepath.Join(dir, "source.jsonl"))
			if want.Error != "entry" {
				// Refused by the store, the source graph or the manifest:
				// every entry itself is accepted.
				for _, l := range lines {
					if _, err := Decode(l.text); err != nil {
						t.Errorf("line %d: %v", l.num, err)
					}
				}
				return
			}
			checkFirstRefusal(t, lines, want.Line, want.Detail, "")
		})
	}
}

// checkFirstRefusal asserts that the first refused line is line, with
// detail (and class, when given).
func checkFirstRefusal(t *testing.T, lines []sourceLine, line int, detail string, class readers.Class) {
	t.Helper()
	for _, l := range lines {
		_, err := Decode(l.text)
		if err == nil {
			continue
		}
		var pe *Error
		if !errors.As(err, &pe) {
			t.Fatalf("line %d: error %T, want *Error", l.num, err)
		}
		if l.num != line || pe.Detail != detail {
			t.Fatalf("first refusal at line %d: %q\nwant line %d: %q", l.num, pe.Detail, line, detail)
		}
		if pe.Class == "" || (class != "" && pe.Class != class) {
			t.Fatalf("line %d: class %q, want %q", l.num, pe.Class, class)
		}
		return
	}
	t.Fatalf("no line refused; want line %d: %q", line, detail)
}

func TestRejectVectors(t *testing.T) {
	reject := filepath.Join(vectorsDir(t), "reject")
	const entryTypes = "expected one of `message`, `model_change`, `thinking_level_change`, `compaction`, " +
		"`branch_summary`, `label`, `session_info`, `custom`"
	const roles = "expected one of `user`, `assistant`, `toolResult`, `custom`, `bashExecution`, " +
		"`branchSummary`, `compactionSummary`"
	tests := map[string]struct {
		line   int // 0: every entry decodes (refused elsewhere)
		detail string
		class  readers.Class
	}{
		"reject_assistant_missing_api.jsonl": {2, "missing field `api`", readers.ClassBadEntry},
		"reject_custom_message.jsonl": {2, "unknown variant `custom_message`, " + entryTypes + " at line 1 column 24",
			readers.ClassUnknownType},
		"reject_lone_surrogate.jsonl": {2, "unexpected end of hex escape at line 1 column 136", readers.ClassLoneSurrogate},
		"v2_hookmessage.jsonl":        {2, "unknown variant `hookMessage`, " + roles, readers.ClassUnknownRole},
		// The header's version is refused by the JSONL reader; the entries
		// themselves are fine.
		"v1_header_version_1.jsonl": {},
	}
	files, err := filepath.Glob(filepath.Join(reject, "*.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		name := filepath.Base(f)
		t.Run(name, func(t *testing.T) {
			tt, ok := tests[name]
			if !ok {
				t.Fatalf("no expectation for %s", name)
			}
			lines := entryLines(t, f)
			if tt.line == 0 {
				synthesize(t, lines)
				return
			}
			checkFirstRefusal(t, lines, tt.line, tt.detail, tt.class)
		})
	}
	if len(files) != len(tests) {
		t.Errorf("%d reject files, %d expectations", len(files), len(tests))
	}
}

// The v2 file becomes acceptable once its hookMessage role is renamed, as
// the TypeScript pi's v2 → v3 migration does.
func TestRejectV2Upgraded(t *testing.T) {
	lines := entryLines(t, filepath.Join(vectorsDir(t), "reject", "v2_hookmessage.jsonl"))
	for _, l := range lines {
		up, changed, err := RenameHookRole(l.text)
		if err != nil || !changed {
			t.Fatalf("line %d: changed %v, err %v", l.num, changed, err)
		}
		e, err := Decode(up)
		if err != nil {
			t.Fatalf("line %d: %v", l.num, err)
		}
		if e.Role != "custom" || !strings.Contains(string(e.Canonical()), `"role":"custom"`) {
			t.Fatalf("line %d: %s", l.num, e.Canonical())
		}
	}
}
