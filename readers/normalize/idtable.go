package normalize

import (
	"bytes"
	"hash/maphash"
)

// idTable interns the ids and parent ids of a session. Everything it holds
// is pointer-free (one byte arena, offsets, an open-addressing index of
// int32), so the garbage collector never scans it: a session's per-entry
// state costs no GC work however many entries it has, which matters
// because decoding allocates heavily and collections are frequent.
type idTable struct {
	arena []byte
	slots []int32 // 0: empty; else node index + 1
	count int
	seed  maphash.Seed
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

// lookup returns the node index stored for id, or -1. nodes gives each
// stored node's id ref.
func (t *idTable) lookup(id string, idOf func(int32) ref) int32 {
	if len(t.slots) == 0 {
		return -1
	}
	mask := uint64(len(t.slots) - 1)
	for i := maphash.String(t.seed, id) & mask; ; i = (i + 1) & mask {
		v := t.slots[i]
		if v == 0 {
			return -1
		}
		if string(t.bytes(idOf(v-1))) == id {
			return v - 1
		}
	}
}

// lookupBytes is lookup for an id held as bytes (one of the arena's).
func (t *idTable) lookupBytes(id []byte, idOf func(int32) ref) int32 {
	if len(t.slots) == 0 {
		return -1
	}
	mask := uint64(len(t.slots) - 1)
	for i := maphash.Bytes(t.seed, id) & mask; ; i = (i + 1) & mask {
		v := t.slots[i]
		if v == 0 {
			return -1
		}
		if bytes.Equal(t.bytes(idOf(v-1)), id) {
			return v - 1
		}
	}
}

// insert stores node index ni under id, which must not be present.
func (t *idTable) insert(id string, ni int32, idOf func(int32) ref) {
	if len(t.slots) == 0 {
		t.seed = maphash.MakeSeed()
		t.slots = make([]int32, 1024)
	}
	if 2*(t.count+1) > len(t.slots) {
		old := t.slots
		t.slots = make([]int32, 2*len(old))
		t.count = 0
		for _, v := range old {
			if v != 0 {
				t.put(maphash.Bytes(t.seed, t.bytes(idOf(v-1))), v)
			}
		}
	}
	t.put(maphash.String(t.seed, id), ni+1)
}

func (t *idTable) put(h uint64, v int32) {
	mask := uint64(len(t.slots) - 1)
	i := h & mask
	for t.slots[i] != 0 {
		i = (i + 1) & mask
	}
	t.slots[i] = v
	t.count++
}
