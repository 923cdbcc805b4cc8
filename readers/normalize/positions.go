package normalize

import (
	"math"
	"sort"
)

// positions holds each entry's line (or seq) in source order. Entries of a
// session mostly sit on consecutive lines, so they are kept as runs (the
// first entry of a run and its position; the run's next entries follow one
// apart): a million entries of a pi session are one run, where a column
// of them cost 4 MB and, while it grew, up to twice that (issue 14's
// memory target). A source whose entries rarely follow one another (a
// blank line after each) would cost more as runs than as a column, so it
// switches to a column once runs outnumber a third of the entries.
type positions struct {
	n      int32   // entries held
	runAt  []int32 // each run's first entry
	runPos []int64 // its position
	last   int     // the run the latest at looked up (pass 2 reads in order)

	// Once dense: one position an entry, and those that do not fit in 32
	// bits (a seq column may hold anything, lines do not).
	dense []uint32
	big   map[int32]int64
}

const posOverflow = math.MaxUint32

// minRunsForDense keeps a short session in runs however broken they are:
// a few kilobytes either way.
const minRunsForDense = 1024

func (p *positions) add(pos int64) {
	i := p.n
	p.n++
	if p.dense != nil {
		p.addDense(i, pos)
		return
	}
	if k := len(p.runAt) - 1; k >= 0 && p.runPos[k]+int64(i-p.runAt[k]) == pos {
		return
	}
	p.runAt = append(p.runAt, i)
	p.runPos = append(p.runPos, pos)
	if len(p.runAt) > minRunsForDense && 3*len(p.runAt) > int(p.n) {
		p.toDense()
	}
}

func (p *positions) addDense(i int32, pos int64) {
	if pos >= 0 && pos < posOverflow {
		p.dense = append(p.dense, uint32(pos))
		return
	}
	if p.big == nil {
		p.big = map[int32]int64{}
	}
	p.big[i] = pos
	p.dense = append(p.dense, posOverflow)
}

// toDense rewrites the runs as a column; later entries are added to it.
func (p *positions) toDense() {
	n := p.n
	p.dense = make([]uint32, 0, max(int(n)*5/4, 1))
	for i := int32(0); i < n; i++ {
		p.addDense(i, p.runAtPos(i))
	}
	p.runAt, p.runPos, p.last = nil, nil, 0
}

// at is entry i's position.
func (p *positions) at(i int) int64 {
	if p.dense != nil {
		if v := p.dense[i]; v != posOverflow {
			return int64(v)
		}
		return p.big[int32(i)]
	}
	return p.runAtPos(int32(i))
}

func (p *positions) runAtPos(i int32) int64 {
	k := p.last
	if k >= len(p.runAt) || p.runAt[k] > i || (k+1 < len(p.runAt) && p.runAt[k+1] <= i) {
		// The run starting at or before i: sort.Search finds the first
		// starting after it.
		k = sort.Search(len(p.runAt), func(j int) bool { return p.runAt[j] > i }) - 1
		p.last = k
	}
	return p.runPos[k] + int64(i-p.runAt[k])
}
