package verify

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"pisess/fixtures"
	"pisess/readers"
	"pisess/readers/jsonl"
	"pisess/writers/durable"
	"pisess/writers/store"
	"pisess/writers/wire"
)

// fixed is the clock the reference vectors were written with.
func fixed() time.Time { return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) }

// session is a session file in a tree, with its sidecar path.
type session struct {
	tree, path, sidecar string
}

// newSession copies a vector's source.jsonl into a fresh tree as
// <tree>/--home-u-proj--/2026-01-05T10-00-00_<vector>.jsonl, without a sidecar.
func newSession(tb testing.TB, vector string) session {
	tb.Helper()
	tree := tb.TempDir()
	dir := filepath.Join(tree, "--home-u-proj--")
	if err := os.Mkdir(dir, 0o700); err != nil {
		tb.Fatal(err)
	}
	s := session{tree: tree, path: filepath.Join(dir, "2026-01-05T10-00-00_"+filepath.Base(vector)+".jsonl")}
	s.sidecar = strings.TrimSuffix(s.path, ".jsonl") + ".v2"
	data, err := os.ReadFile(filepath.Join(fixtures.VectorsDir(tb), vector, "source.jsonl"))
	if err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(s.path, data, 0o600); err != nil {
		tb.Fatal(err)
	}
	return s
}

// openSrc opens the session's source.
func openSrc(tb testing.TB, path string) *jsonl.Source {
	tb.Helper()
	src, err := jsonl.Open(path, jsonl.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { src.Close() })
	return src
}

// build writes a store at dir from the session at path with writers/store,
// as a migration would (max segment size as given, 0 for the default).
func build(tb testing.TB, path, dir string, max int64) {
	tb.Helper()
	src := openSrc(tb, path)
	w, err := store.Create(dir, store.Options{Clock: fixed, MaxSegmentBytes: max})
	if err != nil {
		tb.Fatal(err)
	}
	for {
		e, err := src.Next()
		if err != nil {
			break
		}
		if _, err := w.Append(e.ID, e.ParentID, e.Type, e.Payload); err != nil {
			tb.Fatal(err)
		}
	}
	if _, err := w.WriteManifest(src.Header().ID, string(wire.FormatJSONLv3)); err != nil {
		tb.Fatal(err)
	}
	if err := w.Seal(); err != nil {
		tb.Fatal(err)
	}
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
}

// migrate builds the session's sidecar and marks it clean with the
// source's fingerprint: what a migration leaves.
func migrate(tb testing.TB, s session) {
	tb.Helper()
	build(tb, s.path, s.sidecar, 0)
	markClean(tb, s)
}

func markClean(tb testing.TB, s session) {
	tb.Helper()
	fp, err := Fingerprint(s.path)
	if err != nil {
		tb.Fatal(err)
	}
	writeState(tb, s.sidecar, wire.SourceState{State: wire.SourceClean, SourceFingerprint: &fp})
}

func writeState(tb testing.TB, sidecar string, st wire.SourceState) {
	tb.Helper()
	if err := store.WriteSourceState(durable.OS, sidecar, st); err != nil {
		tb.Fatal(err)
	}
}

// copyReference copies a vector's reference.v2 to dst and adds what git
// lost: the empty directories, the mutation lock, private modes.
func copyReference(tb testing.TB, vector, dst string) {
	tb.Helper()
	fixtures.CopyTree(tb, filepath.Join(fixtures.VectorsDir(tb), vector, "reference.v2"), dst)
	for _, d := range append([]string{""}, store.StoreDirs...) {
		p := filepath.Join(dst, d)
		if err := os.MkdirAll(p, 0o700); err != nil {
			tb.Fatal(err)
		}
	}
	if err := os.WriteFile(store.MutationLockPath(dst), nil, 0o600); err != nil {
		tb.Fatal(err)
	}
	err := filepath.Walk(dst, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if fi.IsDir() {
			return os.Chmod(p, 0o700)
		}
		return os.Chmod(p, 0o600)
	})
	if err != nil {
		tb.Fatal(err)
	}
}

// appendLine appends text to the file at path.
func appendLine(tb testing.TB, path, text string) {
	tb.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(text); err != nil {
		tb.Fatal(err)
	}
}

// rewriteManifest applies edit to the store's manifest and writes it back
// with a recomputed hash: a manifest that is valid but says something else.
func rewriteManifest(tb testing.TB, dir string, edit func(*wire.Manifest)) {
	tb.Helper()
	b, err := os.ReadFile(store.ManifestPath(dir))
	if err != nil {
		tb.Fatal(err)
	}
	m, err := wire.ParseManifest(b)
	if err != nil {
		tb.Fatal(err)
	}
	edit(&m)
	m.Integrity.ManifestHash = wire.ManifestHash(m)
	if err := os.WriteFile(store.ManifestPath(dir), wire.AppendManifest(nil, m), 0o600); err != nil {
		tb.Fatal(err)
	}
}

func codes(fs []Finding) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.Code)
	}
	return out
}

func hasCode(fs []Finding, code string) bool {
	for _, f := range fs {
		if f.Code == code {
			return true
		}
	}
	return false
}

func me() AcceptOptions {
	return AcceptOptions{OwnerUID: os.Getuid(), OwnerGID: os.Getgid()}
}

func against(tb testing.TB, path, dir string, opt Options) Report {
	tb.Helper()
	opt.SourcePath = path
	rep, err := AgainstSource(context.Background(), openSrc(tb, path), dir, opt)
	if err != nil {
		tb.Fatal(err)
	}
	return rep
}

var _ readers.Source = (*jsonl.Source)(nil)
