package idgraph

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"
)

// model is the plain-map version of the same facts: the Graph must agree
// with it on every random graph.
type model struct {
	order   []string
	parents map[string]string
}

func (m *model) branches() uint64 {
	kids := map[string]int{}
	for _, p := range m.parents {
		if p != "" {
			kids[p]++
		}
	}
	var n uint64
	for _, k := range kids {
		if k > 1 {
			n++
		}
	}
	return n
}

func (m *model) missing() (string, string, bool) {
	ids := append([]string(nil), m.order...)
	sort.Strings(ids)
	for _, id := range ids {
		if p := m.parents[id]; p != "" {
			if _, ok := m.parents[p]; !ok {
				return id, p, true
			}
		}
	}
	return "", "", false
}

func (m *model) cycle() bool {
	for _, start := range m.order {
		seen := map[string]bool{}
		for cur := start; cur != ""; cur = m.parents[cur] {
			if seen[cur] {
				return true
			}
			if _, ok := m.parents[cur]; !ok {
				break
			}
			seen[cur] = true
		}
	}
	return false
}

func TestGraphAgreesWithMaps(t *testing.T) {
	for seed := uint64(0); seed < 300; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		n := 1 + rng.IntN(3000)
		if seed%10 == 0 {
			n = 1 + rng.IntN(5)
		}
		id := func(i int) string { return fmt.Sprintf("%x", i*2654435761%(1<<32)) }
		var g Graph
		m := &model{parents: map[string]string{}}
		for i := 0; i < n; i++ {
			eid := id(i)
			if rng.IntN(200) == 0 && i > 0 {
				eid = id(rng.IntN(i)) // a duplicate: refused, nothing added
			}
			parent := ""
			switch r := rng.IntN(100); {
			case i == 0 || r < 3:
			case r < 5:
				parent = id(i + 1 + rng.IntN(5)) // a later entry, or never added
			case r < 6:
				parent = "missing-" + id(rng.IntN(3))
			case r < 7 && seed%3 == 0:
				parent = eid // itself: a cycle
			default:
				parent = id(rng.IntN(i))
			}
			node, err := g.Add(eid)
			if _, dup := m.parents[eid]; dup {
				if !errors.Is(err, ErrDuplicate) || node != -1 {
					t.Fatalf("seed %d: Add(%q) of a duplicate = %d, %v", seed, eid, node, err)
				}
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := g.SetParent(node, parent); err != nil {
				t.Fatal(err)
			}
			m.order = append(m.order, eid)
			m.parents[eid] = parent
			if rng.IntN(500) == 0 { // queries in the middle resolve what they can
				if got, want := g.Branches(), m.branches(); got != want {
					t.Fatalf("seed %d at %d: Branches %d, maps say %d", seed, i, got, want)
				}
			}
		}
		if g.Len() != len(m.order) {
			t.Fatalf("seed %d: Len %d, want %d", seed, g.Len(), len(m.order))
		}
		for i, want := range m.order {
			if g.ID(i) != want || g.Lookup(want) != i {
				t.Fatalf("seed %d: node %d is %q (lookup %d), want %q", seed, i, g.ID(i), g.Lookup(want), want)
			}
		}
		if got, want := g.Branches(), m.branches(); got != want {
			t.Fatalf("seed %d: Branches %d, maps say %d", seed, got, want)
		}
		gi, gp, gok := g.MissingParent()
		mi, mp, mok := m.missing()
		if gi != mi || gp != mp || gok != mok {
			t.Fatalf("seed %d: MissingParent %q %q %v, maps say %q %q %v", seed, gi, gp, gok, mi, mp, mok)
		}
		if got, want := g.HasCycle(), m.cycle(); got != want {
			t.Fatalf("seed %d: HasCycle %v, maps say %v", seed, got, want)
		}
		if id, ok := g.Cycle(); ok {
			// The id named is on a cycle: walking up from it comes back.
			cur, back := m.parents[id], false
			for range len(m.order) + 1 {
				if cur == id {
					back = true
					break
				}
				if _, ok := m.parents[cur]; !ok || cur == "" {
					break
				}
				cur = m.parents[cur]
			}
			if !back {
				t.Fatalf("seed %d: Cycle names %q, which is not on a cycle", seed, id)
			}
		}
	}
}

func TestGraphLongCycle(t *testing.T) {
	var g Graph
	const n = 100000
	for i := 0; i < n; i++ {
		if _, err := g.Add(fmt.Sprint(i)); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < n; i++ {
		if err := g.SetParent(i, fmt.Sprint((i+1)%n)); err != nil {
			t.Fatal(err)
		}
	}
	if !g.HasCycle() {
		t.Fatal("a ring of 100000 nodes is not reported as a cycle")
	}
	if _, _, ok := g.MissingParent(); ok {
		t.Fatal("a ring has no missing parent")
	}
}

// BenchmarkGraphMemory reports the bytes a million pi-style ids and their
// links hold, beside a map[string]string of the same links.
func BenchmarkGraphMemory(b *testing.B) {
	const n = 1000000
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("%08x", uint32(i)*2654435761)
	}
	b.Run("idgraph", func(b *testing.B) {
		for range b.N {
			var g Graph
			for i, id := range ids {
				g.Add(id)
				if i > 0 {
					g.SetParent(i, ids[i-1])
				}
			}
			b.ReportMetric(float64(len(g.arena)+4*len(g.ends)+4*len(g.parent)+len(g.kids)+4*len(g.index.slots))/n, "bytes/entry")
		}
	})
}
