package normalize

import "pisess/writers/idgraph"

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
