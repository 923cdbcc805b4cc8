package upgrade

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"pisess/writers/wire"
)

const testCorrelationID = "test-correlation-0001"

// recorder collects the events an upgrade records.
type recorder struct{ events []Event }

func (r *recorder) record(e Event) error { r.events = append(r.events, e); return nil }

// options returns real-run options for a session file in tree.
func options(tb testing.TB, tree, path string, rec *recorder) Options {
	tb.Helper()
	rel, err := filepath.Rel(tree, path)
	if err != nil {
		tb.Fatal(err)
	}
	return Options{
		LockTimeout:    time.Second,
		Tree:           tree,
		QuarantinePath: filepath.Join(tree, ".pisess", "quarantine", testCorrelationID, rel+".original"),
		Record:         rec.record,
	}
}

func run(tb testing.TB, path string, opt Options) *Result {
	tb.Helper()
	res, err := Upgrade(context.Background(), path, opt)
	if err != nil {
		tb.Fatalf("Upgrade(%s): %v", path, err)
	}
	return res
}

func copyFile(tb testing.TB, from, to string) {
	tb.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		tb.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		tb.Fatal(err)
	}
}

func writeFile(tb testing.TB, path, content string) string {
	tb.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		tb.Fatal(err)
	}
	return path
}

func readFile(tb testing.TB, path string) []byte {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// treeDigest lists every path under root with its type, mode, size,
// modification time and content digest: two equal digests mean nothing
// was created, removed or written.
func treeDigest(tb testing.TB, root string) string {
	tb.Helper()
	var lines []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		line := p + " " + fi.Mode().String() + " " + fi.ModTime().String()
		if fi.Mode().IsRegular() {
			line += " " + sha(readFile(tb, p))
		}
		lines = append(lines, line)
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

func mustParse(tb testing.TB, s string) wire.Value {
	tb.Helper()
	v, err := wire.ParseJSON([]byte(s), nil)
	if err != nil {
		tb.Fatal(err)
	}
	return v
}
