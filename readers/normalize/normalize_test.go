package normalize

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"pisess/readers"
	"pisess/readers/payload"
)

func TestRustTrim(t *testing.T) {
	ws := "\t\n\v\f\r \u0085\u00a0\u1680\u2000\u2005\u200a\u2028\u2029\u202f\u205f\u3000"
	if got := RustTrim([]byte(ws + "x" + ws)); string(got) != "x" {
		t.Fatalf("%q", got)
	}
	// Not White_Space: the byte-order mark, zero-width space, the Mongolian
	// vowel separator (no longer White_Space since Unicode 6.3).
	for _, r := range []string{"\ufeff", "\u200b", "\u180e"} {
		if got := RustTrim([]byte(" " + r + " ")); string(got) != r {
			t.Errorf("%q trimmed to %q", r, got)
		}
	}
}

// TestUTF8Error pins Rust's Utf8Error (valid_up_to, error_len).
func TestUTF8Error(t *testing.T) {
	cases := []struct {
		in         string
		valid, bad int // bad 0: incomplete
		msg        string
	}{
		{"ab\xffc", 2, 1, "invalid utf-8 sequence of 1 bytes from index 2"},
		{"\xc0\x80", 0, 1, ""},         // overlong
		{"\xe0\x80\x80", 0, 1, ""},     // overlong
		{"a\xed\xa0\x80", 1, 1, ""},    // encoded surrogate
		{"\xf4\x90\x80\x80", 0, 1, ""}, // above U+10FFFF
		{"\xf5", 0, 1, ""},             // never a lead byte
		{"x\xe6\x97", 1, 0, "incomplete utf-8 byte sequence from index 1"},
		{"\xe6\x97A", 0, 2, ""},
		{"\xf0\x9f\x98A", 0, 3, "invalid utf-8 sequence of 3 bytes from index 0"},
		{"\xf0\x9f\x98", 0, 0, ""},
		{"\xe6\x97\n", 0, 2, ""}, // a cut sequence before the newline is invalid, not incomplete
	}
	for _, c := range cases {
		valid, bad, ok := UTF8Error([]byte(c.in))
		if ok || valid != c.valid || bad != c.bad {
			t.Errorf("%q: %d %d %v, want %d %d", c.in, valid, bad, ok, c.valid, c.bad)
		}
		if c.msg != "" && UTF8Message(valid, bad) != c.msg {
			t.Errorf("%q: %s", c.in, UTF8Message(valid, bad))
		}
	}
	if _, _, ok := UTF8Error([]byte("héllo 😀")); !ok {
		t.Error("valid text refused")
	}
}

func entry(tb testing.TB, id, parent string) *payload.Entry {
	tb.Helper()
	line := `{"type":"label",`
	if id != "" {
		line += `"id":"` + id + `",`
	}
	if parent != "" {
		line += `"parentId":"` + parent + `",`
	}
	e, err := payload.Decode([]byte(line + `"timestamp":"t","targetId":"x"}`))
	if err != nil {
		tb.Fatal(err)
	}
	return e
}

// TestBuilderMany: the pointer-free id table through several growths, a
// long chain, and Resolve in order.
func TestBuilderMany(t *testing.T) {
	b := &Builder{Path: "p", Unit: "line"}
	const n = 50000
	for i := range n {
		parent := ""
		if i > 0 {
			parent = fmt.Sprintf("id%d", i-1)
		}
		b.Add(int64(i+2), 0, entry(t, fmt.Sprintf("id%d", i), parent))
	}
	if err := b.Finish(nil); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		id, synth, err := b.Resolve(int64(i+2), entry(t, fmt.Sprintf("id%d", i), map[bool]string{true: "", false: fmt.Sprintf("id%d", i-1)}[i == 0]))
		if err != nil || synth || id != fmt.Sprintf("id%d", i) {
			t.Fatalf("%d: %s %v %v", i, id, synth, err)
		}
	}
	if !b.Done() {
		t.Fatal("not done")
	}
}

// TestLongCycle: a cycle of 20 entries is named from its earliest member,
// shortened.
func TestLongCycle(t *testing.T) {
	b := &Builder{Path: "p", Unit: "seq"}
	b.Add(1, 1, entry(t, "root", ""))
	for i := range 20 {
		b.Add(int64(i+2), int64(i+2), entry(t, fmt.Sprintf("c%d", i), fmt.Sprintf("c%d", (i+1)%20)))
	}
	err := b.Finish(nil)
	r := readers.AsRefused(err)
	if r == nil || r.Class != readers.ClassParentCycle || r.Line != 2 {
		t.Fatalf("%v", err)
	}
	if !strings.Contains(r.Reason, "c0 → c1 → c2") || !strings.Contains(r.Reason, "(20 entries)") || !strings.Contains(r.Reason, "seqs 2, 3") {
		t.Fatalf("%s", r.Reason)
	}
}

// TestResolveMismatch: a second pass that differs from the first means the
// source changed while it was read (readers.ErrSourceChanged), no refusal.
func TestResolveMismatch(t *testing.T) {
	b := &Builder{Path: "p", Unit: "line"}
	b.Add(2, 0, entry(t, "a", ""))
	if err := b.Finish(nil); err != nil {
		t.Fatal(err)
	}
	_, _, err := b.Resolve(2, entry(t, "b", ""))
	if !errors.Is(err, readers.ErrSourceChanged) || readers.AsRefused(err) != nil {
		t.Fatalf("%v", err)
	}
}

// TestBuilderAgreesWithModel: random sessions with duplicates, parents
// named before and after their entry, missing parents, self-parents and
// cycles get the verdict a plain-map reading of the reference's order
// gives (duplicate, then the first missing parent in source order, then
// the cycle with the earliest member), and a clean one resolves every
// entry with its parent checked.
func TestBuilderAgreesWithModel(t *testing.T) {
	for seed := range 400 {
		rng := rand.New(rand.NewPCG(uint64(seed), 3))
		n := 1 + rng.IntN(60)
		ids, parents := make([]string, n), make([]string, n)
		for i := range n {
			ids[i] = fmt.Sprintf("e%d", i)
			switch r := rng.IntN(100); {
			case r < 2 && i > 0 && seed%4 == 0:
				ids[i] = ids[rng.IntN(i)] // duplicate
			case r < 4 && seed%4 == 1:
				parents[i] = fmt.Sprintf("gone%d", rng.IntN(3))
			case r < 6 && seed%4 == 2:
				parents[i] = fmt.Sprintf("e%d", i+rng.IntN(4)) // itself or a later entry: maybe a cycle
			case r < 15 || i == 0:
			default:
				parents[i] = ids[rng.IntN(i)]
			}
		}
		want, wantPos := modelVerdict(ids, parents)
		b := &Builder{Path: "p", Unit: "line"}
		for i := range n {
			b.Add(int64(i+2), 0, entry(t, ids[i], parents[i]))
		}
		err := b.Finish(nil)
		r := readers.AsRefused(err)
		switch {
		case want == "" && err != nil:
			t.Fatalf("seed %d: %v, want no refusal", seed, err)
		case want != "" && (r == nil || r.Class != want || r.Line != wantPos):
			t.Fatalf("seed %d: %v, want %s at line %d", seed, err, want, wantPos)
		case want != "":
			continue
		}
		for i := range n {
			if id, _, err := b.Resolve(int64(i+2), entry(t, ids[i], parents[i])); err != nil || id != ids[i] {
				t.Fatalf("seed %d: resolve %d: %q %v", seed, i, id, err)
			}
		}
		if n > 1 && parents[n-1] != "" {
			// The same entries with another parent at the end: a changed source.
			c := &Builder{Path: "p", Unit: "line"}
			for i := range n {
				c.Add(int64(i+2), 0, entry(t, ids[i], parents[i]))
			}
			if err := c.Finish(nil); err != nil {
				t.Fatal(err)
			}
			for i := range n - 1 {
				c.Resolve(int64(i+2), entry(t, ids[i], parents[i]))
			}
			if _, _, err := c.Resolve(int64(n+1), entry(t, ids[n-1], "")); !errors.Is(err, readers.ErrSourceChanged) {
				t.Fatalf("seed %d: a lost parent in the second pass is not noticed", seed)
			}
		}
	}
}

func modelVerdict(ids, parents []string) (readers.Class, int64) {
	seen := map[string]bool{}
	for i, id := range ids {
		if seen[id] {
			return readers.ClassDuplicateID, int64(i + 2)
		}
		seen[id] = true
	}
	at := map[string]int{}
	for i, id := range ids {
		at[id] = i
	}
	for i, p := range parents {
		if _, ok := at[p]; p != "" && !ok {
			return readers.ClassMissingParent, int64(i + 2)
		}
	}
	best := -1
	for start := range ids {
		// start is on a cycle when walking up from it comes back to it.
		cur, steps := start, 0
		for parents[cur] != "" && steps <= len(ids) {
			cur = at[parents[cur]]
			steps++
			if cur == start {
				if best < 0 || start < best {
					best = start
				}
				break
			}
		}
	}
	if best >= 0 {
		return readers.ClassParentCycle, int64(best + 2)
	}
	return "", 0
}

// TestBigPositions: a position past 32 bits (a SQLite seq may be any
// integer) is kept exactly, in refusals and in the second pass.
func TestBigPositions(t *testing.T) {
	b := &Builder{Path: "p", Unit: "seq"}
	big := int64(1) << 40
	b.Add(7, 7, entry(t, "a", ""))
	b.Add(big, big, entry(t, "b", "gone"))
	r := readers.AsRefused(b.Finish(nil))
	if r == nil || r.Class != readers.ClassMissingParent || r.Line != big {
		t.Fatalf("%+v", r)
	}
	c := &Builder{Path: "p", Unit: "seq"}
	c.Add(big, big, entry(t, "a", ""))
	c.Add(big+1, big+1, entry(t, "b", "a"))
	if err := c.Finish(nil); err != nil {
		t.Fatal(err)
	}
	for i, id := range []string{"a", "b"} {
		parent := map[string]string{"a": "", "b": "a"}[id]
		if _, _, err := c.Resolve(big+int64(i), entry(t, id, parent)); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := (&Builder{}).Resolve(0, entry(t, "x", "")); err == nil {
		t.Fatal("an unfinished builder resolves")
	}
}
