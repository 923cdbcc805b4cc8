package normalize

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestPositionsRuns: consecutive positions are one run however many
// entries they hold; every break starts a run; any order of lookups gives
// back what was added.
func TestPositionsRuns(t *testing.T) {
	var p positions
	want := []int64{}
	add := func(pos int64) {
		p.add(pos)
		want = append(want, pos)
	}
	for i := int64(0); i < 100000; i++ {
		add(2 + i) // a header on line 1, then one entry a line
	}
	if len(p.runAt) != 1 || p.dense != nil {
		t.Fatalf("100000 consecutive lines: %d runs, dense %v", len(p.runAt), p.dense != nil)
	}
	add(100005) // blank lines before it
	add(100006)
	add(7)                 // out of order (a seq column may hold anything)
	add(math.MaxInt64 - 1) // past 32 bits
	add(math.MaxInt64)
	add(-3)
	if len(p.runAt) != 5 {
		t.Fatalf("runs %v at %v, want 5", p.runPos, p.runAt)
	}
	checkPositions(t, &p, want)
}

// TestPositionsDense: a source whose entries never follow one another is
// held as a column once its runs outnumber a third of its entries, and
// keeps every position exactly, those past 32 bits too.
func TestPositionsDense(t *testing.T) {
	var p positions
	want := []int64{}
	for i := int64(0); i < 3*minRunsForDense; i++ {
		pos := 2 * i // a blank line after each entry
		if i == 5 {
			pos = 1 << 40
		}
		p.add(pos)
		want = append(want, pos)
		if i == 2 && p.dense != nil {
			t.Fatal("three entries went dense")
		}
	}
	if p.dense == nil || p.runAt != nil {
		t.Fatalf("%d broken runs kept as runs", len(want))
	}
	if p.big[5] != 1<<40 {
		t.Fatalf("big %v", p.big)
	}
	p.add(1 << 41)
	want = append(want, 1<<41)
	checkPositions(t, &p, want)
}

func checkPositions(t *testing.T, p *positions, want []int64) {
	t.Helper()
	if int(p.n) != len(want) {
		t.Fatalf("n %d, want %d", p.n, len(want))
	}
	for i, w := range want { // in order, as pass 2 reads
		if got := p.at(i); got != w {
			t.Fatalf("at(%d) in order = %d, want %d", i, got, w)
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 5000 { // and at random, as refusals do
		i := r.IntN(len(want))
		if got := p.at(i); got != want[i] {
			t.Fatalf("at(%d) = %d, want %d", i, got, want[i])
		}
	}
}
