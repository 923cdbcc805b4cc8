package commands

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"pisess/commands/engine"
	"pisess/fixtures"
)

// TestBuildReferenceVectors builds every vector that has a reference store
// and compares segments, index and manifest byte for byte, and the set of
// files in segments/ and index/ (an empty store has no index).
func TestBuildReferenceVectors(t *testing.T) {
	vectors := fixtures.VectorsDir(t)
	t.Setenv(EnvClock, fixedClock)
	var n int
	for _, group := range []string{"accept", "edge", "realpi"} {
		refs, _ := filepath.Glob(filepath.Join(vectors, group, "*", "reference.v2"))
		for _, ref := range refs {
			dir := filepath.Dir(ref)
			name := group + "/" + filepath.Base(dir)
			n++
			t.Run(name, func(t *testing.T) {
				out := filepath.Join(t.TempDir(), "store.v2")
				args := []string{"build", "--json"}
				if name == "accept/rollover" {
					args = append(args, "--max-segment-bytes", "4096")
				}
				r := pisess(t, append(args, filepath.Join(dir, "source.jsonl"), out)...)
				if r.code != ExitClean {
					t.Fatalf("%s", r)
				}
				obj := r.jsonObject(t)
				if obj["store"] != out || obj["sourceFormat"] != "jsonl_v3" {
					t.Errorf("report: %v", obj)
				}
				compareStores(t, ref, out)
			})
		}
	}
	if n < 10 {
		t.Fatalf("only %d reference stores found under %s", n, vectors)
	}
}

// compareStores checks that got holds exactly want's manifest, segments
// and index, and the private modes pi demands.
func compareStores(t *testing.T, want, got string) {
	t.Helper()
	for _, sub := range []string{"segments", "index"} {
		w, g := listDir(t, filepath.Join(want, sub)), listDir(t, filepath.Join(got, sub))
		if strings.Join(w, ",") != strings.Join(g, ",") {
			t.Errorf("%s/: files %v, want %v", sub, g, w)
		}
		for _, name := range w {
			sameBytes(t, filepath.Join(want, sub, name), filepath.Join(got, sub, name))
		}
	}
	sameBytes(t, filepath.Join(want, "manifest.json"), filepath.Join(got, "manifest.json"))
	for _, sub := range []string{"checkpoints", "migrations", "tmp"} {
		if names := listDir(t, filepath.Join(got, sub)); len(names) != 0 {
			t.Errorf("%s/ not empty: %v", sub, names)
		}
	}
	if _, err := os.Stat(filepath.Join(got, "source-state.json")); err == nil {
		t.Errorf("build wrote source-state.json")
	}
	err := filepath.WalkDir(got, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		want := fs.FileMode(0o600)
		if d.IsDir() {
			want = 0o700
		}
		if info.Mode().Perm() != want {
			t.Errorf("%s: mode %04o, want %04o", path, info.Mode().Perm(), want)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func listDir(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	return names
}

func sameBytes(t *testing.T, want, got string) {
	t.Helper()
	w, err := os.ReadFile(want)
	if err != nil {
		t.Fatal(err)
	}
	g, err := os.ReadFile(got)
	if err != nil {
		t.Errorf("%v", err)
		return
	}
	if !bytes.Equal(w, g) {
		t.Errorf("%s differs from the reference %s%s", got, want, firstDiff(w, g))
	}
}

// firstDiff describes the first differing line of two files.
func firstDiff(want, got []byte) string {
	wl, gl := bytes.Split(want, []byte("\n")), bytes.Split(got, []byte("\n"))
	for i := 0; i < len(wl) || i < len(gl); i++ {
		var w, g []byte
		if i < len(wl) {
			w = wl[i]
		}
		if i < len(gl) {
			g = gl[i]
		}
		if !bytes.Equal(w, g) {
			return "\nfirst difference at line " + itoa(i+1) + ":\n want " + string(w) + "\n  got " + string(g)
		}
	}
	return ""
}

func TestBuildRefused(t *testing.T) {
	out := filepath.Join(t.TempDir(), "refused.v2")
	r := pisess(t, "build", refusedSession, out)
	if r.code != ExitOperational {
		t.Fatalf("want exit %d: %s", ExitOperational, r)
	}
	if !strings.Contains(r.stderr, ":16:") || !strings.Contains(r.stderr, "custom_message") {
		t.Errorf("refusal does not name line 16 and custom_message: %q", r.stderr)
	}
	if _, err := os.Lstat(out); !os.IsNotExist(err) {
		t.Errorf("a refused build left %s: %v", out, err)
	}
	assertNoSiblings(t, filepath.Dir(out))
	j := pisess(t, "build", "--json", refusedSession, out)
	if j.code != ExitOperational {
		t.Fatalf("%s", j)
	}
	checkErrorObject(t, j, ClassRefused)
}

func TestBuildForce(t *testing.T) {
	store := buildStore(t)
	r := pisess(t, "build", "--force", "--json", exampleSession, store)
	if r.code != ExitClean {
		t.Fatalf("%s", r)
	}
	if obj := r.jsonObject(t); obj["replaced"] != true {
		t.Errorf("replaced = %v", obj["replaced"])
	}
	if r := pisess(t, "inspect", store); r.code != ExitClean {
		t.Errorf("rebuilt store: %s", r)
	}
	assertNoSiblings(t, filepath.Dir(store))

	// An empty directory may be replaced; a directory holding anything
	// else may not, and is left as it was.
	empty := filepath.Join(t.TempDir(), "empty")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	if r := pisess(t, "build", "--force", exampleSession, empty); r.code != ExitClean {
		t.Errorf("force over an empty dir: %s", r)
	}
	other := t.TempDir()
	keep := filepath.Join(other, "precious.txt")
	if err := os.WriteFile(keep, []byte("keep me"), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := pisess(t, "build", "--force", exampleSession, other); r.code != ExitUsage {
		t.Errorf("force over a non-store dir: %s", r)
	}
	if b, err := os.ReadFile(keep); err != nil || string(b) != "keep me" {
		t.Errorf("non-store dir changed: %q %v", b, err)
	}
}

func TestBuildMissingSession(t *testing.T) {
	r := pisess(t, "build", filepath.Join(t.TempDir(), "none.jsonl"), filepath.Join(t.TempDir(), "x.v2"))
	if r.code != ExitOperational {
		t.Fatalf("%s", r)
	}
}

// assertNoSiblings fails when dir holds staging or backup leftovers.
func assertNoSiblings(t *testing.T, dir string) {
	t.Helper()
	for _, n := range listDir(t, dir) {
		if strings.Contains(n, ".staging.") || strings.Contains(n, ".backup.") {
			t.Errorf("leftover %s in %s", n, dir)
		}
	}
}

// buildClock is fixedClock as a clock, for runBuild called directly.
func buildClock() time.Time { return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) }

func TestBuildAndInspect(t *testing.T) {
	out := filepath.Join(t.TempDir(), "s.v2")
	var progress int64
	rep, err := runBuild(context.Background(), buildOptions{
		Session: exampleSession, OutDir: out, Clock: buildClock,
		Progress: func(n int64) { progress += n },
	})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Entries != 11 || rep.Bytes != 5971 || rep.Segments != 1 || rep.SourceFormat != "jsonl_v3" ||
		rep.SessionID != "3f2b8c1e-9a4d-4e6f-8b2a-1c5d7e9f0a1b" || uint64(progress) != rep.Bytes || rep.Replaced {
		t.Errorf("report %+v, progress %d", rep, progress)
	}
	if rep.Tally() != (engine.Tally{}) {
		t.Errorf("tally %+v", rep.Tally())
	}
	ins, err := runInspect(context.Background(), out)
	if err != nil {
		t.Fatal(err)
	}
	if len(ins.Problems) != 0 || ins.Manifest == nil || ins.Counts.Entries != 11 || !ins.Counts.Complete ||
		ins.Manifest.Integrity.ChainHash != rep.ChainHash {
		t.Errorf("inspect %+v", ins)
	}
	if len(ins.ManifestDocument()) == 0 {
		t.Error("no manifest document")
	}
}

func TestBuildOutDir(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, out string)
		force bool
		usage bool
	}{
		{"absent", func(*testing.T, string) {}, false, false},
		{"exists without force", mkdir, false, true},
		{"empty dir with force", mkdir, true, false},
		{"file with force", func(t *testing.T, out string) { write(t, out) }, true, true},
		{"foreign dir with force", func(t *testing.T, out string) { mkdir(t, out); write(t, filepath.Join(out, "notes.txt")) }, true, true},
		{"dir of store names but no manifest or segments", func(t *testing.T, out string) { mkdir(t, out); mkdir(t, filepath.Join(out, "tmp")) }, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "s.v2")
			tt.setup(t, out)
			_, err := runBuild(context.Background(), buildOptions{Session: exampleSession, OutDir: out, Force: tt.force, Clock: buildClock})
			var u *engine.UsageError
			if got := errors.As(err, &u); got != tt.usage {
				t.Fatalf("usage error %v, want %v (err %v)", got, tt.usage, err)
			}
		})
	}
}

func TestBuildSegmentSizeBounds(t *testing.T) {
	for _, n := range []int64{-1, 64<<20 + 1} {
		_, err := runBuild(context.Background(), buildOptions{Session: exampleSession, OutDir: filepath.Join(t.TempDir(), "x"), MaxSegmentBytes: n})
		var u *engine.UsageError
		if !errors.As(err, &u) {
			t.Errorf("MaxSegmentBytes %d: %v, want a usage error", n, err)
		}
	}
}

func mkdir(t *testing.T, p string) {
	t.Helper()
	if err := os.Mkdir(p, 0o700); err != nil {
		t.Fatal(err)
	}
}

func write(t *testing.T, p string) {
	t.Helper()
	if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
}
