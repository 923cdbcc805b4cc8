// Command gentree writes a synthetic pi session tree of realistic shape for
// benchmarks: JSONL v3 sessions under <out>/--<cwd>--/ directories, with
// user, assistant (text, thinking, tool calls, usage and cost), tool result,
// model change, compaction and session_info entries, and occasional
// branches. Output is deterministic for a given seed.
package main

import (
	"bufio"
	"encoding/hex"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

func main() {
	out := flag.String("out", "", "directory to create the tree in (must not exist)")
	sessions := flag.Int("sessions", 2000, "number of sessions")
	totalMB := flag.Int("mb", 1024, "approximate total size in MiB")
	seed := flag.Uint64("seed", 1, "random seed")
	entries := flag.Int("entries", 0, "instead of a tree of -sessions, write one session of exactly this many small entries (the memory benchmark's input)")
	flag.Parse()
	if *out == "" {
		fmt.Fprintln(os.Stderr, "gentree: -out is required")
		os.Exit(2)
	}
	var err error
	if *entries > 0 {
		err = generateLong(*out, *entries, *seed)
	} else {
		err = generate(*out, *sessions, int64(*totalMB)<<20, *seed)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gentree:", err)
		os.Exit(1)
	}
}

func generate(out string, n int, total int64, seed uint64) error {
	if err := os.Mkdir(out, 0o700); err != nil {
		return fmt.Errorf("create tree: %w", err)
	}
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	base := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	mean := total / int64(n)
	for i := 0; i < n; i++ {
		dir := filepath.Join(out, fmt.Sprintf("--home-dev-project%02d--", i%40))
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return err
		}
		// Sizes vary by a factor of ~10 around the mean, as real trees do.
		target := int64(float64(mean) * (0.2 + rng.ExpFloat64()*0.8))
		start := base.Add(time.Duration(i) * 37 * time.Minute)
		id := uuid(rng)
		name := filepath.Join(dir, strings.ReplaceAll(start.Format("2006-01-02T15-04-05.000Z"), ".", "-")+"_"+id+".jsonl")
		if err := writeSession(name, id, start, target, rng); err != nil {
			return err
		}
	}
	return nil
}

func uuid(rng *rand.Rand) string {
	var b [16]byte
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

var words = strings.Fields(`the a function returns error when file path config test build run
value struct package import module handler request response cache index store segment
frame offset checksum manifest ledger rollback migrate verify session entry parent branch
ünïcödé 日本語 emoji 😀 <tag> & "quoted" back\slash`)

func text(rng *rand.Rand, n int) string {
	var sb strings.Builder
	for sb.Len() < n {
		if sb.Len() > 0 {
			if rng.IntN(12) == 0 {
				sb.WriteString("\n")
			} else {
				sb.WriteByte(' ')
			}
		}
		sb.WriteString(words[rng.IntN(len(words))])
	}
	return sb.String()
}

func js(s string) string { return strconv.Quote(s) } // valid JSON for this vocabulary

func writeSession(path, id string, t time.Time, target int64, rng *rand.Rand) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	var size int64
	line := func(s string) {
		n, _ := w.WriteString(s)
		w.WriteByte('\n')
		size += int64(n) + 1
	}
	ts := func() string {
		t = t.Add(time.Duration(500+rng.IntN(20000)) * time.Millisecond)
		return t.Format("2006-01-02T15:04:05.000Z")
	}
	ms := func() string { return strconv.FormatInt(t.UnixMilli(), 10) }
	line(fmt.Sprintf(`{"type":"session","version":3,"id":%q,"timestamp":%q,"cwd":"/home/dev/project"}`, id, t.Format("2006-01-02T15:04:05.000Z")))
	var ids []string
	used := map[string]bool{}
	parent := ""
	seq := 0
	next := func() (string, string) {
		seq++
		// Ids must be unique within a session (pisess refuses duplicates):
		// draw again on a repeat, which large sessions do meet.
		eid := fmt.Sprintf("%08x", rng.Uint32())
		for used[eid] {
			eid = fmt.Sprintf("%08x", rng.Uint32())
		}
		used[eid] = true
		p := `"parentId":null`
		if parent != "" {
			p = `"parentId":` + js(parent)
		}
		// A few branches: re-parent onto an earlier entry.
		if len(ids) > 4 && rng.IntN(40) == 0 {
			p = `"parentId":` + js(ids[rng.IntN(len(ids))])
		}
		ids = append(ids, eid)
		parent = eid
		return eid, p
	}
	eid, p := next()
	line(fmt.Sprintf(`{"type":"model_change","id":%q,%s,"timestamp":%q,"provider":"anthropic","modelId":"claude-sonnet-4-5"}`, eid, p, ts()))
	for size < target {
		eid, p = next()
		line(fmt.Sprintf(`{"type":"message","id":%q,%s,"timestamp":%q,"message":{"role":"user","content":%s,"timestamp":%s}}`, eid, p, ts(), js(text(rng, 40+rng.IntN(400))), ms()))
		for k := 0; k < 1+rng.IntN(4); k++ {
			eid, p = next()
			call := fmt.Sprintf("call_%x", rng.Uint64())
			in, outTok := 1000+rng.IntN(50000), 50+rng.IntN(2000)
			line(fmt.Sprintf(`{"type":"message","id":%q,%s,"timestamp":%q,"message":{"role":"assistant","content":[{"type":"thinking","thinking":%s,"thinkingSignature":"sig"},{"type":"text","text":%s},{"type":"toolCall","id":%q,"name":"bash","arguments":{"command":%s,"timeout":120}}],"api":"anthropic-messages","provider":"anthropic","model":"claude-sonnet-4-5","usage":{"input":%d,"output":%d,"cacheRead":%d,"cacheWrite":0,"totalTokens":%d,"cost":{"input":%v,"output":%v,"cacheRead":0,"cacheWrite":0,"total":%v}},"stopReason":"toolUse","timestamp":%s}}`,
				eid, p, ts(), js(text(rng, 100+rng.IntN(600))), js(text(rng, 50+rng.IntN(800))), call, js(text(rng, 20+rng.IntN(80))),
				in, outTok, rng.IntN(20000), in+outTok, float64(in)*3e-6, float64(outTok)*15e-6, float64(in)*3e-6+float64(outTok)*15e-6, ms()))
			eid, p = next()
			line(fmt.Sprintf(`{"type":"message","id":%q,%s,"timestamp":%q,"message":{"role":"toolResult","toolCallId":%q,"toolName":"bash","content":[{"type":"text","text":%s}],"isError":false,"timestamp":%s}}`,
				eid, p, ts(), call, js(text(rng, 200+rng.IntN(6000))), ms()))
		}
		if rng.IntN(25) == 0 {
			eid, p = next()
			line(fmt.Sprintf(`{"type":"compaction","id":%q,%s,"timestamp":%q,"summary":%s,"firstKeptEntryId":%q,"tokensBefore":%d}`, eid, p, ts(), js(text(rng, 400)), ids[len(ids)/2], 20000+rng.IntN(100000)))
		}
	}
	eid, p = next()
	line(fmt.Sprintf(`{"type":"session_info","id":%q,%s,"timestamp":%q,"name":%s}`, eid, p, ts(), js(text(rng, 20))))
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// generateLong writes one session of n short entries, linear but for a branch
// every 64 entries: the shape where per-entry bookkeeping, not payload size,
// decides a run's memory.
func generateLong(out string, n int, seed uint64) error {
	dir := filepath.Join(out, "--home-dev-long--")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create tree: %w", err)
	}
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	t := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	id := uuid(rng)
	f, err := os.OpenFile(filepath.Join(dir, "2026-03-01T09-00-00-000Z_"+id+".jsonl"), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	fmt.Fprintf(w, `{"type":"session","version":3,"id":%q,"timestamp":%q,"cwd":"/home/dev/long"}`+"\n", id, t.Format("2006-01-02T15:04:05.000Z"))
	parent := "null"
	for i := 0; i < n; i++ {
		t = t.Add(time.Duration(100+rng.IntN(2000)) * time.Millisecond)
		// Sequential ids are unique by construction, 8 hex digits as pi's.
		eid := fmt.Sprintf("%08x", uint32(i)*2654435761)
		role := "user"
		if i%2 == 1 {
			role = "assistant"
		}
		var content string
		if role == "user" {
			content = js(text(rng, 20+rng.IntN(60)))
		} else {
			content = `[{"type":"text","text":` + js(text(rng, 20+rng.IntN(60))) + `}],"api":"anthropic-messages","provider":"anthropic","model":"m","usage":{"input":1,"output":1,"cacheRead":0,"cacheWrite":0,"totalTokens":2,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}},"stopReason":"stop"`
		}
		fmt.Fprintf(w, `{"type":"message","id":%q,"parentId":%s,"timestamp":%q,"message":{"role":%q,"content":%s,"timestamp":%d}}`+"\n",
			eid, parent, t.Format("2006-01-02T15:04:05.000Z"), role, content, t.UnixMilli())
		if i%64 != 63 {
			parent = strconv.Quote(eid)
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
