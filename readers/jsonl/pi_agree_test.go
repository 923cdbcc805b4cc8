package jsonl

import (
	"errors"
	"path/filepath"
	"testing"

	"pisess/fixtures"
	"pisess/fixtures/pi"
	"pisess/readers"
)

// The real pi is the reader of record for JSONL: for every session it
// writes, pisess's reader must see the same entries (ids, parents, types,
// order) that pi's own SessionManager.open sees — or refuse the file with a
// classified reason that the reference's model gives too.
func TestReaderAgreesWithRealPi(t *testing.T) {
	pi.Require(t)
	dir := t.TempDir()
	var files []string
	for _, s := range pi.Generate(t, filepath.Join(dir, "corpus")) {
		if s.Persisted {
			files = append(files, s.Path)
		}
	}
	vec, _ := filepath.Glob(filepath.Join(fixtures.VectorsDir(t), "realpi", "*", "source.jsonl"))
	files = append(files, vec...)
	if len(files) < 10 {
		t.Fatalf("only %d sessions to compare", len(files))
	}
	sessions := pi.ReadAll(t, files...)
	read, refused := 0, 0
	for i, file := range files {
		want := sessions[i]
		got, _, err := readAll(t, file, Options{})
		if err != nil {
			var r *readers.RefusedError
			if !errors.As(err, &r) || r.Class == "" || r.Line == 0 {
				t.Errorf("%s: unclassified failure: %v", file, err)
				continue
			}
			switch r.Class {
			case readers.ClassUnknownType, readers.ClassLoneSurrogate, readers.ClassMissingParent,
				readers.ClassBadEntry, readers.ClassMalformedJSON, readers.ClassTornLine:
			default:
				t.Errorf("%s: refused with unexpected class %s: %v", file, r.Class, r)
			}
			if r.Line > int64(len(want.Entries))+2 && r.Class != readers.ClassTornLine {
				t.Errorf("%s: refusal line %d beyond the file's %d entries", file, r.Line, len(want.Entries))
			}
			refused++
			continue
		}
		read++
		if len(got) != len(want.Entries) {
			t.Errorf("%s: pisess reads %d entries, pi %d", file, len(got), len(want.Entries))
			continue
		}
		for k, e := range got {
			w := want.Entries[k]
			wp := ""
			if w.ParentID != nil {
				wp = *w.ParentID
			}
			if e.ID != w.ID || e.ParentID != wp || e.Type != w.Type {
				t.Errorf("%s entry %d: pisess {%s %s %s}, pi {%s %s %s}", file, k, e.ID, e.ParentID, e.Type, w.ID, wp, w.Type)
				break
			}
		}
	}
	t.Logf("%d sessions read identically, %d refused with a classified reason", read, refused)
	if read == 0 {
		t.Fatal("no session was read")
	}
}
