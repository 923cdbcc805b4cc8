package commands

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"pisess/fixtures"
	"pisess/verify"
)

// fsckTree is a session tree holding one session migrated by the real
// pipeline (pisess migrate): <root>/--p--/s.jsonl and its sidecar s.v2.
type fsckTree struct {
	root, session, sidecar string
}

// newFsckTree migrates a copy of the bundled example session (the shared
// vector accept/tricky) in a fresh tree.
func newFsckTree(tb testing.TB) fsckTree {
	tb.Helper()
	root, session := placeSession(tb, exampleSession, "s.jsonl")
	if r := pisess(tb, "migrate", "--json", "--correlation-id", "fixture-migration", root); r.code != ExitClean {
		tb.Fatalf("migrate: %s", r)
	}
	return fsckTree{root: root, session: session, sidecar: filepath.Join(filepath.Dir(session), "s.v2")}
}

// copies writes a copy of the tree's session as <name>.jsonl beside it for
// each name, and returns their directory.
func (tr fsckTree) copies(tb testing.TB, names ...string) string {
	tb.Helper()
	dir := filepath.Dir(tr.session)
	b, err := os.ReadFile(tr.session)
	if err != nil {
		tb.Fatal(err)
	}
	for _, n := range names {
		if err := os.WriteFile(filepath.Join(dir, n+".jsonl"), b, 0o600); err != nil {
			tb.Fatal(err)
		}
	}
	return dir
}

// fsckJSON runs pisess fsck --json [args] root and decodes its report.
func fsckJSON(tb testing.TB, root string, args ...string) (int, fsckReport, result) {
	tb.Helper()
	r := pisess(tb, append(append([]string{"fsck", "--json"}, args...), root)...)
	var rep fsckReport
	if err := json.Unmarshal(detail(tb, r.stdout), &rep); err != nil {
		tb.Fatalf("fsck --json: %v\n%s", err, r)
	}
	return r.code, rep, r
}

// findings lists every finding of a report.
func allFindings(rep fsckReport) []verify.FsckFinding {
	var out []verify.FsckFinding
	for _, t := range rep.Trees {
		out = append(out, t.Findings...)
		for _, s := range t.Sessions {
			out = append(out, s.Findings...)
		}
	}
	return out
}

func hasCode(rep fsckReport, code string) bool {
	for _, f := range allFindings(rep) {
		if f.Code == code && !f.Notice {
			return true
		}
	}
	return false
}

func codes(rep fsckReport) string {
	var parts []string
	for _, f := range allFindings(rep) {
		s := f.Code
		switch {
		case f.Notice:
			s += "(notice)"
		case f.Repaired:
			s += "(repaired)"
		case f.RepairError != "":
			s += "(left: " + f.RepairError + ")"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ", ")
}

// snapshot is every regular file of a tree outside .pisess/, by path.
func snapshot(tb testing.TB, root string) map[string][]byte {
	tb.Helper()
	out := map[string][]byte{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == ".pisess" {
			return filepath.SkipDir
		}
		if d.Type().IsRegular() {
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			out[path] = b
		}
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

// assertNothingLost checks that every byte of every file the tree held
// before the repair can still be had: the file is unchanged or grew (an
// appended ledger line), or its old bytes are a file of the quarantine (or
// of the tree: a restored backup), or they are the file's (or a
// quarantined file's) bytes followed by a quarantined cut tail.
func assertNothingLost(tb testing.TB, root string, before map[string][]byte) {
	tb.Helper()
	var cands [][]byte
	bySum := map[[32]byte]bool{}
	addCand := func(b []byte) {
		cands = append(cands, b)
		bySum[sha256.Sum256(b)] = true
	}
	// Anywhere in the tree: the quarantine, or where a repair put it back
	// (a restored backup is the sidecar now).
	_ = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if b, err := os.ReadFile(path); err == nil {
				addCand(b)
			}
		}
		return nil
	})
	for path, old := range before {
		now, err := os.ReadFile(path)
		if err == nil && bytes.HasPrefix(now, old) {
			continue
		}
		if bySum[sha256.Sum256(old)] || grownCopy(cands, old) {
			continue
		}
		prefixes := cands
		if err == nil {
			prefixes = append([][]byte{now}, cands...)
		}
		found := false
		for _, p := range prefixes {
			if len(p) < len(old) && bytes.HasPrefix(old, p) && bySum[sha256.Sum256(old[len(p):])] {
				found = true
				break
			}
		}
		if !found {
			sum := sha256.Sum256(old)
			tb.Errorf("the bytes of %s (%d bytes, sha256 %s) are neither in the tree nor in the quarantine",
				path, len(old), hex.EncodeToString(sum[:]))
		}
	}
}

// grownCopy reports whether a candidate holds old followed by more (a
// quarantined ledger that got one more line before it was moved).
func grownCopy(cands [][]byte, old []byte) bool {
	for _, c := range cands {
		if len(c) > len(old) && bytes.HasPrefix(c, old) {
			return true
		}
	}
	return false
}

func appendFile(tb testing.TB, path string, data string) {
	tb.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(data); err != nil {
		tb.Fatal(err)
	}
}

func fileSize(tb testing.TB, path string) int64 {
	tb.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		tb.Fatal(err)
	}
	return fi.Size()
}

// copyDir copies a store directory (modes kept).
func copyDir(tb testing.TB, src, dst string) {
	tb.Helper()
	fixtures.CopyTree(tb, src, dst)
}
