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

// BenchmarkParseIndexRow: the canonical-form scan (what ParseIndexRow
// takes for rows pisess and the reference write) against the full parse;
// read the ratio.
func BenchmarkParseIndexRow(b *testing.B) {
	ls := codecBenchLines(b, "index/offsets.jsonl")
	for _, c := range []struct {
		name  string
		parse func([]byte) (IndexRow, error)
	}{
		{"scan", ParseIndexRow},
		{"full", func(l []byte) (IndexRow, error) { return parseIndexRow(l, true) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				for _, l := range ls {
					if _, err := c.parse(l); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}
