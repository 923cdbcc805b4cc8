// Package idgraph holds a session's entry ids and parent links in memory
// that holds no pointer: one byte arena for the ids, int32 node numbers,
// an open-addressing hash index. A million entries cost about 25 bytes
// each and nothing for the garbage collector to scan, where a
// map[string]string of the same links costs over a hundred bytes an entry
// and a scan at every collection (issue 14's memory target).
//
// Nodes are numbered in the order they are added. A parent may name an id
// added later, or one never added (a missing parent, which the store's
// parentLinksClosed invariant reports): links are resolved when queried.
package idgraph

import (
	"bytes"
	"errors"
	"hash/maphash"
	"math"
	"slices"
)

// ErrDuplicate: Add was given an id that is a node already.
var ErrDuplicate = errors.New("duplicate entry id")

// ErrFull: the ids exceed the 4 GiB the arena's 32-bit offsets address (some
// 33 million ids of the contract's longest; pi's are 8 characters).
var ErrFull = errors.New("too many entry ids for one session (over 4 GiB of ids)")

// Index maps strings held elsewhere to int32 node numbers: the caller's
// key function gives node n's bytes. It is the hash index of a Graph, and
// of readers/normalize's id table.
type Index struct {
	slots []int32 // 0: empty; else node number + 1
	count int
	seed  maphash.Seed
}

// Lookup returns the node whose key is id, or -1.
func (x *Index) Lookup(id []byte, key func(int32) []byte) int32 {
	if len(x.slots) == 0 {
		return -1
	}
	mask := uint64(len(x.slots) - 1)
	for i := maphash.Bytes(x.seed, id) & mask; ; i = (i + 1) & mask {
		v := x.slots[i]
		if v == 0 {
			return -1
		}
		if bytes.Equal(key(v-1), id) {
			return v - 1
		}
	}
}

// LookupString is Lookup for an id held as a string.
func (x *Index) LookupString(id string, key func(int32) []byte) int32 {
	if len(x.slots) == 0 {
		return -1
	}
	mask := uint64(len(x.slots) - 1)
	for i := maphash.String(x.seed, id) & mask; ; i = (i + 1) & mask {
		v := x.slots[i]
		if v == 0 {
			return -1
		}
		if string(key(v-1)) == id {
			return v - 1
		}
	}
}

// Insert stores node n under its key, which must not be present yet.
func (x *Index) Insert(n int32, key func(int32) []byte) {
	x.Reserve(x.count+1, key)
	x.put(maphash.Bytes(x.seed, key(n)), n+1)
}

// Reserve makes room for n keys in all, so that inserting up to n grows
// the index no more: at most half full, probes stay short.
func (x *Index) Reserve(n int, key func(int32) []byte) {
	if len(x.slots) == 0 {
		x.seed = maphash.MakeSeed()
		x.slots = make([]int32, 1024)
	}
	size := len(x.slots)
	for 2*n > size {
		size *= 2
	}
	if size == len(x.slots) {
		return
	}
	old := x.slots
	x.slots = make([]int32, size)
	x.count = 0
	for _, v := range old {
		if v != 0 {
			x.put(maphash.Bytes(x.seed, key(v-1)), v)
		}
	}
}

func (x *Index) put(h uint64, v int32) {
	mask := uint64(len(x.slots) - 1)
	i := h & mask
	for x.slots[i] != 0 {
		i = (i + 1) & mask
	}
	x.slots[i] = v
	x.count++
}

// Link values of Graph.parent besides a node number.
const (
	noParent = -1 // a root
	// A parent not (yet) among the nodes is -2-k, k its place in pending.
)

type pendingLink struct {
	child    int32
	off, end uint32 // the parent id in spill
}

// Graph is a set of entry ids with one parent link each.
type Graph struct {
	arena  []byte
	ends   []uint32 // node n's id is arena[ends[n-1]:ends[n]] (from 0 for n = 0)
	parent []int32
	kids   []uint8 // children per node, saturating at 2
	index  Index

	branches uint64        // nodes with two or more children
	pending  []pendingLink // links whose parent was not a node when set
	spill    []byte        // the pending links' parent ids
}

func (g *Graph) key(n int32) []byte {
	start := uint32(0)
	if n > 0 {
		start = g.ends[n-1]
	}
	return g.arena[start:g.ends[n]]
}

// Len is the number of nodes.
func (g *Graph) Len() int { return len(g.ends) }

// ID is node n's id.
func (g *Graph) ID(n int) string { return string(g.key(int32(n))) }

// Lookup returns the node with id, or -1.
func (g *Graph) Lookup(id string) int { return int(g.index.LookupString(id, g.key)) }

// Has reports whether id is a node.
func (g *Graph) Has(id string) bool { return g.Lookup(id) >= 0 }

// Grow makes room for n more nodes whose ids take about idBytes in all,
// so that adding them allocates and rehashes nothing: a hint, from a
// count the caller has bounded (a manifest's, against its index's size).
func (g *Graph) Grow(n, idBytes int) {
	if n <= 0 {
		return
	}
	g.arena = slices.Grow(g.arena, idBytes)
	g.ends = slices.Grow(g.ends, n)
	g.parent = slices.Grow(g.parent, n)
	g.kids = slices.Grow(g.kids, n)
	g.index.Reserve(len(g.ends)+n, g.key)
}

// Add adds id as a new node without a parent and returns its number.
func (g *Graph) Add(id string) (int, error) {
	if g.Has(id) {
		return -1, ErrDuplicate
	}
	if err := g.room(len(id)); err != nil {
		return -1, err
	}
	g.arena = append(g.arena, id...)
	g.ends = append(g.ends, uint32(len(g.arena)))
	g.parent = append(g.parent, noParent)
	g.kids = append(g.kids, 0)
	n := int32(len(g.ends) - 1)
	g.index.Insert(n, g.key)
	return int(n), nil
}

func (g *Graph) room(n int) error {
	if uint64(len(g.arena))+uint64(n) > math.MaxUint32 || len(g.ends) >= math.MaxInt32-1 {
		return ErrFull
	}
	return nil
}

// SetParent gives node n the parent id ("" for a root). It is called at
// most once per node.
func (g *Graph) SetParent(n int, parent string) error {
	if parent == "" {
		return nil
	}
	if p := g.Lookup(parent); p >= 0 {
		g.link(int32(n), int32(p))
		return nil
	}
	if uint64(len(g.spill))+uint64(len(parent)) > math.MaxUint32 {
		return ErrFull
	}
	off := uint32(len(g.spill))
	g.spill = append(g.spill, parent...)
	g.parent[n] = int32(-2 - len(g.pending))
	g.pending = append(g.pending, pendingLink{child: int32(n), off: off, end: uint32(len(g.spill))})
	return nil
}

func (g *Graph) link(child, p int32) {
	g.parent[child] = p
	if g.kids[p] < 2 {
		g.kids[p]++
		if g.kids[p] == 2 {
			g.branches++
		}
	}
}

// resolve links the pending children whose parent has become a node.
func (g *Graph) resolve() {
	kept := g.pending[:0]
	for _, pl := range g.pending {
		if p := g.index.Lookup(g.spill[pl.off:pl.end], g.key); p >= 0 {
			g.link(pl.child, p)
			continue
		}
		g.parent[pl.child] = int32(-2 - len(kept))
		kept = append(kept, pl)
	}
	g.pending = kept
	if len(kept) == 0 {
		g.spill = g.spill[:0]
	}
}

// Branches counts the parents with two or more children, a missing
// parent's id counted as one parent (the manifest's branchesTotal).
func (g *Graph) Branches() uint64 {
	g.resolve()
	n := g.branches
	if len(g.pending) > 1 {
		seen := map[string]int{}
		for _, pl := range g.pending {
			seen[string(g.spill[pl.off:pl.end])]++
		}
		for _, c := range seen {
			if c > 1 {
				n++
			}
		}
	}
	return n
}

// MissingParent returns, among the nodes whose parent is not a node, the
// one with the smallest id (byte order) and that parent; ok is false when
// every link is closed.
func (g *Graph) MissingParent() (id, parent string, ok bool) {
	g.resolve()
	if len(g.pending) == 0 {
		return "", "", false
	}
	best := 0
	for i := 1; i < len(g.pending); i++ {
		if bytes.Compare(g.key(g.pending[i].child), g.key(g.pending[best].child)) < 0 {
			best = i
		}
	}
	pl := g.pending[best]
	return g.ID(int(pl.child)), string(g.spill[pl.off:pl.end]), true
}

// HasCycle reports whether following parents from some node comes back to
// a node on the same walk (a node naming itself included). Links to
// missing parents end a walk.
func (g *Graph) HasCycle() bool {
	_, ok := g.Cycle()
	return ok
}

// Cycle returns the id of a node on a cycle: the first node the walks,
// started from each node in order, come back to.
func (g *Graph) Cycle() (string, bool) {
	g.resolve()
	const (
		visiting = 1
		done     = 2
	)
	state := make([]uint8, len(g.parent))
	for start := range g.parent {
		n := int32(start)
		for n >= 0 && state[n] == 0 {
			state[n] = visiting
			n = g.parent[n]
		}
		if n >= 0 && state[n] == visiting {
			return g.ID(int(n)), true
		}
		for n := int32(start); n >= 0 && state[n] == visiting; n = g.parent[n] {
			state[n] = done
		}
	}
	return "", false
}
