package jsonl

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"pisess/fixtures"
	"pisess/readers"
	"pisess/writers/wire"
)

// TestVectors reads every shared vector: a session with a reference store
// gives exactly the store's entry ids and payload bytes, in order; a
// session the reference refuses is refused at the same line with the same
// detail.
func TestVectors(t *testing.T) {
	vectors := fixtures.VectorsDir(t)
	dirs, err := filepath.Glob(filepath.Join(vectors, "*", "*", "source.jsonl"))
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no vectors: %v", err)
	}
	for _, src := range dirs {
		dir := filepath.Dir(src)
		name := strings.TrimPrefix(dir, vectors+"/")
		t.Run(name, func(t *testing.T) {
			before, err := os.ReadFile(src)
			if err != nil {
				t.Fatal(err)
			}
			entries, s, err := readAll(t, src, Options{})
			if after, _ := os.ReadFile(src); !bytes.Equal(before, after) {
				t.Fatal("source changed")
			}
			if r, ok := readRefused(t, dir); ok {
				checkRefused(t, r, entries, s, err)
				return
			}
			if err != nil {
				t.Fatalf("refused: %v", err)
			}
			frames := fixtures.ReferenceFrames(t, filepath.Join(dir, "reference.v2"))
			if len(entries) != len(frames) {
				t.Fatalf("%d entries, reference has %d frames", len(entries), len(frames))
			}
			for i, f := range frames {
				e := entries[i]
				if e.ID != f.EntryID {
					t.Errorf("entry %d: id %s, reference %s", i+1, e.ID, f.EntryID)
				}
				if !bytes.Equal(e.Payload, f.Payload) {
					t.Errorf("entry %d (line %d): payload\n got %s\nwant %s", i+1, e.Position, e.Payload, f.Payload)
				}
			}
			if s.BytesRead() != int64(len(before)) || s.Size() != int64(len(before)) {
				t.Errorf("bytes read %d, size %d, file %d", s.BytesRead(), s.Size(), len(before))
			}
		})
	}
}

func checkRefused(t *testing.T, r refused, entries []readers.Entry, s *Source, err error) {
	t.Helper()
	switch r.Error {
	case "entry", "source":
		ref := readers.AsRefused(err)
		if ref == nil || s != nil {
			t.Fatalf("want refusal at line %d (%s), got %v", r.Line, r.Detail, err)
		}
		if ref.Line != r.Line || !strings.Contains(ref.Reason, r.Detail) {
			t.Fatalf("refused at line %d: %s\nwant line %d: %s", ref.Line, ref.Reason, r.Line, r.Detail)
		}
		if ref.Class == "" || ref.Class == readers.ClassIO {
			t.Fatalf("unclassified refusal: %v", ref)
		}
	case "store":
		// An id outside the V2 contract: the reference notices it reading
		// its store back; pisess refuses it up front.
		mustRefuse(t, err, readers.ClassBadEntryID, 2, "does not match the V2 entry-id contract")
	case "manifest":
		// The header id is not a UUID: the reader reads the session; the
		// writer refuses it (ClassBadSessionID) when it builds the manifest.
		if err != nil {
			t.Fatalf("reader refused: %v", err)
		}
		if wire.ValidUUID(s.Header().ID) {
			t.Fatalf("header id %q is a UUID", s.Header().ID)
		}
		if len(entries) == 0 {
			t.Fatal("no entries")
		}
	default:
		t.Fatalf("unknown REFUSED error %q", r.Error)
	}
}

// TestRejectVectors refuses every vectors/reject/* session with a clear
// class; the version-1 and version-2 ones read with AllowLegacy, up to what
// the upgrade must rewrite.
func TestRejectVectors(t *testing.T) {
	want := map[string]struct {
		class  readers.Class
		line   int64
		legacy readers.Class // with AllowLegacy ("" = reads)
	}{
		"reject_assistant_missing_api.jsonl": {readers.ClassBadEntry, 2, readers.ClassBadEntry},
		"reject_custom_message.jsonl":        {readers.ClassUnknownType, 2, readers.ClassUnknownType},
		"reject_lone_surrogate.jsonl":        {readers.ClassLoneSurrogate, 2, readers.ClassLoneSurrogate},
		"v1_header_version_1.jsonl":          {readers.ClassUnsupportedVer, 1, ""},
		"v2_hookmessage.jsonl":               {readers.ClassUnsupportedVer, 1, readers.ClassUnknownRole},
	}
	files, _ := filepath.Glob(filepath.Join(fixtures.VectorsDir(t), "reject", "*.jsonl"))
	if len(files) != len(want) {
		t.Fatalf("%d reject vectors, test knows %d", len(files), len(want))
	}
	for _, p := range files {
		name := filepath.Base(p)
		t.Run(name, func(t *testing.T) {
			w, ok := want[name]
			if !ok {
				t.Fatalf("unknown vector")
			}
			_, _, err := readAll(t, p, Options{})
			r := mustRefuse(t, err, w.class, w.line)
			t.Logf("%v", r)
			if w.class == readers.ClassUnsupportedVer && !strings.Contains(r.Reason, "pisess upgrade") {
				t.Errorf("no upgrade hint: %s", r.Reason)
			}
			entries, _, err := readAll(t, p, Options{AllowLegacy: true})
			if w.legacy == "" {
				if err != nil || len(entries) == 0 {
					t.Fatalf("legacy read: %d entries, %v", len(entries), err)
				}
				return
			}
			r = readers.AsRefused(err)
			if r == nil || r.Class != w.legacy {
				t.Fatalf("legacy read: want %s, got %v", w.legacy, err)
			}
			t.Logf("legacy: %v", r)
		})
	}
}
