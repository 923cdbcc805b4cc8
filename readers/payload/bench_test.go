package payload

import (
	"crypto/sha256"
	"path/filepath"
	"syscall"
	"testing"
	"time"
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

// BenchmarkDecode is the typed model alone: accept or refuse each line.
func BenchmarkDecode(b *testing.B) {
	lines, n := benchLines(b)
	b.SetBytes(n)
	b.ReportAllocs()
	start := cpuClock()
	for b.Loop() {
		for _, l := range lines {
			if _, err := Decode(l); err != nil {
				b.Fatal(err)
			}
		}
	}
	reportCPU(b, start, n)
}

// BenchmarkDecodeCanonical is what a migration does with each line before
// framing it: decode, then the canonical payload bytes.
func BenchmarkDecodeCanonical(b *testing.B) {
	lines, n := benchLines(b)
	b.SetBytes(n)
	b.ReportAllocs()
	start := cpuClock()
	for b.Loop() {
		for _, l := range lines {
			e, err := Decode(l)
			if err != nil {
				b.Fatal(err)
			}
			_ = e.Canonical()
		}
	}
	reportCPU(b, start, n)
}

// BenchmarkDecoderCanonical is BenchmarkDecodeCanonical with one Decoder
// for the whole session, as a reader can keep one.
func BenchmarkDecoderCanonical(b *testing.B) {
	lines, n := benchLines(b)
	b.SetBytes(n)
	b.ReportAllocs()
	var dec Decoder
	start := cpuClock()
	for b.Loop() {
		for _, l := range lines {
			e, err := dec.Decode(l)
			if err != nil {
				b.Fatal(err)
			}
			_ = e.Canonical()
		}
	}
	reportCPU(b, start, n)
}

// BenchmarkSHA256Lines is the yardstick: plain SHA-256 over the same lines,
// one hash per line as the frame encoder hashes one payload per entry.
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
