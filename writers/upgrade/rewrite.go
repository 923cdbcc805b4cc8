package upgrade

import (
	"encoding/json"
	"errors"
	"io"

	"pisess/readers"
	"pisess/readers/normalize"
	"pisess/readers/payload"
	"pisess/writers/jsjson"
	"pisess/writers/wire"
)

// rewriter is pass 2: it turns each parsed line into its version-3 line,
// writes it to out, and feeds the reference check.
type rewriter struct {
	p   *plan
	res *Result
	out io.Writer
	ref *refCheck

	idx     int      // index of the current parsed line (header = 0)
	ids     []string // version 1: the id of every parsed line so far ("" for session lines)
	prev    string   // version 1: the id of the last entry ("" before the first)
	written int64
	buf     []byte
	dbuf    []byte
	reasons map[string]string
}

func newRewriter(p *plan, res *Result, out io.Writer, ref *refCheck) *rewriter {
	w := &rewriter{p: p, res: res, out: out, ref: ref}
	if p.version == 1 {
		w.ids = make([]string, 0, p.entries)
	}
	return w
}

// taken is LegacyID's "already present": every explicit id in the file and
// every id given so far.
func (w *rewriter) taken(id string) bool {
	_, ok := w.p.taken[id]
	return ok
}

// line rewrites one parsed line.
func (w *rewriter) line(l parsed) error {
	i := w.idx
	w.idx++
	v := l.v
	isSession := false
	if t, _ := getString(v, "type"); t == "session" || i == 0 {
		isSession = true
		set(&v, "version", wire.U64(3))
		w.res.SessionLines++
	}
	if renameHookRole(&v) {
		w.res.RolesRenamed = append(w.res.RolesRenamed, l.n)
	}
	var typed *payload.Entry
	if w.p.version == 1 {
		if isSession {
			w.ids = append(w.ids, "")
		} else {
			typed = w.chain(l, i, &v)
		}
	}
	if !isSession {
		w.res.Entries++
	}
	w.buf = append(jsjson.Append(w.buf[:0], v), '\n')
	// Every parsed line is one line of the upgraded file.
	w.ref.source = append(w.ref.source, l.n)
	if i == 0 {
		w.res.NewHeader = json.RawMessage(append([]byte(nil), w.buf[:len(w.buf)-1]...))
		w.ref.header(w.buf)
	} else {
		w.ref.entry(int64(i+1), l.start, w.buf, typed)
	}
	n, err := w.out.Write(w.buf)
	w.written += int64(n)
	return err
}

// chain is migrateV1ToV2 for one entry: a new id, parentId = the previous
// entry's id, and firstKeptEntryIndex → firstKeptEntryId. When the
// reference's model read the entry, it returns that typed entry with the
// new id and parent, which is what the model reads from the upgraded line
// (so the reference check need not decode it again); nil when the line
// must be decoded again (a compaction whose firstKeptEntryIndex changed,
// an entry whose own parentId becomes null, or one the model refused).
func (w *rewriter) chain(l parsed, i int, v *wire.Value) *payload.Entry {
	assigned := AssignedID{Line: l.n}
	if old, ok := w.p.rawIDs[i]; ok {
		assigned.Replaced = string(jsjson.Append(nil, old))
	}
	// The id is derived from the entry as it was read (hookMessage already
	// renamed), without id and with the parentId it had, if any: the id
	// jsonl.Open with AllowLegacy synthesizes for it.
	id := ""
	w.dbuf = append(jsjson.Append(w.dbuf[:0], *v), '\n')
	e, err := payload.Decode(w.dbuf)
	if err == nil {
		id, err = e.LegacyID(w.taken)
	}
	if err != nil {
		e = nil
		id = untypedID(*v, w.taken)
		assigned.Untyped, assigned.Reason = true, w.intern(err.Error())
	}
	w.p.taken[id] = struct{}{}
	w.ids = append(w.ids, id)
	assigned.ID = id
	w.res.IDs = append(w.res.IDs, assigned)

	set(v, "id", wire.String(id))
	parent := wire.Null()
	if w.prev != "" {
		parent = wire.String(w.prev)
	}
	set(v, "parentId", parent)
	w.res.ParentsSet++
	if e != nil {
		e.SetID(id)
		switch {
		case w.prev != "":
			e.SetParent(w.prev)
		case e.HasParent:
			e = nil // its parentId becomes null: decode the new line
		}
	}
	w.prev = id

	if t, _ := getString(*v, "type"); t == "compaction" {
		if w.firstKept(l, i, v) {
			e = nil
		}
	}
	return e
}

// intern returns one copy of each distinct reason, so that a long session
// of entries refused for the same reason holds the text once.
func (w *rewriter) intern(s string) string {
	if w.reasons == nil {
		w.reasons = map[string]string{}
	}
	if r, ok := w.reasons[s]; ok {
		return r
	}
	w.reasons[s] = s
	return s
}

// firstKept converts a numeric firstKeptEntryIndex as pi does:
//
//	const targetEntry = entries[comp.firstKeptEntryIndex];
//	if (targetEntry && targetEntry.type !== "session") comp.firstKeptEntryId = targetEntry.id;
//	delete comp.firstKeptEntryIndex;
//
// targetEntry.id is the id the target has at that moment: its new id when
// it comes before (or is) the compaction, the id member it has in the file
// when it comes after; undefined (no member written) when it has none.
//
// It reports whether it changed the entry.
func (w *rewriter) firstKept(l parsed, i int, v *wire.Value) bool {
	index, ok := get(*v, "firstKeptEntryIndex")
	if !ok || index.Kind != wire.KindNumber {
		if ok {
			w.res.FirstKept = append(w.res.FirstKept, FirstKept{Line: l.n,
				Index: json.RawMessage(jsjson.Append(nil, index))})
		}
		return false
	}
	fk := FirstKept{Line: l.n, Index: json.RawMessage(jsjson.Append(nil, index)), Removed: true}
	if t, ok := jsIndex(index.Num, w.p.entries); ok && !w.p.isSession(t) {
		var id wire.Value
		has := true
		switch {
		case t <= i:
			id = wire.String(w.ids[t])
		default:
			id, has = w.p.rawIDs[t]
		}
		if has {
			set(v, "firstKeptEntryId", id)
			fk.ID = json.RawMessage(jsjson.Append(nil, id))
		} else {
			remove(v, "firstKeptEntryId")
		}
	}
	remove(v, "firstKeptEntryIndex")
	w.res.FirstKept = append(w.res.FirstKept, fk)
	return true
}

// refCheck decides, line by line as pass 2 writes them, whether the
// reference can migrate the upgraded file, in its order: the header, each
// entry's typed model (the first refusal is the one reported), then ids,
// parents and cycles over the whole file (readers/normalize, as jsonl.Open
// does).
type refCheck struct {
	graph   normalize.Builder // positions are lines of the upgraded file
	problem *Problem
	source  []int64 // line of the upgraded file - 1 → line of the original
}

// fail keeps the first problem; line is a line of the upgraded file.
func (c *refCheck) fail(line int64, class readers.Class, reason string) {
	if c.problem != nil {
		return
	}
	c.problem = &Problem{Line: line, Class: class, Reason: reason}
	if line > 0 && int(line) <= len(c.source) {
		c.problem.SourceLine = c.source[line-1]
	}
}

func (c *refCheck) header(line []byte) {
	if len(line)-1 > MaxLineBytes {
		c.fail(1, readers.ClassLineTooLong, "the upgraded header line is longer than the reference's limit")
		return
	}
	if p := checkHeader(line[:len(line)-1]); p != nil {
		c.fail(1, p.Class, p.Reason)
	}
}

// entry checks the upgraded line; typed, when not nil, is what the
// reference's model reads from it (see chain).
func (c *refCheck) entry(n, loc int64, line []byte, typed *payload.Entry) {
	if c.problem != nil {
		return
	}
	if len(line)-1 > MaxLineBytes {
		c.fail(n, readers.ClassLineTooLong, "the upgraded line is longer than the reference's limit of 100 MiB")
		return
	}
	if typed != nil {
		c.graph.Add(n, loc, typed)
		return
	}
	e, err := payload.Decode(line)
	if err != nil {
		class, detail := readers.ClassBadEntry, err.Error()
		var pe *payload.Error
		if errors.As(err, &pe) {
			class, detail = pe.Class, pe.Detail
		}
		c.fail(n, class, "Bad JSONL entry: "+detail)
		return
	}
	c.graph.Add(n, loc, e)
}

// finish completes the check; fetch re-reads an entry without id for the
// reference's id synthesis (only version-2 files have such entries after
// the upgrade).
func (c *refCheck) finish(fetch normalize.Fetch) *Reference {
	if c.problem == nil {
		if err := c.graph.Finish(fetch); err != nil {
			if r := readers.AsRefused(err); r != nil {
				c.fail(r.Line, r.Class, r.Reason)
			} else {
				c.fail(0, readers.ClassIO, err.Error())
			}
		}
	}
	return &Reference{Migratable: c.problem == nil, Problem: c.problem}
}
