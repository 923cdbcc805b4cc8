package jsonl

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"testing"

	"pisess/fixtures"
)

// benchBytes is the size of the generated session.
const benchBytes = 200 << 20

var (
	benchOnce sync.Once
	benchDir  string
	benchPath string
	benchErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if benchDir != "" {
		os.RemoveAll(benchDir)
	}
	os.Exit(code)
}

var (
	idMember     = regexp.MustCompile(`"id":"[^"]*"`)
	parentMember = regexp.MustCompile(`"parentId":(null|"[^"]*")`)
)

// benchSession writes, once per test binary run, a ~200 MB session made of
// the entries of the real-pi vectors the reference accepts, repeated with
// fresh ids and each chained to the one before.
func benchSession(b *testing.B) string {
	b.Helper()
	vectors := fixtures.VectorsDir(b)
	benchOnce.Do(func() {
		var templates [][]byte
		dirs, _ := filepath.Glob(filepath.Join(vectors, "realpi", "*", "reference.v2"))
		for _, d := range dirs {
			src, err := os.ReadFile(filepath.Join(filepath.Dir(d), "source.jsonl"))
			if err != nil {
				benchErr = err
				return
			}
			lines := bytes.Split(bytes.TrimSuffix(src, []byte("\n")), []byte("\n"))
			templates = append(templates, lines[1:]...)
		}
		if benchDir, benchErr = os.MkdirTemp("", "pisess-bench-jsonl-"); benchErr != nil {
			return
		}
		benchPath = filepath.Join(benchDir, "session.jsonl")
		f, err := os.Create(benchPath)
		if err != nil {
			benchErr = err
			return
		}
		defer f.Close()
		w := bufio.NewWriterSize(f, 1<<20)
		w.WriteString(testHeader + "\n")
		n, prev := 0, ""
		for size := 0; size < benchBytes; {
			for _, t := range templates {
				id := fmt.Sprintf("%08x", n)
				n++
				line := idMember.ReplaceAll(t, []byte(`"id":"`+id+`"`))
				// only the entry's own members: the first match of each
				if loc := parentMember.FindIndex(line); loc != nil {
					p := "null"
					if prev != "" {
						p = `"` + prev + `"`
					}
					line = append(append(append([]byte{}, line[:loc[0]]...), `"parentId":`+p...), line[loc[1]:]...)
				}
				prev = id
				w.Write(line)
				w.WriteByte('\n')
				size += len(line) + 1
			}
		}
		benchErr = w.Flush()
	})
	if benchErr != nil {
		b.Fatal(benchErr)
	}
	return benchPath
}

// BenchmarkReadJSONL reads a ~200 MB session (both passes) and reports
// throughput and the process's peak resident set: with a full pass 1, and
// with a light one (Options.Light, what migration uses).
func BenchmarkReadJSONL(b *testing.B) {
	for _, c := range []struct {
		name string
		opt  Options
	}{{"full", Options{}}, {"light", Options{Light: true}}} {
		b.Run(c.name, func(b *testing.B) { benchReadJSONL(b, c.opt) })
	}
}

func benchReadJSONL(b *testing.B, opt Options) {
	p := benchSession(b)
	info, err := os.Stat(p)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(info.Size())
	b.ReportAllocs()
	cpu := fixtures.StartCPU()
	b.ResetTimer()
	var entries int
	for b.Loop() {
		s, err := Open(p, opt)
		if err != nil {
			b.Fatal(err)
		}
		entries = 0
		for {
			_, err := s.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			entries++
		}
		s.Close()
	}
	b.StopTimer()
	// Wall-clock MB/s depends on what else the machine runs; MB per CPU
	// second does not.
	cpu.Report(b, info.Size())
	b.ReportMetric(float64(entries), "entries")
	b.ReportMetric(float64(fixtures.PeakRSS())/(1<<20), "peakRSS-MB")
}
