package payload

import (
	"testing"

	"pisess/writers/wire"
)

func BenchmarkCalibTape(b *testing.B) {
	lines, n := benchLines(b)
	b.SetBytes(n)
	var t wire.Tape
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

func BenchmarkCalibDecoderOnly(b *testing.B) {
	lines, n := benchLines(b)
	b.SetBytes(n)
	b.ReportAllocs()
	var dec Decoder
	start := cpuClock()
	for b.Loop() {
		for _, l := range lines {
			if _, err := dec.Decode(l); err != nil {
				b.Fatal(err)
			}
		}
	}
	reportCPU(b, start, n)
}

func BenchmarkCalibCanonicalOnly(b *testing.B) {
	lines, n := benchLines(b)
	var es []*Entry
	for _, l := range lines {
		e, err := Decode(l)
		if err != nil {
			b.Fatal(err)
		}
		es = append(es, e)
	}
	b.SetBytes(n)
	b.ReportAllocs()
	var buf []byte
	start := cpuClock()
	for b.Loop() {
		for _, e := range es {
			buf = e.AppendCanonical(buf[:0])
		}
	}
	reportCPU(b, start, n)
}
