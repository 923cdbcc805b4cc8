package normalize

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"pisess/readers"
	"pisess/readers/payload"
	"pisess/writers/idgraph"
)

// Builder collects the first pass over a session's entries and decides,
// in Finish, everything the reference decides once all entries have
// parsed. Unit names a position in reasons ("line" for JSONL, "seq" for
// SQLite).
//
// Its per-entry state is held column by column in pointer-free slices
// (10 bytes an entry, 4 to 8 more in the id index, besides the id's own
// bytes; positions are runs): a session of a million entries costs tens of
// megabytes, not hundreds, and nothing the collector scans.
type Builder struct {
	Path string
	Unit string

	ids    idTable   // explicit ids (first occurrence), synthesized ids, pending parents
	id     refs      // each entry's explicit id, or the synthesized one after Finish
	parent []int32   // noParent, a node, or pendingBase-k for pending[k]
	pos    positions // line or seq, for messages and for Resolve (posAt)
	flags  []uint8
	// locs holds the caller's handle of every entry without an id: only
	// those are fetched again (to synthesize their ids).
	locs []idless
	// pending holds parent ids not yet among the entries when named: a
	// later entry, a synthesized id, or a missing parent.
	pending []ref
	dup     *duplicate

	branches uint64 // entries with two or more children, counted by Finish

	finished bool
	cursor   int // Resolve's position
}

func (b *Builder) posAt(i int) int64 { return b.pos.at(i) }

const (
	noParent    = -1
	pendingBase = -2 // parent[i] = pendingBase-k names pending[k]
)

type idless struct {
	node int32
	loc  int64
}

func (b *Builder) idOf(i int32) []byte { return b.ids.bytes(b.id.at(i)) }

// lookup returns the index of the entry with id, or -1.
func (b *Builder) lookup(id string) int32 { return b.ids.index.LookupString(id, b.idOf) }

func (b *Builder) idString(i int) string { return b.ids.str(b.id.at(int32(i))) }

// parentString is entry i's parent id ("" when it has none).
func (b *Builder) parentString(i int) string {
	switch p := b.parent[i]; {
	case p >= 0:
		return b.idString(int(p))
	case p == noParent:
		return ""
	default:
		return b.ids.str(b.pending[pendingBase-p])
	}
}

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
	b.AddLinks(pos, loc, e.ID, e.HasID, e.ParentID, e.HasParent)
}

// AddLinks is Add for an entry known by its id and parent alone (hasID,
// hasParent: present and not null). Neither string is retained: they may
// alias a buffer the caller reuses.
func (b *Builder) AddLinks(pos, loc int64, entryID string, hasID bool, parentID string, hasParent bool) {
	i := int32(b.id.len())
	var flags uint8
	parent := int32(noParent)
	if hasParent {
		flags = fParent
		// A parent named before its entry (pi's order) is linked now; any
		// other waits for Finish, which links it after synthesizing ids.
		if p := b.lookup(parentID); p >= 0 {
			parent = p
		} else {
			parent = pendingBase - int32(len(b.pending))
			b.pending = append(b.pending, b.ids.add(parentID))
		}
	}
	var id ref
	first := false
	switch {
	case !hasID:
		b.locs = append(b.locs, idless{node: i, loc: loc})
	default:
		flags |= fExplicit
		if j := b.lookup(entryID); j >= 0 {
			id = b.id.at(j) // the same bytes: no need to store them twice
			if b.dup == nil {
				b.dup = &duplicate{id: strings.Clone(entryID), first: b.posAt(int(j)), second: pos}
			}
		} else {
			id, first = b.ids.add(entryID), true
		}
	}
	b.id.append(id)
	b.parent = append(b.parent, parent)
	b.pos.add(pos)
	b.flags = append(b.flags, flags)
	if first {
		b.ids.index.Insert(i, b.idOf) // after the append: the index reads b.id[i]
	}
}

// Len is the number of entries added.
func (b *Builder) Len() int { return b.id.len() }

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
	// Pending parents in source order: the first missing one is the one
	// the reference names.
	for i, p := range b.parent {
		if p >= noParent {
			continue
		}
		name := b.pending[pendingBase-p]
		q := b.ids.index.Lookup(b.ids.bytes(name), b.idOf)
		if q < 0 {
			return b.refuse(b.posAt(i), readers.ClassMissingParent, fmt.Sprintf(
				"session entry %s references missing parent %s", b.idString(i), b.ids.str(name)))
		}
		b.parent[i] = q
	}
	b.pending = nil
	if err := b.cycles(b.parent); err != nil {
		return err
	}
	b.countBranches()
	for i, f := range b.flags {
		if id := b.idString(i); f&fExplicit != 0 && !payload.ValidEntryID(id) {
			return b.refuse(b.posAt(i), readers.ClassBadEntryID, fmt.Sprintf(
				"entry id %s does not match the V2 entry-id contract ^[A-Za-z0-9_-]{1,128}$", strconv.Quote(id)))
		}
	}
	b.ids.index = idgraph.Index{} // Resolve walks entries in order; the index is no longer needed
	b.locs = nil
	return nil
}

func (b *Builder) synthesize(fetch Fetch) error {
	taken := func(id string) bool { return b.lookup(id) >= 0 }
	for _, il := range b.locs {
		i := il.node
		e, err := fetch(il.loc)
		if err != nil {
			return err
		}
		if e.HasID {
			return b.changed(b.posAt(int(i)), "the entry now has an id")
		}
		id, err := e.LegacyID(taken)
		if err != nil {
			class, detail := readers.ClassNondeterministic, err.Error()
			var pe *payload.Error
			if errors.As(err, &pe) {
				class, detail = pe.Class, pe.Detail
			}
			return &readers.RefusedError{Path: b.Path, Line: b.posAt(int(i)), Class: class, Reason: detail, Err: err}
		}
		b.id.set(i, b.ids.add(id))
		b.ids.index.Insert(i, b.idOf)
	}
	return nil
}

// countBranches counts the entries with two or more children, as the
// manifest's branchesTotal does.
func (b *Builder) countBranches() {
	kids := make([]uint8, len(b.parent))
	for _, p := range b.parent {
		if p >= 0 && kids[p] < 2 {
			kids[p]++
			if kids[p] == 2 {
				b.branches++
			}
		}
	}
}

// Branches is the number of entries with two or more children; valid once
// Finish has returned nil.
func (b *Builder) Branches() uint64 { return b.branches }

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
	state := make([]uint8, len(parents))
	parentOf := func(i int) int { return int(parents[i]) }
	best := -1 // earliest member of any cycle found
	var bestCycle []int
	var path []int
	for start := range parents {
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
	if len(bestCycle) == 1 {
		return b.refuse(b.posAt(best), readers.ClassParentCycle, fmt.Sprintf(
			"session entry %s names itself as its parent: the parent graph contains a cycle", b.idString(best)))
	}
	// Describe the cycle from its earliest member, following parent links.
	var ids, where []string
	i := best
	for k := 0; k < len(bestCycle); k++ {
		if k < 8 {
			ids = append(ids, b.idString(i))
			where = append(where, strconv.FormatInt(b.posAt(i), 10))
		}
		i = parentOf(i)
	}
	more := ""
	if len(bestCycle) > 8 {
		more = fmt.Sprintf(" … (%d entries)", len(bestCycle))
	}
	return b.refuse(b.posAt(best), readers.ClassParentCycle, fmt.Sprintf(
		"session parent graph contains a cycle: %s → %s%s (%ss %s%s)",
		strings.Join(ids, " → "), b.idString(best), more, b.Unit, strings.Join(where, ", "), more))
}

func (b *Builder) refuse(pos int64, class readers.Class, reason string) error {
	return &readers.RefusedError{Path: b.Path, Line: pos, Class: class, Reason: reason}
}

// changed is the error of a second pass that does not find what the first
// one read (readers.ErrSourceChanged).
func (b *Builder) changed(pos int64, detail string) error {
	return &readers.SourceChangedError{Path: b.Path, Line: pos, Detail: detail}
}

// Resolve is the second pass: it is given the entries again, in the same
// order, and returns each one's id (synthesized when the source had none,
// in which case it is also set on e), after checking that the entry is the
// one Finish checked. A mismatch means the source changed between the
// passes: an error matching readers.ErrSourceChanged.
func (b *Builder) Resolve(pos int64, e *payload.Entry) (id string, synthesized bool, err error) {
	if !b.finished || b.cursor >= b.id.len() {
		return "", false, b.changed(pos, "more entries than in the first pass")
	}
	i := b.cursor
	b.cursor++
	flags := b.flags[i]
	same := b.posAt(i) == pos && e.HasID == (flags&fExplicit != 0) && e.HasParent == (flags&fParent != 0) &&
		(!e.HasID || e.ID == string(b.idOf(int32(i)))) && (!e.HasParent || e.ParentID == b.parentString(i))
	if !same {
		return "", false, b.changed(pos, "this entry differs from the first pass")
	}
	if !e.HasID {
		id := b.idString(i)
		e.SetID(id)
		return id, true, nil
	}
	return e.ID, false, nil
}

// Done reports whether Resolve has been given every entry.
func (b *Builder) Done() bool { return b.cursor == b.id.len() }

// Release frees the per-entry state once Resolve has been given every
// entry (the second pass is over): a session's ids then do not stay in
// memory while its staging store is checked. Done stays true.
func (b *Builder) Release() {
	if b.Done() {
		b.ids, b.id, b.parent, b.pos, b.flags = idTable{}, refs{}, nil, positions{}, nil
		b.cursor = 0
	}
}
