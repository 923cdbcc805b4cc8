package normalize

import (
	"math"

	"pisess/writers/idgraph"
)

// idTable interns the ids (and the parent ids not yet resolved) of a
// session. Everything it holds is pointer-free (one byte arena, offsets,
// idgraph's open-addressing index of int32), so the garbage collector never
// scans it: a session's per-entry state costs no GC work however many
// entries it has, which matters because decoding allocates heavily and
// collections are frequent.
type idTable struct {
	arena []byte
	index idgraph.Index
}

// ref is a string in the arena.
type ref struct{ off, n uint32 }

func (t *idTable) add(s string) ref {
	r := ref{uint32(len(t.arena)), uint32(len(s))}
	t.arena = append(t.arena, s...)
	return r
}

func (t *idTable) str(r ref) string { return string(t.bytes(r)) }

func (t *idTable) bytes(r ref) []byte { return t.arena[r.off : r.off+r.n] }

// refs holds a ref an entry in five bytes instead of eight: the offset,
// and the length in a byte. A string of longLen bytes or more (never a
// valid id: the contract allows 128) keeps its length in long. A million
// entries save 3 MB of pass 1's peak (issue 14's memory target).
type refs struct {
	off  []uint32
	n    []uint8
	long map[int32]uint32
}

const longLen = math.MaxUint8

func (r *refs) len() int { return len(r.off) }

func (r *refs) append(x ref) {
	r.off = append(r.off, 0)
	r.n = append(r.n, 0)
	r.set(int32(len(r.off)-1), x)
}

func (r *refs) set(i int32, x ref) {
	r.off[i] = x.off
	if x.n < longLen {
		r.n[i] = uint8(x.n)
		delete(r.long, i)
		return
	}
	r.n[i] = longLen
	if r.long == nil {
		r.long = map[int32]uint32{}
	}
	r.long[i] = x.n
}

func (r *refs) at(i int32) ref {
	n := uint32(r.n[i])
	if n == longLen {
		n = r.long[i]
	}
	return ref{r.off[i], n}
}
