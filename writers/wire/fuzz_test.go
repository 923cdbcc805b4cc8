package wire

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// maxFuzzInput bounds fuzz inputs (as Prometheus's fuzzers do): the limits
// themselves are tested directly.
const maxFuzzInput = 1 << 20

func seedLines(f *testing.F, glob string, limit int) {
	paths, _ := filepath.Glob(filepath.Join(vectorsDir(f), "*", "*", "reference.v2", glob))
	n := 0
	for _, p := range paths {
		for _, l := range lines(f, p) {
			if n >= limit {
				return
			}
			f.Add(append([]byte(nil), l...))
			n++
		}
	}
}

func frameEqual(a, b Frame) bool {
	return a.SegmentSeq == b.SegmentSeq && a.FrameSeq == b.FrameSeq && a.EntrySeq == b.EntrySeq &&
		a.EntryID == b.EntryID && a.ParentEntryID == b.ParentEntryID && a.EntryType == b.EntryType &&
		a.Timestamp == b.Timestamp && a.PayloadSHA256 == b.PayloadSHA256 && a.PayloadBytes == b.PayloadBytes &&
		bytes.Equal(a.Payload, b.Payload)
}

func FuzzParseFrame(f *testing.F) {
	seedLines(f, "segments/*.seg", 300)
	f.Add([]byte(frameLine(samplePayload)))
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > maxFuzzInput {
			return
		}
		fr, err := ParseFrame(b)
		if err != nil {
			return
		}
		out := AppendFrame(nil, fr)
		again, err := ParseFrame(out)
		if err != nil {
			t.Fatalf("re-encoding of an accepted frame is refused: %v\n%s", err, out)
		}
		if !frameEqual(fr, again) || !bytes.Equal(AppendFrame(nil, again), out) {
			t.Fatalf("round trip differs:\n%s\n%s", b, out)
		}
	})
}

func FuzzParseIndexRow(f *testing.F) {
	seedLines(f, "index/offsets.jsonl", 300)
	f.Add([]byte(sampleRow))
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > maxFuzzInput {
			return
		}
		r, err := ParseIndexRow(b)
		if err != nil {
			return
		}
		out := AppendIndexRow(nil, r)
		again, err := ParseIndexRow(out)
		if err != nil || again != r || !bytes.Equal(AppendIndexRow(nil, again), out) {
			t.Fatalf("round trip: %v\n%s\n%s", err, b, out)
		}
	})
}

func FuzzParseManifest(f *testing.F) {
	paths, _ := filepath.Glob(filepath.Join(vectorsDir(f), "*", "*", "reference.v2", "manifest.json"))
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > maxFuzzInput {
			return
		}
		m, err := ParseManifest(b)
		if err != nil {
			return
		}
		out := AppendManifest(nil, m)
		again, err := ParseManifest(out)
		if err != nil || again != m || !bytes.Equal(AppendManifest(nil, again), out) {
			t.Fatalf("round trip: %v\n%s\n%s", err, b, out)
		}
	})
}
