package wire

import (
	"bytes"
	"crypto/sha256"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// benchSession is the largest real-pi vector (about 1.2 MB, 2000 entries).
const benchSession = "realpi/01a20023-7353-71a3-8d4c-642cfca7f2ee/source.jsonl"

// benchLines returns the session's lines after the header, each with its
// newline, and their total size.
func benchLines(b *testing.B) ([][]byte, int64) {
	b.Helper()
	src, err := os.ReadFile(filepath.Join(vectorsDir(b), filepath.FromSlash(benchSession)))
	if err != nil {
		b.Fatal(err)
	}
	var lines [][]byte
	var n int64
	for i, l := range bytes.SplitAfter(src, []byte("\n")) {
		if i == 0 || len(bytes.TrimSpace(l)) == 0 {
			continue
		}
		lines = append(lines, l)
		n += int64(len(l))
	}
	return lines, n
}

// BenchmarkParseJSON is the JSON layer alone: each line to a Value.
func BenchmarkParseJSON(b *testing.B) {
	lines, n := benchLines(b)
	b.SetBytes(n)
	b.ReportAllocs()
	start := cpuClock()
	for b.Loop() {
		for _, l := range lines {
			if _, err := ParseJSON(l, nil); err != nil {
				b.Fatal(err)
			}
		}
	}
	reportCPU(b, start, n)
}

// BenchmarkParseTape is the JSON layer without a Value tree, into one
// reused Tape, as a payload.Decoder reads.
func BenchmarkParseTape(b *testing.B) {
	lines, n := benchLines(b)
	b.SetBytes(n)
	b.ReportAllocs()
	var t Tape
	start := cpuClock()
	for b.Loop() {
		for _, l := range lines {
			if err := t.Parse(l, nil); err != nil {
				b.Fatal(err)
			}
		}
	}
	reportCPU(b, start, n)
}

// BenchmarkAppendCanonical is the canonical writer alone, over the parsed
// lines (keys sorted at every depth, compact).
func BenchmarkAppendCanonical(b *testing.B) {
	lines, n := benchLines(b)
	vals := make([]Value, len(lines))
	for i, l := range lines {
		v, err := ParseJSON(l, nil)
		if err != nil {
			b.Fatal(err)
		}
		vals[i] = v
	}
	b.SetBytes(n)
	b.ReportAllocs()
	var buf []byte
	start := cpuClock()
	for b.Loop() {
		for _, v := range vals {
			buf = AppendCanonical(buf[:0], v)
		}
	}
	reportCPU(b, start, n)
}

// BenchmarkSHA256Lines is the yardstick: plain SHA-256 over the same lines.
func BenchmarkSHA256Lines(b *testing.B) {
	lines, n := benchLines(b)
	b.SetBytes(n)
	b.ReportAllocs()
	start := cpuClock()
	for b.Loop() {
		for _, l := range lines {
			_ = sha256.Sum256(l)
		}
	}
	reportCPU(b, start, n)
}

// cpuClock returns the CPU time the process has used (all threads, the
// garbage collector's included).
func cpuClock() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU adds CPU time per operation, and the throughput it gives, to a
// benchmark's figures: on a shared machine the wall-clock figures mostly
// measure the neighbours, the CPU time much less so.
func reportCPU(b *testing.B, since time.Duration, bytes int64) {
	d := cpuClock() - since
	b.ReportMetric(float64(d.Nanoseconds())/float64(b.N), "cpu-ns/op")
	b.ReportMetric(float64(bytes)*float64(b.N)/d.Seconds()/1e6, "cpu-MB/s")
}
