package wire

import (
	"path/filepath"
	"testing"
)

func codecBenchLines(b *testing.B, glob string) [][]byte {
	paths, _ := filepath.Glob(filepath.Join(vectorsDir(b), "accept", "tricky", "reference.v2", glob))
	return lines(b, paths[0])
}

func BenchmarkParseFrame(b *testing.B) {
	ls := codecBenchLines(b, "segments/*.seg")
	n := 0
	for _, l := range ls {
		n += len(l)
	}
	b.SetBytes(int64(n))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		for _, l := range ls {
			if _, err := ParseFrame(l); err != nil {
				b.Fatal(err)
			}
		}
	}
}

func BenchmarkParseIndexRow(b *testing.B) {
	ls := codecBenchLines(b, "index/offsets.jsonl")
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		for _, l := range ls {
			if _, err := ParseIndexRow(l); err != nil {
				b.Fatal(err)
			}
		}
	}
}
