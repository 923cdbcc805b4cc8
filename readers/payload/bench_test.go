package payload

import (
	"pisess/fixtures"

	"crypto/sha256"
	"path/filepath"
	"testing"
)

// benchSession is the largest real-pi vector (about 1.2 MB, 2000 entries):
// what a migration decodes, line by line.
const benchSession = "realpi/01a20023-7353-71a3-8d4c-642cfca7f2ee/source.jsonl"

// benchLines returns the session's entry lines and their total size.
func benchLines(b *testing.B) ([][]byte, int64) {
	b.Helper()
	var lines [][]byte
	var n int64
	for _, l := range entryLines(b, filepath.Join(vectorsDir(b), benchSession)) {
		lines = append(lines, l.text)
		n += int64(len(l.text))
	}
	return lines, n
}

// benchDecode runs each line through decode, then use, over the session.
func benchDecode(b *testing.B, decode func([]byte) (*Entry, error), use func(*Entry)) {
	lines, n := benchLines(b)
	b.SetBytes(n)
	b.ReportAllocs()
	cpu := fixtures.StartCPU()
	for b.Loop() {
		for _, l := range lines {
			e, err := decode(l)
			if err != nil {
				b.Fatal(err)
			}
			use(e)
		}
	}
	cpu.Report(b, n)
}

func canonical(e *Entry) { _ = e.Canonical() }
func nothing(*Entry)     {}

// BenchmarkDecode is the typed model alone, as a reader calls it today:
// accept or refuse each line (a migration's first pass).
func BenchmarkDecode(b *testing.B) { benchDecode(b, Decode, nothing) }

// BenchmarkDecodeCanonical is what a migration does with each line before
// framing it: decode, then the canonical payload bytes.
func BenchmarkDecodeCanonical(b *testing.B) { benchDecode(b, Decode, canonical) }

// BenchmarkDecoder is BenchmarkDecode with one Decoder for the session, as
// a reader can keep one.
func BenchmarkDecoder(b *testing.B) {
	var dec Decoder
	benchDecode(b, dec.Decode, nothing)
}

// BenchmarkDecoderCanonical is BenchmarkDecodeCanonical with one Decoder.
func BenchmarkDecoderCanonical(b *testing.B) {
	var dec Decoder
	benchDecode(b, dec.Decode, canonical)
}

// BenchmarkCanonical is the canonical writer alone, over decoded entries.
func BenchmarkCanonical(b *testing.B) {
	lines, n := benchLines(b)
	var entries []*Entry
	for _, l := range lines {
		e, err := Decode(l)
		if err != nil {
			b.Fatal(err)
		}
		entries = append(entries, e)
	}
	b.SetBytes(n)
	b.ReportAllocs()
	var buf []byte
	cpu := fixtures.StartCPU()
	for b.Loop() {
		for _, e := range entries {
			buf = e.AppendCanonical(buf[:0])
		}
	}
	cpu.Report(b, n)
}

// BenchmarkSHA256Lines is the yardstick: plain SHA-256 over the same lines,
// one hash per line as the frame encoder hashes one payload per entry.
func BenchmarkSHA256Lines(b *testing.B) {
	lines, n := benchLines(b)
	b.SetBytes(n)
	b.ReportAllocs()
	cpu := fixtures.StartCPU()
	for b.Loop() {
		for _, l := range lines {
			_ = sha256.Sum256(l)
		}
	}
	cpu.Report(b, n)
}
