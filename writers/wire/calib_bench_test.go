package wire

import (
	"encoding/json"
	"testing"
	"unicode/utf8"
)

func BenchmarkCalibUTF8(b *testing.B) {
	lines, n := benchLines(b)
	b.SetBytes(n)
	start := cpuClock()
	for b.Loop() {
		for _, l := range lines {
			_ = utf8.Valid(l)
		}
	}
	reportCPU(b, start, n)
}

func BenchmarkCalibStdlibValid(b *testing.B) {
	lines, n := benchLines(b)
	b.SetBytes(n)
	start := cpuClock()
	for b.Loop() {
		for _, l := range lines {
			_ = json.Valid(l)
		}
	}
	reportCPU(b, start, n)
}

func BenchmarkCalibSkipValue(b *testing.B) {
	lines, n := benchLines(b)
	b.SetBytes(n)
	start := cpuClock()
	for b.Loop() {
		for _, l := range lines {
			_, _ = skipValue(l, 0)
		}
	}
	reportCPU(b, start, n)
}
