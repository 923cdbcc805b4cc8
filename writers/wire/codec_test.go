package wire

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// referenceStores lists every reference.v2 directory under the shared
// vectors (read-only: nothing here writes there).
func referenceStores(tb testing.TB) []string {
	tb.Helper()
	dirs, err := filepath.Glob(filepath.Join(vectorsDir(tb), "*", "*", "reference.v2"))
	if err != nil || len(dirs) == 0 {
		tb.Fatalf("no reference stores found (%v)", err)
	}
	return dirs
}

// lines returns the file's lines, each with its newline.
func lines(tb testing.TB, path string) [][]byte {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	var out [][]byte
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			tb.Fatalf("%s: last line has no newline", path)
		}
		out = append(out, b[:i+1])
		b = b[i+1:]
	}
	return out
}

func segmentFiles(tb testing.TB, store string) []string {
	tb.Helper()
	segs, err := filepath.Glob(filepath.Join(store, "segments", "*.seg"))
	if err != nil {
		tb.Fatal(err)
	}
	return segs
}

// Append(Parse(b)) == b for every line and document the reference wrote.
func TestGoldenRoundTrip(t *testing.T) {
	var frames, rows, manifests int
	for _, store := range referenceStores(t) {
		for _, seg := range segmentFiles(t, store) {
			for i, line := range lines(t, seg) {
				f, err := ParseFrame(line)
				if err != nil {
					t.Fatalf("%s line %d: %v", seg, i+1, err)
				}
				if got := AppendFrame(nil, f); !bytes.Equal(got, line) {
					t.Fatalf("%s line %d: round trip differs:\n got %s\nwant %s", seg, i+1, got, line)
				}
				frames++
			}
		}
		if idx := filepath.Join(store, "index", "offsets.jsonl"); fileExists(idx) {
			for i, line := range lines(t, idx) {
				r, err := ParseIndexRow(line)
				if err != nil {
					t.Fatalf("%s line %d: %v", idx, i+1, err)
				}
				if got := AppendIndexRow(nil, r); !bytes.Equal(got, line) {
					t.Fatalf("%s line %d: round trip differs:\n got %s\nwant %s", idx, i+1, got, line)
				}
				rows++
			}
		}
		mpath := filepath.Join(store, "manifest.json")
		b, err := os.ReadFile(mpath)
		if err != nil {
			t.Fatal(err)
		}
		m, err := ParseManifest(b)
		if err != nil {
			t.Fatalf("%s: %v", mpath, err)
		}
		if got := AppendManifest(nil, m); !bytes.Equal(got, b) {
			t.Fatalf("%s: round trip differs:\n got %s\nwant %s", mpath, got, b)
		}
		if ManifestHash(m) != m.Integrity.ManifestHash {
			t.Fatalf("%s: hash", mpath)
		}
		manifests++
	}
	t.Logf("%d frames, %d index rows, %d manifests round-tripped", frames, rows, manifests)
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// The index row's CRC is the CRC-32C of the frame line it points to, and the
// chain over the payloads ends at the manifest's chainHash.
func TestReferenceIntegrityValues(t *testing.T) {
	for _, store := range referenceStores(t) {
		b, _ := os.ReadFile(filepath.Join(store, "manifest.json"))
		m, err := ParseManifest(b)
		if err != nil {
			t.Fatal(err)
		}
		chain := ChainGenesis
		last := EmptyCRC32C
		idx := filepath.Join(store, "index", "offsets.jsonl")
		if !fileExists(idx) {
			if m.Counters.EntriesTotal != 0 {
				t.Fatalf("%s: no index", store)
			}
		} else {
			segs := map[uint64][]byte{}
			for _, line := range lines(t, idx) {
				r, _ := ParseIndexRow(line)
				seg, ok := segs[r.SegmentSeq]
				if !ok {
					seg, err = os.ReadFile(filepath.Join(store, "segments", SegmentFileName(r.SegmentSeq)))
					if err != nil {
						t.Fatal(err)
					}
					segs[r.SegmentSeq] = seg
				}
				frame := seg[r.ByteOffset:r.End()]
				if CRC32C(frame) != r.CRC32C {
					t.Fatalf("%s: crc of entry %d", store, r.EntrySeq)
				}
				f, err := ParseFrame(frame)
				if err != nil {
					t.Fatal(err)
				}
				chain = ChainStep(chain, f.PayloadSHA256)
				last = r.CRC32C
			}
		}
		if chain != m.Integrity.ChainHash || last != m.Integrity.LastCRC32C {
			t.Fatalf("%s: chain %s last %s, manifest %+v", store, chain, last, m.Integrity)
		}
	}
}

func TestParseFrameTakesPayloadSpanFromTheParser(t *testing.T) {
	// The text `"payload":` also occurs inside an earlier string and inside
	// the payload itself; a search would find the wrong one.
	payload := []byte(`{"id":"a","text":"\"payload\":{}","x":{"payload":1}}`)
	f := Frame{SegmentSeq: 1, FrameSeq: 1, EntrySeq: 1, EntryID: "a", EntryType: EntryCustom, Timestamp: "2026-01-01T00:00:00.000Z"}
	f.SetPayload(payload)
	line := AppendFrame(nil, f)
	got, err := ParseFrame(line)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Payload, payload) {
		t.Fatalf("payload %s", got.Payload)
	}
	// White space around the payload is not part of it (serde's RawValue).
	spaced := bytes.Replace(line, []byte(`"payload":{`), []byte(`"payload": 	{`), 1)
	spaced = bytes.Replace(spaced, []byte("}}\n"), []byte("} }\n"), 1)
	got, err = ParseFrame(spaced)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Payload, payload) {
		t.Fatalf("payload %q", got.Payload)
	}
}

func TestParseFrameChecksPayload(t *testing.T) {
	f := Frame{SegmentSeq: 1, FrameSeq: 1, EntrySeq: 1, EntryID: "a", EntryType: EntryCustom, Timestamp: "2026-01-01T00:00:00.000Z"}
	f.SetPayload([]byte(`{"id":"a"}`))
	bad := f
	bad.PayloadBytes++
	if _, err := ParseFrame(AppendFrame(nil, bad)); !errors.Is(err, ErrChecksum) {
		t.Fatalf("payloadBytes: %v", err)
	}
	bad = f
	bad.PayloadSHA256 = PayloadSHA256([]byte("x"))
	if _, err := ParseFrame(AppendFrame(nil, bad)); !errors.Is(err, ErrChecksum) {
		t.Fatalf("payloadSha256: %v", err)
	}
}
