package jsonl

import (
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"pisess/readers"
)

// frame is what the tests compare of a reference frame.
// refused is a vector's REFUSED file.
type refused struct {
	Error  string `json:"error"`
	Line   int64  `json:"line"`
	Detail string `json:"detail"`
}

func readRefused(tb testing.TB, dir string) (refused, bool) {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "REFUSED"))
	if errors.Is(err, os.ErrNotExist) {
		return refused{}, false
	}
	if err != nil {
		tb.Fatal(err)
	}
	var r refused
	if err := json.Unmarshal(b, &r); err != nil {
		tb.Fatal(err)
	}
	return r, true
}

// readAll opens path and reads every entry.
func readAll(tb testing.TB, path string, opt Options) ([]readers.Entry, *Source, error) {
	tb.Helper()
	s, err := Open(path, opt)
	if err != nil {
		return nil, nil, err
	}
	defer s.Close()
	var out []readers.Entry
	for {
		e, err := s.Next()
		if err == io.EOF {
			return out, s, nil
		}
		if err != nil {
			return out, s, err
		}
		out = append(out, e)
	}
}

// writeFile writes content into a new file in a temp dir.
func writeFile(tb testing.TB, name, content string) string {
	tb.Helper()
	p := filepath.Join(tb.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		tb.Fatal(err)
	}
	return p
}

// mustRefuse asserts err is a RefusedError of class at line, and returns it.
func mustRefuse(tb testing.TB, err error, class readers.Class, line int64, reasonHas ...string) *readers.RefusedError {
	tb.Helper()
	r := readers.AsRefused(err)
	if r == nil {
		tb.Fatalf("want RefusedError %s at line %d, got %v", class, line, err)
	}
	if r.Class != class || r.Line != line {
		tb.Fatalf("want %s at line %d, got %s at line %d: %s", class, line, r.Class, r.Line, r.Reason)
	}
	for _, s := range reasonHas {
		if !strings.Contains(r.Reason, s) {
			tb.Fatalf("reason %q lacks %q", r.Reason, s)
		}
	}
	return r
}

const testHeader = `{"type":"session","version":3,"id":"7c1d2e3f-0000-4000-8000-000000000001","timestamp":"2025-06-01T00:00:00.000Z","cwd":"/x"}`
