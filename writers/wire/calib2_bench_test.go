package wire

import "testing"

func BenchmarkCalibTapeReuse(b *testing.B) {
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

func BenchmarkCalibTapeCanonical(b *testing.B) {
	lines, n := benchLines(b)
	b.SetBytes(n)
	b.ReportAllocs()
	var t Tape
	var buf []byte
	start := cpuClock()
	for b.Loop() {
		for _, l := range lines {
			if err := t.Parse(l, nil); err != nil {
				b.Fatal(err)
			}
			buf = t.AppendCanonical(buf[:0], 0)
		}
	}
	reportCPU(b, start, n)
}
