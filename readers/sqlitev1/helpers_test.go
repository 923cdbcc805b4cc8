package sqlitev1

import (
	"bytes"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"pisess/fixtures"
	"pisess/readers"
	"pisess/readers/jsonl"
)

// branchingSession is a realpi session with branches, read by both readers.
func branchingSession(tb testing.TB) string {
	tb.Helper()
	return filepath.Join(fixtures.VectorsDir(tb), "realpi", "01a20023-7338-7011-8430-2cb87c0c4faf", "source.jsonl")
}

// splitSession returns a JSONL session's header line and entry lines,
// without newlines, skipping blank lines.
func splitSession(path string) (string, []string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", nil, err
	}
	var lines []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.TrimSpace(l) != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) == 0 {
		return "", nil, fmt.Errorf("%s: empty", path)
	}
	return lines[0], lines[1:], nil
}

func headerID(header string) string {
	var h struct {
		ID string `json:"id"`
	}
	json.Unmarshal([]byte(header), &h)
	return h.ID
}

// buildDB writes a database in this process with the reference schema,
// the given header rows (id, json) and entry rows (seq, json), and closes
// it cleanly (its WAL is checkpointed and removed, as a finished pi leaves
// it).
func buildDB(tb testing.TB, path string, headers [][2]string, entries map[int64]string) {
	tb.Helper()
	d, err := sql.Open("sqlite", path)
	if err != nil {
		tb.Fatal(err)
	}
	defer d.Close()
	d.SetMaxOpenConns(1)
	for _, q := range referenceSchema {
		if _, err := d.Exec(q); err != nil {
			tb.Fatal(err)
		}
	}
	for _, h := range headers {
		if _, err := d.Exec("INSERT INTO pi_session_header(id, json) VALUES(?, ?)", h[0], h[1]); err != nil {
			tb.Fatal(err)
		}
	}
	seqs := make([]int64, 0, len(entries))
	for s := range entries {
		seqs = append(seqs, s)
	}
	sort.Slice(seqs, func(i, j int) bool { return seqs[i] < seqs[j] })
	for _, s := range seqs {
		if _, err := d.Exec("INSERT INTO pi_session_entries(seq, json) VALUES(?, ?)", s, entries[s]); err != nil {
			tb.Fatal(err)
		}
	}
}

// sessionRows turns a JSONL session into header and entry rows.
func sessionRows(tb testing.TB, src string) ([][2]string, map[int64]string) {
	tb.Helper()
	header, lines, err := splitSession(src)
	if err != nil {
		tb.Fatal(err)
	}
	entries := map[int64]string{}
	for i, l := range lines {
		entries[int64(i+1)] = l
	}
	return [][2]string{{headerID(header), header}}, entries
}

// readAll opens path and reads every entry.
func readAll(tb testing.TB, path string, opt Options) ([]readers.Entry, error) {
	tb.Helper()
	s, err := OpenWith(path, opt)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	var out []readers.Entry
	for {
		e, err := s.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, e)
	}
}

// jsonlEntries reads a JSONL session with the JSONL reader.
func jsonlEntries(tb testing.TB, path string) []readers.Entry {
	tb.Helper()
	s, err := jsonl.Open(path, jsonl.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	defer s.Close()
	var out []readers.Entry
	for {
		e, err := s.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, e)
	}
}

// sameEntries compares what SQLite gave with what JSONL gave: ids,
// parents, types and payload bytes, in order.
func sameEntries(tb testing.TB, got, want []readers.Entry) {
	tb.Helper()
	if len(got) != len(want) {
		tb.Fatalf("%d entries, JSONL has %d", len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.ID != w.ID || g.ParentID != w.ParentID || g.Type != w.Type || !bytes.Equal(g.Payload, w.Payload) {
			tb.Fatalf("entry %d differs:\n got %s %s %s %s\nwant %s %s %s %s", i+1,
				g.ID, g.ParentID, g.Type, g.Payload, w.ID, w.ParentID, w.Type, w.Payload)
		}
		if g.Position != int64(i+1) {
			tb.Fatalf("entry %d: position %d", i+1, g.Position)
		}
	}
}

// readsBranchingUnchanged reads db, which must give the entries of the
// branching session, and checks that db's directory still lists as before
// (dirState): the read created and changed nothing beside the database.
func readsBranchingUnchanged(tb testing.TB, db, before string) {
	tb.Helper()
	got, err := readAll(tb, db, Options{})
	if err != nil {
		tb.Fatal(err)
	}
	sameEntries(tb, got, jsonlEntries(tb, branchingSession(tb)))
	if after := dirState(tb, filepath.Dir(db)); after != before {
		tb.Fatalf("directory changed:\n%s\n->\n%s", before, after)
	}
}

// dirState lists a directory: name, mode, size, mtime, ctime and content
// digest of each entry, to prove a read left it exactly as it was.
func dirState(tb testing.TB, dir string) string {
	tb.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		tb.Fatal(err)
	}
	var b strings.Builder
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		info, err := os.Lstat(p)
		if err != nil {
			tb.Fatal(err)
		}
		content, _ := os.ReadFile(p)
		sum := sha256.Sum256(content)
		fmt.Fprintf(&b, "%s %v %d %d %s\n", e.Name(), info.Mode(), info.Size(), info.ModTime().UnixNano(), hex.EncodeToString(sum[:8]))
	}
	return b.String()
}

func mustRefuse(tb testing.TB, err error, class readers.Class, line int64, reasonHas ...string) *readers.RefusedError {
	tb.Helper()
	r := readers.AsRefused(err)
	if r == nil {
		tb.Fatalf("want RefusedError %s at %d, got %v", class, line, err)
	}
	if r.Class != class || r.Line != line {
		tb.Fatalf("want %s at %d, got %s at %d: %s", class, line, r.Class, r.Line, r.Reason)
	}
	for _, s := range reasonHas {
		if !strings.Contains(r.Reason, s) {
			tb.Fatalf("reason %q lacks %q", r.Reason, s)
		}
	}
	return r
}

func openRaw(tb testing.TB, path string) *sql.DB {
	tb.Helper()
	d, err := sql.Open("sqlite", path)
	if err != nil {
		tb.Fatal(err)
	}
	return d
}
