package nativev2

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"pisess/fixtures"
	"pisess/readers"
	"pisess/readers/jsonl"
)

// copyStore copies a reference store into a temp dir (fixtures are never
// damaged in place) with the modes a real store has: git keeps none, and
// the vectors are read-only.
func copyStore(tb testing.TB, ref string) string {
	tb.Helper()
	dst := filepath.Join(tb.TempDir(), "store.v2")
	fixtures.CopyTree(tb, ref, dst)
	fixtures.PrivateModes(tb, dst)
	return dst
}

func readAll(tb testing.TB, src readers.Source) []readers.Entry {
	tb.Helper()
	var out []readers.Entry
	for {
		e, err := src.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			tb.Fatalf("next after %d entries: %v", len(out), err)
		}
		out = append(out, e)
	}
}

// Every reference store reads back as the entries of its source.
func TestReferenceStoresMatchSources(t *testing.T) {
	vectors := fixtures.VectorsDir(t)
	refs, _ := filepath.Glob(filepath.Join(vectors, "*", "*", "reference.v2"))
	if len(refs) < 10 {
		t.Fatalf("only %d reference stores", len(refs))
	}
	for _, ref := range refs {
		dir := filepath.Dir(ref)
		t.Run(filepath.Base(filepath.Dir(dir))+"/"+filepath.Base(dir), func(t *testing.T) {
			js, err := jsonl.Open(filepath.Join(dir, "source.jsonl"), jsonl.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer js.Close()
			want := readAll(t, js)

			src, err := Open(copyStore(t, ref))
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			h := src.Header()
			if h.ID != js.Header().ID || h.Format != readers.FormatNativeV2 {
				t.Errorf("header %+v, want id %s, native_v2", h, js.Header().ID)
			}
			got := readAll(t, src)
			if len(got) != len(want) {
				t.Fatalf("%d entries, want %d", len(got), len(want))
			}
			for i := range want {
				w, g := want[i], got[i]
				if g.ID != w.ID || g.ParentID != w.ParentID || g.Type != w.Type || g.Timestamp != w.Timestamp ||
					g.Role != w.Role || !bytes.Equal(g.Payload, w.Payload) || !equalName(g.Name, w.Name) {
					t.Errorf("entry %d:\n got %+v\nwant %+v", i+1, g, w)
				}
				if g.Position != int64(i+1) {
					t.Errorf("entry %d: position %d, want its entrySeq", i+1, g.Position)
				}
			}
			// EOF is sticky.
			if _, err := src.Next(); !errors.Is(err, io.EOF) {
				t.Errorf("Next after EOF: %v", err)
			}
		})
	}
}

func equalName(a, b *string) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

func TestDamagedStoreIsRefused(t *testing.T) {
	ref := filepath.Join(fixtures.VectorsDir(t), "accept", "tricky", "reference.v2")
	tests := []struct {
		name   string
		damage func(tb testing.TB, store string)
		open   bool // the refusal comes from Open rather than Next
	}{
		{"flipped frame byte", func(tb testing.TB, s string) {
			fixtures.FlipByte(tb, filepath.Join(s, "segments", "0000000000000001.seg"), 300)
		}, false},
		{"torn segment", func(tb testing.TB, s string) {
			fixtures.Truncate(tb, filepath.Join(s, "segments", "0000000000000001.seg"), 1000)
		}, false},
		{"index cut short", func(tb testing.TB, s string) {
			// Whole rows dropped: the index is consistent with itself but the
			// manifest promises more entries, and segment bytes are uncovered.
			idx := filepath.Join(s, "index", "offsets.jsonl")
			b, err := os.ReadFile(idx)
			if err != nil {
				tb.Fatal(err)
			}
			lines := bytes.SplitAfter(b, []byte("\n"))
			if err := os.WriteFile(idx, bytes.Join(lines[:3], nil), 0o600); err != nil {
				tb.Fatal(err)
			}
		}, false},
		{"no manifest", func(tb testing.TB, s string) {
			if err := os.Remove(filepath.Join(s, "manifest.json")); err != nil {
				tb.Fatal(err)
			}
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := copyStore(t, ref)
			tt.damage(t, store)
			src, err := Open(store)
			if err == nil {
				defer src.Close()
				for err == nil {
					_, err = src.Next()
				}
			} else if !tt.open {
				t.Fatalf("Open refused: %v", err)
			}
			r := readers.AsRefused(err)
			if r == nil || r.Class != readers.ClassCorrupt || r.Path != store {
				t.Fatalf("want a corrupt refusal of %s, got %v", store, err)
			}
		})
	}
}

func TestOpenMissing(t *testing.T) {
	if _, err := Open(filepath.Join(t.TempDir(), "none.v2")); err == nil {
		t.Fatal("opened a missing store")
	}
}
