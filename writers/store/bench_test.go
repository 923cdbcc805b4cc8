package store

import (
	"pisess/fixtures"

	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"pisess/writers/wire"
)

// The benchmarks report MB/s of payload (b.SetBytes). BenchmarkSHA256 is
// plain SHA-256 throughput on the same machine, so the store's figures can
// be given as ratios to it: every byte written or verified is hashed once.
// Each also reports cpu-MB/s, payload bytes per second of the process's
// user+system CPU time, which a busy machine disturbs far less than the
// wall clock.

const benchBytes = 200 << 20

// benchEntry is one generated session entry.
type benchEntry struct {
	id, parent, typ string
	payload         []byte
}

var words = strings.Fields(`the of and to in is that for it as with was on be at by this had not are but from or have an they which
one you were her all she there would their we him been has when who will more no if out so said what up its about into than them can
only other new some could time these two may then do first any my now such like our over man me even most made after also did many
before must through back years where much your way well down should because each just those people how too little state good very make
world still own see men work long get here between both life being under never day same another know while last might us great old year
off come since against go came right used take three func return err nil struct package import select range defer chan map interface`)

// benchEntries generates realistic entries (user and assistant messages,
// tool results, the odd model change and compaction) whose payloads total
// at least n bytes, deterministically.
func benchEntries(n int) ([]benchEntry, int) {
	r := rand.New(rand.NewPCG(1, 2))
	text := func(words_ int) string {
		var b strings.Builder
		for i := 0; i < words_; i++ {
			if i > 0 {
				b.WriteByte(" \n"[r.IntN(12)/11])
			}
			b.WriteString(words[r.IntN(len(words))])
		}
		return b.String()
	}
	var out []benchEntry
	total, parent := 0, ""
	for i := 0; total < n; i++ {
		id := fmt.Sprintf("%08x", uint32(i)*2654435761) // a bijection: ids never collide
		ts := fmt.Sprintf("2026-01-05T10:%02d:%02d.%03dZ", i/3600%60, i/60%60, i%1000)
		var p []byte
		typ := "message"
		switch k := r.IntN(100); {
		case k < 30:
			p = wire.AppendCanonical(nil, wire.Object(
				wire.Member{Key: "id", Value: wire.String(id)},
				wire.Member{Key: "message", Value: wire.Object(
					wire.Member{Key: "content", Value: wire.String(text(10 + r.IntN(200)))},
					wire.Member{Key: "role", Value: wire.String("user")},
					wire.Member{Key: "timestamp", Value: wire.U64(1767607200000 + uint64(i))},
				)},
				wire.Member{Key: "parentId", Value: wire.String(parent)},
				wire.Member{Key: "timestamp", Value: wire.String(ts)},
				wire.Member{Key: "type", Value: wire.String("message")},
			))
		case k < 70:
			p = wire.AppendCanonical(nil, wire.Object(
				wire.Member{Key: "id", Value: wire.String(id)},
				wire.Member{Key: "message", Value: wire.Object(
					wire.Member{Key: "api", Value: wire.String("anthropic-messages")},
					wire.Member{Key: "content", Value: wire.Array(
						wire.Object(wire.Member{Key: "thinking", Value: wire.String(text(50 + r.IntN(300)))}, wire.Member{Key: "type", Value: wire.String("thinking")}),
						wire.Object(wire.Member{Key: "text", Value: wire.String(text(20 + r.IntN(600)))}, wire.Member{Key: "type", Value: wire.String("text")}),
						wire.Object(wire.Member{Key: "arguments", Value: wire.Object(wire.Member{Key: "command", Value: wire.String("go test ./...")}, wire.Member{Key: "timeout", Value: wire.U64(120)})},
							wire.Member{Key: "id", Value: wire.String("call_" + id)}, wire.Member{Key: "name", Value: wire.String("bash")}, wire.Member{Key: "type", Value: wire.String("toolCall")}),
					)},
					wire.Member{Key: "model", Value: wire.String("claude-sonnet-4-5")},
					wire.Member{Key: "provider", Value: wire.String("anthropic")},
					wire.Member{Key: "role", Value: wire.String("assistant")},
					wire.Member{Key: "stopReason", Value: wire.String("toolUse")},
					wire.Member{Key: "timestamp", Value: wire.U64(1767607200000 + uint64(i))},
					wire.Member{Key: "usage", Value: wire.Object(
						wire.Member{Key: "cost", Value: wire.Object(wire.Member{Key: "input", Value: wire.F64(0.0003)}, wire.Member{Key: "total", Value: wire.F64(0.0006)})},
						wire.Member{Key: "input", Value: wire.U64(uint64(r.IntN(200000)))},
						wire.Member{Key: "output", Value: wire.U64(uint64(r.IntN(8000)))},
					)},
				)},
				wire.Member{Key: "parentId", Value: wire.String(parent)},
				wire.Member{Key: "timestamp", Value: wire.String(ts)},
				wire.Member{Key: "type", Value: wire.String("message")},
			))
		case k < 97:
			// Tool output: long, multi-line, with the odd control character.
			p = wire.AppendCanonical(nil, wire.Object(
				wire.Member{Key: "id", Value: wire.String(id)},
				wire.Member{Key: "message", Value: wire.Object(
					wire.Member{Key: "content", Value: wire.Array(wire.Object(
						wire.Member{Key: "text", Value: wire.String(text(100+r.IntN(3000)) + "\t\x1b[0m\n")},
						wire.Member{Key: "type", Value: wire.String("text")}))},
					wire.Member{Key: "isError", Value: wire.Bool(false)},
					wire.Member{Key: "role", Value: wire.String("toolResult")},
					wire.Member{Key: "timestamp", Value: wire.U64(1767607200000 + uint64(i))},
					wire.Member{Key: "toolCallId", Value: wire.String("call_" + parent)},
					wire.Member{Key: "toolName", Value: wire.String("bash")},
				)},
				wire.Member{Key: "parentId", Value: wire.String(parent)},
				wire.Member{Key: "timestamp", Value: wire.String(ts)},
				wire.Member{Key: "type", Value: wire.String("message")},
			))
		default:
			typ = "compaction"
			p = wire.AppendCanonical(nil, wire.Object(
				wire.Member{Key: "firstKeptEntryId", Value: wire.String(parent)},
				wire.Member{Key: "id", Value: wire.String(id)},
				wire.Member{Key: "parentId", Value: wire.String(parent)},
				wire.Member{Key: "summary", Value: wire.String(text(200 + r.IntN(400)))},
				wire.Member{Key: "timestamp", Value: wire.String(ts)},
				wire.Member{Key: "tokensBefore", Value: wire.U64(150000)},
				wire.Member{Key: "type", Value: wire.String("compaction")},
			))
		}
		if parent == "" {
			// The first entry is a root: drop its empty parentId.
			p = []byte(strings.Replace(string(p), `"parentId":"",`, "", 1))
		}
		out = append(out, benchEntry{id: id, parent: parent, typ: typ, payload: p})
		total += len(p)
		parent = id
	}
	return out, total
}

func writeBenchStore(tb testing.TB, dir string, entries []benchEntry) {
	w, err := Create(dir, Options{Clock: fixedClock})
	if err != nil {
		tb.Fatal(err)
	}
	for _, e := range entries {
		if _, err := w.Append(e.id, e.parent, e.typ, e.payload); err != nil {
			tb.Fatal(err)
		}
	}
	finishStore(tb, w)
}

// finishStore writes w's manifest (of testSession), seals and closes it.
func finishStore(tb testing.TB, w *Writer) {
	tb.Helper()
	if _, err := w.WriteManifest(testSession, "jsonl_v3"); err != nil {
		tb.Fatal(err)
	}
	if err := w.Seal(); err != nil {
		tb.Fatal(err)
	}
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
}

// BenchmarkWriteSeal200MB: Create, Append ~200 MB of payloads, WriteManifest,
// Seal (fsync of the whole tree), Close.
func BenchmarkWriteSeal200MB(b *testing.B) {
	entries, total := benchEntries(benchBytes)
	b.SetBytes(int64(total))
	b.ReportMetric(float64(len(entries)), "entries")
	b.ResetTimer()
	cpu := fixtures.StartCPU()
	for i := 0; i < b.N; i++ {
		dir := filepath.Join(b.TempDir(), "s.v2")
		writeBenchStore(b, dir, entries)
		b.StopTimer()
		os.RemoveAll(dir)
		b.StartTimer()
	}
	cpu.Report(b, int64(total))
}

// BenchmarkReadVerify200MB: what verification reads: Open, the manifest,
// every frame through Entries (index rules, bounds, CRC-32C, frame
// document, payload SHA-256, coordinates), the chain recomputed and
// compared.
func BenchmarkReadVerify200MB(b *testing.B) {
	entries, total := benchEntries(benchBytes)
	dir := filepath.Join(b.TempDir(), "s.v2")
	writeBenchStore(b, dir, entries)
	b.SetBytes(int64(total))
	b.ResetTimer()
	cpu := fixtures.StartCPU()
	defer cpu.Report(b, int64(total))
	for i := 0; i < b.N; i++ {
		s, err := Open(dir, ReadOptions{})
		if err != nil {
			b.Fatal(err)
		}
		m, err := s.Manifest()
		if err != nil {
			b.Fatal(err)
		}
		chain := wire.ChainGenesis
		it := s.Entries()
		n := 0
		for it.Next() {
			chain = wire.ChainStep(chain, it.Frame().PayloadSHA256)
			n++
		}
		if err := it.Err(); err != nil || n != len(entries) || chain != m.Integrity.ChainHash {
			b.Fatalf("%v: %d entries, chain %s", err, n, chain)
		}
	}
}

// BenchmarkCheck200MB: the full Check of the same store.
func BenchmarkCheck200MB(b *testing.B) {
	entries, total := benchEntries(benchBytes)
	dir := filepath.Join(b.TempDir(), "s.v2")
	writeBenchStore(b, dir, entries)
	b.SetBytes(int64(total))
	b.ResetTimer()
	cpu := fixtures.StartCPU()
	defer cpu.Report(b, int64(total))
	for i := 0; i < b.N; i++ {
		if ps := mustOpen(b, dir).Check(); len(ps) != 0 {
			b.Fatal(ps)
		}
	}
}

// BenchmarkSHA256 is the yardstick: plain SHA-256 of 1 MiB buffers.
func BenchmarkSHA256(b *testing.B) {
	buf := make([]byte, 1<<20)
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	b.SetBytes(int64(len(buf)))
	b.ResetTimer()
	cpu := fixtures.StartCPU()
	defer cpu.Report(b, int64(len(buf)))
	for i := 0; i < b.N; i++ {
		sha256.Sum256(buf)
	}
}
