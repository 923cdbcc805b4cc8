package normalize

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"pisess/readers"
	"pisess/readers/payload"
)

// Builder collects the first pass over a session's entries and decides,
// in Finish, everything the reference decides once all entries have
// parsed. Unit names a position in reasons ("line" for JSONL, "seq" for
// SQLite).
type Builder struct {
	Path string
	Unit string

	nodes  []node
	ids    idTable // explicit ids (first occurrence) and synthesized ids
	dup    *duplicate
	idless int

	finished bool
	cursor   int // Resolve's position in nodes
}

// node is one entry. It holds no pointer (see idTable).
type node struct {
	id     ref   // explicit id, or the synthesized one after Finish
	parent ref   // when flags has fParent
	pos    int64 // line or seq, for messages and for Resolve
	loc    int64 // the caller's handle to fetch the entry again
	flags  uint8
}

func (b *Builder) idOf(i int32) ref { return b.nodes[i].id }

// lookup returns the index of the entry with id, or -1.
func (b *Builder) lookup(id string) int32 { return b.ids.lookup(id, b.idOf) }

func (b *Builder) idString(i int) string { return b.ids.str(b.nodes[i].id) }

const (
	fExplicit uint8 = 1 << iota // the source gave the id
	fParent                     // the entry has a parent
)

type duplicate struct {
	id            string
	first, second int64
}

// Add records the entry at pos (fetchable again through loc). Entries must
// be added in source order. It never fails: a duplicate id is remembered
// and reported by Finish, after every entry has parsed, as the reference
// reports it.
func (b *Builder) Add(pos, loc int64, e *payload.Entry) {
	n := node{pos: pos, loc: loc}
	if e.HasParent {
		n.parent, n.flags = b.ids.add(e.ParentID), fParent
	}
	if !e.HasID {
		b.idless++
		b.nodes = append(b.nodes, n)
		return
	}
	n.flags |= fExplicit
	j := b.lookup(e.ID)
	if j >= 0 {
		n.id = b.nodes[j].id // the same bytes: no need to store them twice
		if b.dup == nil {
			b.dup = &duplicate{id: e.ID, first: b.nodes[j].pos, second: pos}
		}
		b.nodes = append(b.nodes, n)
		return
	}
	n.id = b.ids.add(e.ID)
	b.nodes = append(b.nodes, n)
	b.ids.insert(e.ID, int32(len(b.nodes)-1), b.idOf)
}

// Len is the number of entries added.
func (b *Builder) Len() int { return len(b.nodes) }

// Fetch reads the entry at loc again, for id synthesis. Its errors are
// returned as they are.
type Fetch func(loc int64) (*payload.Entry, error)

// Finish checks the whole session, in the reference's order
// (read_jsonl_entries_for_v2): synthesize the id of every entry without one
// (taken: every explicit id anywhere, plus the ids synthesized so far, in
// source order), refuse a duplicate id, refuse a parent that names no
// entry, refuse a parent cycle (an entry naming itself included), then
// refuse ids outside the V2 entry-id contract (the reference writes those
// and fails when it reads its store back). Every refusal is a
// *readers.RefusedError.
func (b *Builder) Finish(fetch Fetch) error {
	if b.finished {
		return errors.New("normalize: Finish called twice")
	}
	b.finished = true
	if err := b.synthesize(fetch); err != nil {
		return err
	}
	if d := b.dup; d != nil {
		return b.refuse(d.second, readers.ClassDuplicateID, fmt.Sprintf(
			"session contains duplicate entry ID %s (%s %d and %s %d)", d.id, b.Unit, d.first, b.Unit, d.second))
	}
	parents := make([]int32, len(b.nodes)) // -1: no parent
	for i, n := range b.nodes {
		parents[i] = -1
		if n.flags&fParent == 0 {
			continue
		}
		p := b.ids.lookupBytes(b.ids.bytes(n.parent), b.idOf)
		if p < 0 {
			return b.refuse(n.pos, readers.ClassMissingParent, fmt.Sprintf(
				"session entry %s references missing parent %s", b.idString(i), b.ids.str(n.parent)))
		}
		parents[i] = p
	}
	if err := b.cycles(parents); err != nil {
		return err
	}
	for i, n := range b.nodes {
		if id := b.idString(i); n.flags&fExplicit != 0 && !payload.ValidEntryID(id) {
			return b.refuse(n.pos, readers.ClassBadEntryID, fmt.Sprintf(
				"entry id %s does not match the V2 entry-id contract ^[A-Za-z0-9_-]{1,128}$", strconv.Quote(id)))
		}
	}
	b.ids.slots = nil // Resolve walks nodes in order; the index is no longer needed
	return nil
}

func (b *Builder) synthesize(fetch Fetch) error {
	if b.idless == 0 {
		return nil
	}
	taken := func(id string) bool { return b.lookup(id) >= 0 }
	for i := range b.nodes {
		n := &b.nodes[i]
		if n.flags&fExplicit != 0 {
			continue
		}
		e, err := fetch(n.loc)
		if err != nil {
			return err
		}
		if e.HasID {
			return b.refuse(n.pos, readers.ClassIO, "source changed while it was read: the entry now has an id")
		}
		id, err := e.LegacyID(taken)
		if err != nil {
			class, detail := readers.ClassNondeterministic, err.Error()
			var pe *payload.Error
			if errors.As(err, &pe) {
				class, detail = pe.Class, pe.Detail
			}
			return &readers.RefusedError{Path: b.Path, Line: n.pos, Class: class, Reason: detail, Err: err}
		}
		n.id = b.ids.add(id)
		b.ids.insert(id, int32(i), b.idOf)
	}
	return nil
}

// cycles finds parent cycles. Each entry has at most one parent, so the
// parent links form a functional graph: walking up from every entry and
// colouring what was walked finds each cycle once. The cycle reported is
// the one whose earliest member comes first in the source.
func (b *Builder) cycles(parents []int32) error {
	const (
		unseen = iota
		walking
		done
	)
	state := make([]uint8, len(b.nodes))
	parentOf := func(i int) int { return int(parents[i]) }
	best := -1 // earliest member of any cycle found
	var bestCycle []int
	var path []int
	for start := range b.nodes {
		if state[start] != unseen {
			continue
		}
		path = path[:0]
		i := start
		for i >= 0 && state[i] == unseen {
			state[i] = walking
			path = append(path, i)
			i = parentOf(i)
		}
		if i >= 0 && state[i] == walking {
			// path from i on is a cycle
			k := len(path) - 1
			for path[k] != i {
				k--
			}
			cycle := append([]int(nil), path[k:]...)
			lo := cycle[0]
			for _, c := range cycle {
				if c < lo {
					lo = c
				}
			}
			if best < 0 || lo < best {
				best, bestCycle = lo, cycle
			}
		}
		for _, p := range path {
			state[p] = done
		}
	}
	if best < 0 {
		return nil
	}
	n := b.nodes[best]
	if len(bestCycle) == 1 {
		return b.refuse(n.pos, readers.ClassParentCycle, fmt.Sprintf(
			"session entry %s names itself as its parent: the parent graph contains a cycle", b.idString(best)))
	}
	// Describe the cycle from its earliest member, following parent links.
	var ids, where []string
	i := best
	for k := 0; k < len(bestCycle); k++ {
		if k < 8 {
			ids = append(ids, b.idString(i))
			where = append(where, strconv.FormatInt(b.nodes[i].pos, 10))
		}
		i = parentOf(i)
	}
	more := ""
	if len(bestCycle) > 8 {
		more = fmt.Sprintf(" … (%d entries)", len(bestCycle))
	}
	return b.refuse(n.pos, readers.ClassParentCycle, fmt.Sprintf(
		"session parent graph contains a cycle: %s → %s%s (%ss %s%s)",
		strings.Join(ids, " → "), b.idString(best), more, b.Unit, strings.Join(where, ", "), more))
}

func (b *Builder) refuse(pos int64, class readers.Class, reason string) error {
	return &readers.RefusedError{Path: b.Path, Line: pos, Class: class, Reason: reason}
}

// Resolve is the second pass: it is given the entries again, in the same
// order, and returns each one's id (synthesized when the source had none,
// in which case it is also set on e), after checking that the entry is the
// one Finish checked. A mismatch means the source changed between the
// passes: a *readers.RefusedError of class io.
func (b *Builder) Resolve(pos int64, e *payload.Entry) (id string, synthesized bool, err error) {
	if !b.finished || b.cursor >= len(b.nodes) {
		return "", false, b.refuse(pos, readers.ClassIO, "source changed while it was read: more entries than in the first pass")
	}
	n := &b.nodes[b.cursor]
	b.cursor++
	same := n.pos == pos && e.HasID == (n.flags&fExplicit != 0) && e.HasParent == (n.flags&fParent != 0) &&
		(!e.HasID || e.ID == string(b.ids.bytes(n.id))) && (!e.HasParent || e.ParentID == string(b.ids.bytes(n.parent)))
	if !same {
		return "", false, b.refuse(pos, readers.ClassIO, "source changed while it was read: this entry differs from the first pass")
	}
	if !e.HasID {
		id := b.ids.str(n.id)
		e.SetID(id)
		return id, true, nil
	}
	return e.ID, false, nil
}

// Done reports whether Resolve has been given every entry.
func (b *Builder) Done() bool { return b.cursor == len(b.nodes) }
