package writers

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"pisess/fixtures"
	"pisess/readers/jsonl"
)

// BenchmarkStage stages the largest real-pi vector (about 1.2 MB of JSONL)
// per iteration: read, canonicalize, frame, index, manifest, seal.
func BenchmarkStage(b *testing.B) {
	src := filepath.Join(fixtures.VectorsDir(b), "realpi", "01a20023-7353-71a3-8d4c-642cfca7f2ee", "source.jsonl")
	fi, err := os.Stat(src)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(fi.Size())
	root := b.TempDir()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s, err := jsonl.Open(src, jsonl.Options{})
		if err != nil {
			b.Fatal(err)
		}
		dir := filepath.Join(root, "s.v2."+itoa(i))
		if _, err := Stage(context.Background(), s, dir, StageOptions{Clock: clock}); err != nil {
			b.Fatal(err)
		}
		s.Close()
		b.StopTimer()
		os.RemoveAll(dir)
		b.StartTimer()
	}
}

func itoa(i int) string {
	const digits = "0123456789"
	if i < 10 {
		return digits[i : i+1]
	}
	return itoa(i/10) + digits[i%10:i%10+1]
}
