package upgrade

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"pisess/readers"
	"pisess/readers/normalize"
	"pisess/writers/jsjson"
	"pisess/writers/wire"
)

// refusal is a line pisess will not upgrade past.
type refusal struct{ Problem }

func (r *refusal) Error() string { return fmt.Sprintf("line %d: %s: %s", r.Line, r.Class, r.Reason) }

func refuse(line int64, class readers.Class, format string, args ...any) error {
	return &refusal{Problem{Line: line, Class: class, Reason: fmt.Sprintf(format, args...)}}
}

// Classes pisess adds for an upgrade.
const (
	// ClassNotObject: a line that is JSON but not an object; pi's upgrade
	// throws on it (it sets properties on every entry).
	ClassNotObject readers.Class = "not_an_object"
	// ClassOwner: pisess could not give the upgraded file the original's
	// owner (it does not run as root and the file is someone else's).
	ClassOwner readers.Class = "owner_mismatch"
)

// NewerVersion is what headerVersion returns for a header version above
// 3: pi treats the file as current and never rewrites it, so it is not a
// legacy file.
const NewerVersion = 4

// ClassNotLegacy marks a file pi would not migrate (its version is newer
// than 3): reported, not a failure.
const ClassNotLegacy readers.Class = "not_legacy"

// scanner yields the parsed non-blank lines of a session, refusing every
// line pi would drop or mangle (see doc.go). The header is the first one.
type scanner struct {
	ctx context.Context
	lr  *normalize.LineReader

	// Counted as the file is read.
	blank, crlf int
	bom         bool
	noNewline   bool // the last line has no "\n"

	seen bool // a non-blank line was read: content.trim() no longer applies at the front
	// trailing is the number of a line that parsed only once the
	// JavaScript white space after it was cut: pi's content.trim() does
	// that for the file's last line only, so any later non-blank line
	// means pi drops this one.
	trailing int64
}

// parsed is one non-blank line.
type parsed struct {
	n     int64 // line number
	start int64 // byte offset of the line
	v     wire.Value
}

// newScanner splits r on "\n" only, as pi's split("\n") does. Whatever the
// scanner reads from r is also what the caller's tee (a hash, the
// quarantine copy) sees, since it is the only reader.
func newScanner(ctx context.Context, r io.Reader) *scanner {
	return &scanner{ctx: ctx, lr: normalize.NewLineReader(r, normalize.LineBufferSize, MaxLineBytes, false)}
}

// next returns the next non-blank line, io.EOF after the last, a *refusal,
// or a read error.
func (s *scanner) next() (parsed, error) {
	for {
		if s.lr.Line()%4096 == 0 {
			if err := s.ctx.Err(); err != nil {
				return parsed{}, err
			}
		}
		line, start, err := s.lr.Next()
		n := s.lr.Line()
		switch {
		case errors.Is(err, normalize.ErrLineTooLong):
			return parsed{}, refuse(n, readers.ClassLineTooLong,
				"line is longer than %d bytes (it starts at byte offset %d)", MaxLineBytes, start)
		case err != nil:
			return parsed{}, err
		}
		last := !hasNewline(line)
		if last {
			s.noNewline = true
		}
		text, crlf := content(line)
		if start == 0 && bytes.HasPrefix(text, bom) {
			s.bom = true
			text = text[len(bom):]
		}
		if valid, invalidLen, ok := normalize.UTF8Error(text); !ok {
			msg := normalize.UTF8Message(valid, invalidLen)
			if invalidLen == 0 && last {
				return parsed{}, refuse(n, readers.ClassTornLine,
					"the last line has no newline and ends inside a UTF-8 sequence: a torn write (%s)", msg)
			}
			return parsed{}, refuse(n, readers.ClassInvalidUTF8,
				"not valid UTF-8 at byte %d of the line (pi would replace it by U+FFFD for good): %s", valid, msg)
		}
		if blank(text) {
			s.blank++
			continue
		}
		if crlf {
			s.crlf++
		}
		if s.trailing != 0 {
			return parsed{}, refuse(s.trailing, readers.ClassMalformedJSON,
				"JavaScript white space (such as a no-break space) follows the JSON of this line, which is not the last: JSON.parse fails on it and pi would drop the line")
		}
		front := !s.seen
		s.seen = true
		v, err := jsjson.Parse(text)
		if err != nil {
			// pi reads content.trim().split("\n"): JavaScript white space
			// (no-break space, U+FEFF, U+2028, ...) before the first line
			// and after the last is cut; anywhere else JSON.parse fails.
			cut := text
			if front {
				cut = trimJSLeft(cut)
			}
			cut = trimJSRight(cut)
			if v2, err2 := jsjson.Parse(cut); err2 == nil && len(trimJSRight(text)) == len(text) {
				v, err = v2, nil
			} else if err2 == nil {
				v, err = v2, nil
				s.trailing = n
			}
		}
		if err != nil {
			return parsed{}, syntaxRefusal(n, last, err)
		}
		// pi keeps what the reference's reader refuses (a lone surrogate,
		// nesting past serde_json's limit): the rewrite would be
		// lossless, but the result could not be migrated anyway.
		if _, err := wire.ParseJSON(text, nil); err != nil {
			var se *wire.SyntaxError
			if errors.As(err, &se) && se.IsSurrogate() {
				return parsed{}, refuse(n, readers.ClassLoneSurrogate,
					"a \\u escape is a lone surrogate (%s): pi keeps it as it is, but the reference's JSON reader refuses it, so the upgraded file could not be migrated", se)
			}
			if !errors.As(err, &se) || !se.IsEOF() {
				if v2, err2 := jsjson.Parse(text); err2 == nil && !jsjson.HasNonFinite(v2) {
					return parsed{}, refuse(n, readers.ClassMalformedJSON,
						"JSON.parse reads this line, but the reference's JSON reader refuses it (%s), so the upgraded file could not be migrated", err)
				}
			}
		}
		if jsjson.HasNonFinite(v) {
			return parsed{}, refuse(n, readers.ClassMalformedJSON,
				"a number is too large for a double: JSON.parse reads it as Infinity and pi's rewrite would write null in its place")
		}
		if v.Kind != wire.KindObject {
			return parsed{}, refuse(n, ClassNotObject,
				"the line is a JSON %s, not an object: pi's upgrade fails on it", v.Kind)
		}
		return parsed{n: n, start: start, v: v}, nil
	}
}

// syntaxRefusal classifies a line JSON.parse refuses: pi skips such a
// line (it is lost in pi's rewrite), so the upgrade refuses the file.
func syntaxRefusal(n int64, last bool, err error) error {
	var se *jsjson.SyntaxError
	if !errors.As(err, &se) {
		return refuse(n, readers.ClassMalformedJSON, "not JSON: %v", err)
	}
	if last && strings.HasPrefix(se.Msg, "unexpected end") || last && strings.HasPrefix(se.Msg, "unterminated") {
		return refuse(n, readers.ClassTornLine,
			"the last line has no newline and ends inside its JSON: a torn write (%s); pi would drop it", se)
	}
	return refuse(n, readers.ClassMalformedJSON, "not JSON (%s); JSON.parse fails on it and pi would drop the line", se)
}

// headerVersion reads the first line as pi's loadEntriesFromFile and
// migrateToCurrentVersion do: it must be an object with type "session" and
// a string id (else pi truncates the file to a fresh header); its version
// is `version ?? 1`. pisess upgrades versions 1 and 2 and knows 3.
func headerVersion(p parsed) (int, error) {
	if t, ok := getString(p.v, "type"); !ok || t != "session" {
		return 0, refuse(p.n, readers.ClassBadHeader,
			"the first line is not a session header (type \"session\"): pi would replace the whole file by a fresh header")
	}
	if _, ok := getString(p.v, "id"); !ok {
		return 0, refuse(p.n, readers.ClassBadHeader,
			"the session header has no string id: pi would replace the whole file by a fresh header")
	}
	ver, ok := get(p.v, "version")
	if !ok || ver.Kind == wire.KindNull {
		return 1, nil
	}
	if ver.Kind == wire.KindNumber {
		// migrateToCurrentVersion: version >= 3 is current; below that,
		// < 2 runs the v1 → v2 step and then v2 → v3.
		switch f := ver.Num.F; {
		case f == 3:
			return 3, nil
		case f > 3:
			return NewerVersion, nil
		case f >= 2:
			return 2, nil
		default:
			return 1, nil
		}
	}
	return 0, refuse(p.n, readers.ClassUnsupportedVer,
		"header version %s: pisess upgrades versions 1 and 2 (no version, or null, is 1) and knows 3",
		jsjson.Append(nil, ver))
}

// plan is what pass 1 learns.
type plan struct {
	version int
	header  parsed // the header line
	// entries is the number of parsed lines, header included: the length
	// of pi's entries array, which firstKeptEntryIndex indexes.
	entries int
	// Version 1 only.
	session []uint64            // bit i: parsed line i is a session line
	taken   map[string]struct{} // every explicit string id in the file
	rawIDs  map[int]wire.Value  // parsed line i → its own id member, when it has one
}

func (p *plan) isSession(i int) bool { return p.session[i/64]&(1<<(i%64)) != 0 }

// scanPlan is pass 1: it reads the whole file (only the header of a
// version-3 one), refuses what the upgrade cannot write back, and collects
// what pass 2 needs before it can give the first id.
func scanPlan(s *scanner) (*plan, error) {
	first, err := s.next()
	if err == io.EOF {
		return nil, refuse(0, readers.ClassEmptyFile, "the file holds no line: pi would write a fresh header over it")
	}
	if err != nil {
		return nil, err
	}
	version, err := headerVersion(first)
	if err != nil {
		return nil, err
	}
	p := &plan{version: version, header: first, entries: 1}
	if version >= 3 {
		return p, nil
	}
	if version == 1 {
		p.session = []uint64{1}
		p.taken = map[string]struct{}{}
		p.rawIDs = map[int]wire.Value{}
	}
	for {
		l, err := s.next()
		if err == io.EOF {
			return p, nil
		}
		if err != nil {
			return nil, err
		}
		i := p.entries
		p.entries++
		if version != 1 {
			continue
		}
		if i/64 >= len(p.session) {
			p.session = append(p.session, 0)
		}
		if t, _ := getString(l.v, "type"); t == "session" {
			p.session[i/64] |= 1 << (i % 64)
			continue
		}
		if id, ok := get(l.v, "id"); ok {
			p.rawIDs[i] = id
			if id.Kind == wire.KindString {
				p.taken[id.Str] = struct{}{}
			}
		}
	}
}
