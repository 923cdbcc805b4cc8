package store

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"pisess/writers/wire"
)

// The writer reproduces every reference store byte for byte from the
// reference's own ids, types and payloads.
func TestWriterMatchesReferenceByteForByte(t *testing.T) {
	for _, vc := range vectorCases(t) {
		t.Run(vc.name, func(t *testing.T) {
			frames := referenceFrames(t, vc.reference)
			dir := filepath.Join(t.TempDir(), "s.v2")
			w := writeFromFrames(t, dir, frames, vc.maxSeg, sessionID(t, vc.dir))
			if err := w.Seal(); err != nil {
				t.Fatal(err)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			want := filesUnder(t, vc.reference)
			got := filesUnder(t, dir)
			// Ours also has the empty lock file that git cannot keep.
			var gotStore []string
			for _, f := range got {
				if f != MutationLockName {
					gotStore = append(gotStore, f)
				}
			}
			if len(gotStore) != len(want) {
				t.Fatalf("files %v, reference %v", gotStore, want)
			}
			for i, rel := range want {
				if gotStore[i] != rel {
					t.Fatalf("files %v, reference %v", gotStore, want)
				}
				a, _ := os.ReadFile(filepath.Join(dir, rel))
				b, _ := os.ReadFile(filepath.Join(vc.reference, rel))
				if !bytes.Equal(a, b) {
					t.Fatalf("%s differs from the reference:\n%s", rel, firstDiff(a, b))
				}
			}
			if p := (mustOpen(t, dir)).Check(); len(p) != 0 {
				t.Fatalf("Check of the written store: %v", p)
			}
		})
	}
}

// Every reference store reads back whole with no problem.
func TestReferenceStoresReadAndCheckClean(t *testing.T) {
	for _, vc := range vectorCases(t) {
		t.Run(vc.name, func(t *testing.T) {
			dir := copyStore(t, vc.reference)
			want := referenceFrames(t, vc.reference)
			s := mustOpen(t, dir)
			it := s.Entries()
			n := 0
			for it.Next() {
				f := it.Frame()
				if n >= len(want) || f.EntryID != want[n].EntryID || !bytes.Equal(f.Payload, want[n].Payload) {
					t.Fatalf("frame %d: %s", n+1, f.EntryID)
				}
				n++
			}
			if err := it.Err(); err != nil {
				t.Fatal(err)
			}
			if n != len(want) {
				t.Fatalf("%d frames, want %d", n, len(want))
			}
			p, sum := s.CheckSummary()
			if len(p) != 0 {
				t.Fatalf("problems: %v", p)
			}
			if p, reread := checkRereading(t, dir); len(p) != 0 || reread != sum {
				t.Fatalf("with the index read twice: %v, %+v; kept: %+v", p, reread, sum)
			}
			m, err := s.Manifest()
			if err != nil {
				t.Fatal(err)
			}
			if m.Counters.EntriesTotal != uint64(n) {
				t.Fatalf("manifest says %d entries", m.Counters.EntriesTotal)
			}
			if n > 0 {
				tail, err := s.Tail(2)
				if err != nil || tail[len(tail)-1].EntryID != m.Head.EntryID {
					t.Fatalf("tail: %v %v", tail, err)
				}
				path, err := s.ActivePath(m.Head.EntryID)
				if err != nil || len(path) == 0 || path[len(path)-1].EntryID != m.Head.EntryID || path[0].ParentEntryID != "" {
					t.Fatalf("active path: %d frames, %v", len(path), err)
				}
			}
		})
	}
}

func mustOpen(tb testing.TB, dir string) *Store {
	tb.Helper()
	s, err := Open(dir, ReadOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

func firstDiff(a, b []byte) string {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	lo := max(i-80, 0)
	return "at byte " + itoa(i) + ":\n got " + string(a[lo:min(i+80, len(a))]) + "\nwant " + string(b[lo:min(i+80, len(b))])
}

func itoa(i int) string { return string(wire.AppendCompact(nil, wire.U64(uint64(i)))) }

// ActivePath follows parents from any leaf back to the root, across the
// tricky vector's branch; an unknown leaf has no path.
func TestActivePath(t *testing.T) {
	var vc vectorCase
	for _, c := range vectorCases(t) {
		if c.name == "accept/tricky" {
			vc = c
		}
	}
	frames := referenceFrames(t, vc.reference)
	parent := map[string]string{}
	for _, f := range frames {
		parent[f.EntryID] = f.ParentEntryID
	}
	s := mustOpen(t, copyStore(t, vc.reference))
	for _, f := range frames {
		var want []string
		for id := f.EntryID; id != ""; id = parent[id] {
			want = append([]string{id}, want...)
		}
		got, err := s.ActivePath(f.EntryID)
		if err != nil || len(got) != len(want) {
			t.Fatalf("%s: %d frames, %v", f.EntryID, len(got), err)
		}
		for i := range want {
			if got[i].EntryID != want[i] {
				t.Fatalf("%s: path %d is %s, want %s", f.EntryID, i, got[i].EntryID, want[i])
			}
		}
	}
	if p, err := s.ActivePath("nosuchid"); err != nil || p != nil {
		t.Fatalf("%v %v", p, err)
	}
}
