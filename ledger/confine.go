package ledger

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"pisess/writers/durable"
)

// ErrForged is matched by a journal record that names a path pisess would
// never have written there: outside the tree, through "..", into the
// tree's own .pisess where a session belongs, or into another tree. The
// journal is data written into a directory its owner controls (and, when
// root runs pisess, one the owner may write): such a record is reported
// and never acted on.
var ErrForged = errors.New("forged or corrupt journal record")

// ForgedError says which member of which record was refused and why.
type ForgedError struct {
	Member string // the JSON member, e.g. "sourcePath"
	Value  string
	Reason string
}

func (e *ForgedError) Error() string {
	return fmt.Sprintf("%v: %s %q %s", ErrForged, e.Member, e.Value, e.Reason)
}

func (e *ForgedError) Unwrap() error { return ErrForged }

// place is where in a tree a recorded path may point.
type place int

const (
	// placeSession: a session file or something beside one, never inside
	// .pisess and never the tree root itself.
	placeSession place = iota
	// placeSessionOrTree: as placeSession, or the tree root (a note
	// about the tree as a whole, such as an fsck repair of its journal).
	placeSessionOrTree
	// placeAny: anything inside the tree but the root (a session, a
	// sidecar, the journal, a quarantine entry).
	placeAny
	// placeQuarantine: inside <tree>/.pisess/quarantine/.
	placeQuarantine
)

// confine turns a path recorded in tree's journal into the absolute path
// it names. New records hold tree-relative paths; records written by older
// pisess versions hold absolute ones, which are accepted when they lie
// inside tree. Whatever else a record holds is refused: the check is
// lexical (no file is looked at), so it also refuses before anything is
// opened, created or locked; symlinks on the way are refused where a path
// is used (durable opens every path with RESOLVE_NO_SYMLINKS).
func confine(tree, member, p string, where place) (string, error) {
	forged := func(reason string) error { return &ForgedError{Member: member, Value: p, Reason: reason} }
	switch {
	case p == "":
		return "", forged("is empty")
	case strings.IndexByte(p, 0) >= 0:
		return "", forged("holds a NUL byte")
	case len(p) > 4096:
		return "", forged("is longer than PATH_MAX")
	}
	var rel string
	if filepath.IsAbs(p) {
		// An old record: absolute, and clean as pisess wrote it.
		if filepath.Clean(p) != p {
			return "", forged("is not a clean path")
		}
		r, err := filepath.Rel(tree, p)
		if err != nil || !filepath.IsLocal(r) {
			return "", forged("lies outside the tree " + tree)
		}
		rel = r
	} else {
		if !filepath.IsLocal(p) || filepath.Clean(p) != p {
			return "", forged("is not a clean path inside the tree (it has \"..\" or redundant parts)")
		}
		rel = p
	}
	if rel == "." {
		if where == placeSessionOrTree {
			return tree, nil
		}
		return "", forged("names the tree root itself")
	}
	parts := strings.Split(rel, string(filepath.Separator))
	inPisess := parts[0] == PisessDir
	if !inPisess {
		// The quarantine mirrors tree paths (.pisess/journal.jsonl
		// included); anywhere else a .pisess is a nested tree's.
		for _, part := range parts[1:] {
			if part == PisessDir {
				return "", forged("lies in another tree's " + PisessDir + " directory")
			}
		}
	}
	switch where {
	case placeSession, placeSessionOrTree:
		if inPisess {
			return "", forged("names pisess's own directory, not a session")
		}
	case placeQuarantine:
		if !inPisess || len(parts) < 3 || parts[1] != QuarantineDir {
			return "", forged("is not in the tree's quarantine " + filepath.Join(PisessDir, QuarantineDir))
		}
	}
	return filepath.Join(tree, rel), nil
}

// relative is what Append stores for a path: tree-relative when it lies
// inside tree (so a tree can be moved, and a record never names an
// address outside), else unchanged (confine refuses it on reading).
func relative(tree, p string) string {
	if p == "" || !filepath.IsAbs(p) {
		return p
	}
	r, err := filepath.Rel(tree, filepath.Clean(p))
	if err != nil || !(filepath.IsLocal(r) || r == ".") {
		return p
	}
	return r
}

// pathMember is one path-valued member of a record.
type pathMember struct {
	name  string
	value *string
	where place
}

func (r Record) pathMembers() []pathMember {
	switch {
	case r.Event != nil:
		ev := r.Event
		return []pathMember{
			{"sourcePath", &ev.SourcePath, placeSession},
			{"targetPath", &ev.TargetPath, placeAny},
		}
	case r.Note != nil:
		n := r.Note
		session := placeSession
		switch n.Kind {
		case NoteRepair, NoteQuarantined, NoteRestored:
			// fsck's notes about the tree itself name the tree.
			session = placeSessionOrTree
		}
		ms := []pathMember{{"session", &n.Session, session}}
		if n.Path != "" {
			ms = append(ms, pathMember{"path", &n.Path, placeAny})
		}
		if n.QuarantinePath != "" {
			q := placeQuarantine
			if n.Kind == NoteRestored {
				// A restore may come back from a cutover's backup
				// sibling as well as from the quarantine.
				q = placeAny
			}
			ms = append(ms, pathMember{"quarantinePath", &n.QuarantinePath, q})
		}
		return ms
	}
	return nil
}

// confineRecord checks every path of rec read from tree's journal and
// rewrites it to the absolute path it names, so that callers compare and
// act on absolute paths inside tree only. A quarantine path must also lie
// in the quarantine of the record's own run.
func confineRecord(tree string, rec *Record) error {
	for _, m := range rec.pathMembers() {
		abs, err := confine(tree, m.name, *m.value, m.where)
		if err != nil {
			return err
		}
		if m.name == "quarantinePath" && m.where == placeQuarantine {
			own := Quarantine(tree, rec.CorrelationID())
			if r, err := filepath.Rel(own, abs); err != nil || !filepath.IsLocal(r) {
				return &ForgedError{Member: m.name, Value: *m.value, Reason: "is not in the quarantine of run " + rec.CorrelationID()}
			}
		}
		*m.value = abs
	}
	return nil
}

// relativeRecord returns a copy of rec whose paths inside tree are
// tree-relative, for Append.
func relativeRecord(tree string, rec Record) Record {
	switch {
	case rec.Event != nil:
		ev := *rec.Event
		rec.Event = &ev
	case rec.Note != nil:
		n := *rec.Note
		rec.Note = &n
	case rec.Run != nil:
		r := *rec.Run
		rec.Run = &r
	}
	for _, m := range rec.pathMembers() {
		*m.value = relative(tree, *m.value)
	}
	return rec
}

// checkPaths refuses to append a record that confine would refuse on
// reading: pisess never writes what it would report as forged.
func checkPaths(tree string, rec Record) error {
	c := relativeRecord(tree, rec)
	if err := confineRecord(tree, &c); err != nil {
		return fmt.Errorf("journal record: %w", err)
	}
	return nil
}

// Paths returns the paths rec names, as read from the journal (absolute,
// inside the tree).
func (r Record) Paths() []string {
	var out []string
	for _, m := range r.pathMembers() {
		out = append(out, *m.value)
	}
	return out
}

// SymlinkOnTheWay returns the first directory beneath tree on the way to
// one of rec's paths that is a symlink. A record whose path leads through
// a symlink is not acted on: pisess never follows one inside a tree, and
// a symlinked directory where pisess recorded a path was planted after the
// record. (A symlink at the path itself is the object, not the way: the
// command that meets it refuses it, and fsck reports it as such.)
func SymlinkOnTheWay(tree string, rec Record) (link string, found bool) {
	for _, p := range rec.Paths() {
		rel, err := filepath.Rel(tree, p)
		if err != nil || !filepath.IsLocal(rel) {
			continue
		}
		cur := tree
		parts := strings.Split(rel, string(filepath.Separator))
		for _, part := range parts[:len(parts)-1] {
			cur = filepath.Join(cur, part)
			st, err := durable.Lstat(cur)
			if err != nil {
				break // missing (or unreadable): nothing further to follow
			}
			if st.Mode&unix.S_IFMT == unix.S_IFLNK {
				return cur, true
			}
		}
	}
	return "", false
}
