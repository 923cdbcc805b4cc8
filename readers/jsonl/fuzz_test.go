package jsonl

import (
	"io"
	"os"
	"path/filepath"
	"testing"

	"pisess/fixtures"
	"pisess/readers"
	"pisess/readers/payload"
)

// maxFuzzInput bounds a fuzzed session, as Prometheus's fuzzers bound
// theirs: big enough for every vector but the large realpi one.
const maxFuzzInput = 256 << 10

// FuzzJSONLSource: whatever the file holds, the reader does not panic,
// every failure is a classified *readers.RefusedError, and what it accepts
// is well formed: ids in the V2 contract and unique, parents among the
// entries, positions increasing, payloads present; read with a light pass
// 1, it gives the same entries or the same refusal.
func FuzzJSONLSource(f *testing.F) {
	vectors := fixtures.VectorsDir(f)
	seeds, _ := filepath.Glob(filepath.Join(vectors, "*", "*", "source.jsonl"))
	rejects, _ := filepath.Glob(filepath.Join(vectors, "reject", "*.jsonl"))
	for _, p := range append(seeds, rejects...) {
		if b, err := os.ReadFile(p); err == nil && len(b) <= maxFuzzInput {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > maxFuzzInput {
			return
		}
		p := filepath.Join(t.TempDir(), "s.jsonl")
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		for _, opt := range []Options{{}, {AllowLegacy: true}} {
			checkFuzzRead(t, p, opt, int64(len(data)))
		}
		// A light pass 1 gives the same answer (Options.Light).
		checkSameAnswer(t, p)
	})
}

func checkFuzzRead(t *testing.T, p string, opt Options, size int64) {
	s, err := Open(p, opt)
	if err != nil {
		mustClassify(t, err)
		return
	}
	defer s.Close()
	ids := map[string]bool{}
	var parents []string
	var last int64 = 1
	for {
		e, err := s.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("Next after a successful Open: %v", err)
		}
		if !payload.ValidEntryID(e.ID) || ids[e.ID] || e.Position <= last || len(e.Payload) == 0 || e.Type == "" {
			t.Fatalf("bad entry %+v", e)
		}
		ids[e.ID] = true
		last = e.Position
		if e.ParentID != "" {
			parents = append(parents, e.ParentID)
		}
	}
	for _, p := range parents {
		if !ids[p] {
			t.Fatalf("parent %s not among the entries", p)
		}
	}
	if s.BytesRead() != size {
		t.Fatalf("read %d of %d bytes", s.BytesRead(), size)
	}
}

func mustClassify(t *testing.T, err error) {
	t.Helper()
	r := readers.AsRefused(err)
	if r == nil || r.Class == "" || r.Reason == "" {
		t.Fatalf("unclassified error %T: %v", err, err)
	}
	if r.Class == readers.ClassIO {
		t.Fatalf("io refusal of a stable file: %v", r)
	}
}
