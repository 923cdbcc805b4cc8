package normalize

import (
	"strconv"
	"strings"
	"testing"

	"pisess/readers"
)

// TestRefsLengths: a length of 255 bytes or more is kept whole beside the
// column, and setting a short one again drops it from there.
func TestRefsLengths(t *testing.T) {
	var r refs
	want := []ref{{5, 3}, {8, 300}, {0, 0}, {9, 254}, {11, 255}}
	for _, x := range want {
		r.append(x)
	}
	for i, x := range want {
		if got := r.at(int32(i)); got != x {
			t.Fatalf("at(%d) = %v, want %v", i, got, x)
		}
	}
	r.set(1, ref{1, 2})
	r.set(2, ref{70000, 1 << 20})
	want[1], want[2] = ref{1, 2}, ref{70000, 1 << 20}
	for i, x := range want {
		if got := r.at(int32(i)); got != x {
			t.Fatalf("after set, at(%d) = %v, want %v", i, got, x)
		}
	}
	if len(r.long) != 2 || r.long[2] != 1<<20 || r.long[4] != 255 {
		t.Fatalf("long %v", r.long)
	}
}

// TestLongIDsReported: an id too long for the contract is quoted whole in
// its refusal, and a duplicate of one is found, however long.
func TestLongIDsReported(t *testing.T) {
	long := strings.Repeat("a", 300)
	b := &Builder{Path: "p", Unit: "line"}
	b.Add(2, 2, entry(t, "root", ""))
	b.Add(3, 3, entry(t, long, "root"))
	r := readers.AsRefused(b.Finish(nil))
	if r == nil || r.Class != readers.ClassBadEntryID || r.Line != 3 || !strings.Contains(r.Reason, strconv.Quote(long)) {
		t.Fatalf("%+v", r)
	}
	d := &Builder{Path: "p", Unit: "line"}
	d.Add(2, 2, entry(t, long, ""))
	d.Add(3, 3, entry(t, long, ""))
	r = readers.AsRefused(d.Finish(nil))
	if r == nil || r.Class != readers.ClassDuplicateID || r.Line != 3 || !strings.Contains(r.Reason, long) {
		t.Fatalf("%+v", r)
	}
}
